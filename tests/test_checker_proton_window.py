"""The checker on a real capture: Qpid Proton C 0.37 (the C sender arrow) overruns the session
window the reference broker closed on its memory alarm (reports/client-findings.md).

reports/captures/proton-c-0.37-alarm-window-wrap.parquet is the project proxy's lossless
frame log of one `bench.arrows.trends depth`-style run (2,000-byte bodies, 96 MiB watermark).
The broker's window-0 flows name a next-incoming-id behind the transfers Proton already had in
flight; Proton then sends as far as its link credit reaches, past every session window the
broker ever granted, and the broker ends the session with amqp:session:window-violation.
The test pins the verdict (the client is at fault, from the first transfer beyond the highest
grant) and the frame order that proves Proton had seen the window-0 flows first.
"""

from __future__ import annotations

from pathlib import Path

from amqpspec.amqp10.composites import Begin, End, Flow, Transfer
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.amqp10.spec import Cond
from amqpspec.traces.check import check_trace
from amqpspec.traces.load import open_trace

CAPTURES = Path(__file__).resolve().parents[1] / "reports" / "captures"
CAPTURE = CAPTURES / "proton-c-0.37-alarm-window-wrap.parquet"
HIGHEST_GRANT = 25419  # next-incoming-id + incoming-window, highest over the broker's flows


def _frames() -> list[tuple[int, str, object]]:
    """(trace index, direction, performative) of every AMQP frame with a performative."""
    out = []
    for item in open_trace(str(CAPTURE)):
        performative = getattr(item.item, "performative", None)
        if performative is not None:
            out.append((item.index, item.direction, performative))
    return out


def test_the_checker_blames_the_client_from_the_first_transfer_beyond_every_grant():
    findings = check_trace(open_trace(str(CAPTURE)))
    violations = [f.violation for f in findings if f.violation is not None]
    assert len(findings) == len(violations) == 129
    assert {(v.rule_id, v.section, v.level, v.origin) for v in violations} == {
        ("session.window-violation", "2.5.6", "MUST", CLIENT)
    }
    assert findings[0].frame_index == 25990
    ids = [int(v.reason.split()[1], 16) for v in violations]
    assert ids == list(range(HIGHEST_GRANT, HIGHEST_GRANT + 129))
    assert all(f"horizon {HIGHEST_GRANT:#x}" in v.reason for v in violations)


def test_proton_sent_beyond_the_window_after_it_had_the_window_0_flows():
    frames = _frames()
    begin = next(p for _i, d, p in frames if d == CLIENT and isinstance(p, Begin))
    transfer_id = begin.next_outgoing_id
    grants: list[int] = []  # session horizons the broker sent, in order
    credit_horizon = 0  # the broker's link-credit horizon so far (delivery-count + credit)
    first_beyond = None
    for index, direction, p in frames:
        if direction == SERVER and isinstance(p, Begin):
            grants.append(begin.next_outgoing_id + p.incoming_window)
        elif direction == SERVER and isinstance(p, Flow):
            grants.append(p.next_incoming_id + p.incoming_window)
            if p.handle is not None:
                credit_horizon = p.delivery_count + p.link_credit
                last_credit_flow = (index, p)
        elif direction == CLIENT and isinstance(p, Transfer):
            # every transfer is within the link credit the broker had sent before it (one
            # frame per delivery): Proton sent it after it had read the flow that allowed it
            assert p.delivery_id == transfer_id < credit_horizon, index
            if transfer_id == HIGHEST_GRANT:
                first_beyond = (index, credit_horizon, last_credit_flow, len(grants))
            transfer_id += 1
    assert max(grants) == HIGHEST_GRANT
    index, horizon, (flow_index, flow), grants_before = first_beyond
    assert index == 25990
    # the credit that admitted the transfer came with incoming-window 0, at a next-incoming-id
    # behind Proton's next-outgoing-id: Proton took 25269 + 0 - 25314 (unsigned) as its window
    assert (flow_index, flow.next_incoming_id, flow.incoming_window) == (25882, 25269, 0)
    assert horizon == 25269 + 170 > HIGHEST_GRANT
    # no grant the broker sent before that transfer reached it
    assert max(grants[:grants_before]) == HIGHEST_GRANT
    # the broker ended the session on exactly that transfer-id
    end = next(p for _i, d, p in frames if d == SERVER and isinstance(p, End))
    assert end.error.condition == Cond.WINDOW_VIOLATION
    assert f"transfer-id {HIGHEST_GRANT} " in end.error.description
