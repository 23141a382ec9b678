"""Hypothesis strategies of session and link performatives for the robustness tests that feed
any frames in any order (tests/test_engine_fuzz.py: the engine; tests/test_checker_credit.py:
the checker). Numbers come from the caller's small sets, so that sequences meet the window,
credit and serial-number edges often; a field a peer may leave out is sometimes absent.

Owns: `maybe`, `begins`, `attaches`, `flows`, `transfers`, `dispositions`, `detaches`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from amqpspec.amqp10.composites import Attach, Begin, Detach, Disposition, Flow, Transfer

Numbers = SearchStrategy[int]


def maybe(values: SearchStrategy[Any]) -> SearchStrategy[Any]:
    """`values`, or the field absent (None)."""
    return st.none() | values


def _session_state(serial: Numbers, window: Numbers) -> dict[str, Numbers]:
    """The session's flow state, which a begin and a flow both carry (2.5.6, 2.7.1, 2.7.4)."""
    return {"next_outgoing_id": serial, "incoming_window": window, "outgoing_window": window}


def begins(serial: Numbers, small: Numbers) -> SearchStrategy[Begin]:
    """A begin, an answer (remote-channel) or not, handle-max set or not."""
    state = _session_state(serial, small)
    return st.builds(Begin, **state, remote_channel=maybe(small), handle_max=maybe(small))


def attaches(
    serial: Numbers, small: Numbers, **more: SearchStrategy[Any]
) -> SearchStrategy[Attach]:
    """An attach of link "a" or "b" on a handle, either role, initial-delivery-count set or
    not; `more`: other fields' strategies."""
    return st.builds(
        Attach,
        name=st.sampled_from(["a", "b"]),
        handle=small,
        role=st.booleans(),
        initial_delivery_count=maybe(serial),
        **more,
    )


def flows(serial: Numbers, small: Numbers, **more: SearchStrategy[Any]) -> SearchStrategy[Flow]:
    """A session's or a link's flow (each link field may be absent), drain and echo either
    way; `more`: other fields' strategies."""
    return st.builds(
        Flow,
        **_session_state(serial, small),
        next_incoming_id=maybe(serial),
        handle=maybe(small),
        delivery_count=maybe(serial),
        link_credit=maybe(small),
        drain=st.booleans(),
        echo=st.booleans(),
        **more,
    )


def transfers(
    small: Numbers, handle: SearchStrategy[Any], **more: SearchStrategy[Any]
) -> SearchStrategy[Transfer]:
    """A transfer on `handle`: first frame or continuation, settled or not, more, aborted."""
    return st.builds(
        Transfer,
        handle=handle,
        delivery_id=maybe(small),
        delivery_tag=maybe(st.just(b"t")),
        settled=maybe(st.booleans()),
        more=st.booleans(),
        aborted=st.booleans(),
        **more,
    )


def dispositions(small: Numbers, **more: SearchStrategy[Any]) -> SearchStrategy[Disposition]:
    """A disposition of one delivery or a range, by either role, settled or not."""
    return st.builds(
        Disposition,
        role=st.booleans(),
        first=small,
        last=maybe(small),
        settled=st.booleans(),
        **more,
    )


def detaches(small: Numbers) -> SearchStrategy[Detach]:
    """A detach of a handle, closing or not."""
    return st.builds(Detach, handle=small, closed=st.booleans())
