"""How strictly an endpoint keeps the rules an application may bend on purpose.

Owns: `EndpointPolicy`, one frozen value given to `Connection(policy=...)` and read by its
sessions and links. Every switch is on by default (a correct endpoint); turning one off is
deliberate misbehaviour, for fault injection (a lax broker) and for tests and fuzzers that
play a peer breaking the rule. Touches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EndpointPolicy:
    """enforce_window (2.5.6): a transfer beyond every incoming-window the peer could have
    seen ends the session with amqp:session:window-violation; off: it is let through.

    check_credit (2.6.7): `Link.send()` refuses a delivery without link-credit and
    `Link.set_flow_state()` refuses state beyond the receiver's grant (UsageError); off:
    both go ahead, so the link can over-deliver.

    auto_echo (2.7.4): a flow with echo=true is answered with our flow state by the engine;
    off: only the FlowReceived event, the application answers (`send_flow_state()`,
    `Session.flow()`) or, deliberately, does not.
    """

    enforce_window: bool = True
    check_credit: bool = True
    auto_echo: bool = True


STRICT = EndpointPolicy()
