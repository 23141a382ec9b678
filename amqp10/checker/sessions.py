"""Session rules (2.5, 2.7.2, 2.7.4, 2.7.10): begin/end pairing, channels, windows, ids.

Owns: `SessionRules`, the checker mixin for begin, end and the session half of flow and
transfer (transfer-id = next-outgoing-id, incoming-window horizons). Calls into
`LinkRules` for the link half of flow and transfer. May touch: the state records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.checker.horizons import horizon_of
from amqpspec.amqp10.checker.state import Peer, Session, SessionEnd
from amqpspec.amqp10.origins import other
from amqpspec.amqp10.serial import serial_add

if TYPE_CHECKING:
    from amqpspec.amqp10.checker.core import Checker
    from amqpspec.amqp10.frames import Frame


class SessionRules:
    def _session_end(
        self: Checker, origin: str, peer: Peer, frame: Frame, idx: int
    ) -> SessionEnd | None:
        """The sender's session end on the frame's channel, or a violation."""
        end = peer.sessions.get(frame.channel)
        if end is not None:
            return end
        if frame.channel in peer.ended_channels:
            self._report(
                "session.frame-after-end",
                idx,
                origin,
                f"{frame.name} on channel {frame.channel} after this peer's end",
            )
        else:
            self._report(
                "session.no-session",
                idx,
                origin,
                f"{frame.name} on channel {frame.channel}, where this peer began no session",
            )
        return None

    def _on_begin(self: Checker, origin: str, peer: Peer, frame: Frame, idx: int, time: Any):
        begin = frame.performative
        channel = frame.channel
        partner = self.peers[other(origin)]
        if partner.open is not None and channel > partner.open.channel_max:
            self._report(
                "connection.channel-max",
                idx,
                origin,
                f"begin on channel {channel}, partner's channel-max is {partner.open.channel_max}",
            )
        if channel in peer.sessions:
            self._report(
                "session.channel-in-use",
                idx,
                origin,
                f"begin on channel {channel}, already in use by this peer's session",
            )
            return
        remote = begin.remote_channel
        initiator: SessionEnd | None = None
        if remote is None:
            session = Session()
            self._sessions[id(session)] = session
            peer.unanswered_begins[channel] = session
        else:
            answered = partner.unanswered_begins.pop(remote, None)
            if answered is None:
                self._report(
                    "session.remote-channel",
                    idx,
                    origin,
                    f"begin with remote-channel {remote}: the peer has no unanswered begin there",
                )
                session = Session()
                self._sessions[id(session)] = session
            else:
                session = answered
                initiator = session.ends.get(other(origin))
                if initiator is not None:
                    self._prove(origin, initiator.begin_idx)  # an answer proves receipt
        end = SessionEnd(session, channel, begin, idx)
        session.ends[origin] = end
        peer.sessions[channel] = end
        peer.ended_channels.discard(channel)
        if initiator is not None:
            # Our begin grants the initiator's transfers; its begin named its first id.
            end.incoming.grant(idx, horizon_of(initiator.next_outgoing_id, begin.incoming_window))
            for grant_idx, window in initiator.pending_grants:
                initiator.incoming.grant(grant_idx, horizon_of(begin.next_outgoing_id, window))
            initiator.pending_grants.clear()
        else:
            end.pending_grants.append((idx, begin.incoming_window))

    def _on_end(self: Checker, origin: str, peer: Peer, frame: Frame, idx: int, time: Any):
        end = self._session_end(origin, peer, frame, idx)
        if end is None:
            return
        end.ended = True
        del peer.sessions[frame.channel]
        # an unanswered begin stays answerable: the partner may have read the begin and
        # not yet this end (2.5.2 answers it, then the end; a race, not a violation)
        peer.ended_channels.add(frame.channel)
        session = end.session
        for link in end.handles.values():
            self._end_detached(session, link, origin)  # the end detaches the link (2.7.8)
        end.handles.clear()
        if all(e.ended for e in session.ends.values()):
            self._sessions.pop(id(session), None)
        if len(session.ends) == 2 and all(e.ended for e in session.ends.values()):
            # an unanswered begin keeps its links: its answer may answer their attaches
            for link in [link for links in session.links.values() for link in links]:
                self._forget_link(session, link)

    def _on_flow(self: Checker, origin: str, peer: Peer, frame: Frame, idx: int, time: Any):
        end = self._session_end(origin, peer, frame, idx)
        if end is None:
            return
        flow = frame.performative
        if flow.next_outgoing_id != end.next_outgoing_id:
            self._report(
                "session.next-outgoing-id",
                idx,
                origin,
                f"flow next-outgoing-id {flow.next_outgoing_id:#x}, but "
                f"{end.next_outgoing_id:#x} after the transfer frames sent",
            )
            end.next_outgoing_id = flow.next_outgoing_id
        self._session_grant(origin, end, flow, idx)
        session = end.session
        if flow.next_incoming_id is not None:
            self._incoming_read(origin, end, flow.next_incoming_id, idx)
        session.echo_pending.pop(origin, None)
        if flow.handle is None:
            self._session_flow_fields(origin, flow, idx)
            if flow.echo:
                session.echo_pending[other(origin)] = (idx, time)
            return
        self._link_flow(origin, end, flow, idx, time)

    def _session_grant(self: Checker, origin: str, end: SessionEnd, flow: Any, idx: int) -> None:
        """The flow's incoming-window is a new horizon for the peer's transfer-ids (2.5.6)."""
        window = flow.incoming_window
        if flow.next_incoming_id is not None:
            end.incoming.grant(idx, horizon_of(flow.next_incoming_id, window))
            return
        remote = end.session.ends.get(other(origin))
        if remote is None:
            end.pending_grants.append((idx, window))
        else:
            end.incoming.grant(idx, horizon_of(remote.begin.next_outgoing_id, window))

    def _on_transfer(self: Checker, origin: str, peer: Peer, frame: Frame, idx: int, time: Any):
        end = self._session_end(origin, peer, frame, idx)
        if end is None:
            return
        transfer_id = end.next_outgoing_id
        end.next_outgoing_id = serial_add(transfer_id, 1)
        receiver = end.session.ends.get(other(origin))
        if receiver is not None:
            grants = receiver.incoming
            grants.prove(self.proven[origin])
            if grants.beyond_every(transfer_id):
                best = grants.best()
                where = f"horizon {best.horizon:#x} from frame {best.idx}" if best else "no window"
                self._report(
                    "session.window-violation",
                    idx,
                    origin,
                    f"transfer-id {transfer_id:#x} beyond every incoming-window granted ({where})",
                )
        self._link_transfer(origin, end, frame, idx, time)

    def _session_sweep(self: Checker, session: Session, now: float, bound: float) -> None:
        """2.7.4: a session-level echo (flow without handle) answered by any flow."""
        if session.echo_pending:
            self._unanswered_echoes(session.echo_pending, now, bound, "session echo request", "")
