"""The `management-node` admin adapter: queues managed over AMQP through RabbitMQ 4's
`/management` node (HTTP-over-AMQP on a link pair), so a broker needs no HTTP port.

Owns: `ManagementNodeAdmin` (declare, delete, purge, depth; alarms through rabbitmqctl when
the profile says so; users UNSUPPORTED: RabbitMQ 4's /management node has no user routes)
and its one connection (a conformance Probe, opened on first use and again after a
failure, or a case's own probe given to `ManagementNodeAdmin.over`, so that what a case
asks the node is in its trace and the node sees that connection as the asker). Requests:
properties to = the path, subject = the method, message-id, reply-to "$me"; body one
amqp-value. Replies: correlation-id = the message-id,
subject = the status code. Touches nothing else (messages through amqp10.message).
"""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from amqpspec.amqp10.composites import Properties, Source, Target
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.spec import SndSettleMode
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.admin.base import Admin
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.verdicts import HarnessError

ADDRESS = "/management"
LINK_PAIR = "management-link-pair"  # RabbitMQ 4 clients' name for the pair
_ids = itertools.count(1)


class ManagementNodeAdmin(Admin):
    """Admin through the /management node of the broker at `url` (amqp://user:pass@h:p)."""

    name = "management-node"

    def __init__(self, url: str, alarms: Admin | None = None, wait: float = 10.0) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 5672
        self.username = unquote(parts.username) if parts.username else None
        self.password = unquote(parts.password) if parts.password else None
        self.wait = wait
        self.alarms = alarms
        self._probe: Probe | None = None
        self._sender: Any = None
        self._receiver: Any = None

    @classmethod
    def over(cls, probe: Probe) -> ManagementNodeAdmin:
        """Requests on a link pair of `probe`'s (a case's connection, opened here if not
        yet): queues it declares exclusive are that connection's."""
        node = cls(f"amqp://{probe.host}:{probe.port}", wait=probe.wait)
        node._attach_pair(probe)
        return node

    # ------------------------------------------------------------------ transport
    def _connect(self) -> Probe:
        if self._probe is not None and not self._probe.closed:
            return self._probe
        mechanism = "PLAIN" if self.username is not None else "ANONYMOUS"
        probe = Probe(
            self.host,
            self.port,
            username=self.username,
            password=self.password,
            sasl_mechanism=mechanism,
            wait=self.wait,
        )
        self._attach_pair(probe)
        return probe

    def _attach_pair(self, probe: Probe) -> None:
        session = probe.open_session()
        options = {
            "name": LINK_PAIR,
            "snd_settle_mode": SndSettleMode.SETTLED,
            "properties": {symbol("paired"): True},
        }
        self._sender = probe.attach_sender(session, Target(address=ADDRESS), **options)
        self._receiver = probe.attach_receiver(
            session, Source(address=ADDRESS), credit=100, **options
        )
        self._probe = probe

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request to the node: (status code, reply body)."""
        try:
            probe = self._connect()
            message_id = f"amqpspec-admin-{next(_ids)}"
            message = Message.of(
                body,
                properties=Properties(
                    message_id=message_id, to=path, subject=method, reply_to="$me"
                ),
            )
            probe.send_message(self._sender, message, settled=True)
            if self._receiver.link_credit < 10:
                probe.grant(self._receiver, 100)
            while True:
                reply = Message.decode(probe.next_transfer(self._receiver).payload)
                props = reply.properties
                if props is not None and props.correlation_id == message_id:
                    return int(props.subject or 0), reply.value
        except Exception as exc:
            self.close()
            raise HarnessError(f"management node {method} {path}: {exc}") from exc

    def call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200,)) -> Any:
        status, reply = self.request(method, path, body)
        if status not in ok:
            raise HarnessError(f"management node {method} {path}: {status} {reply}")
        return reply

    def close(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            try:
                probe.close(wait=False)
            except Exception:
                probe.disconnect()

    # ------------------------------------------------------------------ Admin
    def declare_queue(self, queue: str, arguments: dict[str, Any] | None = None) -> None:
        spec = {
            "durable": True,
            "exclusive": False,
            "auto_delete": False,
            "arguments": arguments if arguments is not None else {"x-queue-type": "classic"},
        }
        self.call("PUT", f"/queues/{quote(queue, safe='')}", spec, ok=(200, 201))

    def delete_queue(self, queue: str) -> None:
        self.call("DELETE", f"/queues/{quote(queue, safe='')}", ok=(200, 404))

    def purge_queue(self, queue: str) -> None:
        self.call("DELETE", f"/queues/{quote(queue, safe='')}/messages")

    def queue_depth(self, queue: str) -> int:
        info = self.call("GET", f"/queues/{quote(queue, safe='')}")
        return int(info.get("message_count", 0) or 0)

    def raise_alarm(self, kind: str = "memory") -> None:
        if self.alarms is None:
            super().raise_alarm(kind)
        else:
            self.alarms.raise_alarm(kind)

    def clear_alarm(self, kind: str = "memory") -> None:
        if self.alarms is None:
            super().clear_alarm(kind)
        else:
            self.alarms.clear_alarm(kind)
