"""The checker (oracle): AMQP 1.0 rule violations in one connection's frame trace.

    from amqpspec.amqp10.checker import Checker, Violation, RULES, Rule, check_connection

`Checker(liveness_bound=None)`; `.feed(origin, item, time=None, index=None)` -> new
violations, with origin `amqp10.origins.CLIENT` ("client", the connection initiator) or
`SERVER` ("server") and item a ProtocolHeader or Frame; `.finish(now=None)` at the end of
the trace; `.violations` all so far. `amqp10.monitor` feeds it from a connection's bytes.
`RULES` is the catalog (rule id -> Rule with section, MUST/SHOULD and spec sentence).
"""

from amqpspec.amqp10.checker.core import Checker, check_connection
from amqpspec.amqp10.checker.rules import RULES, Rule, Violation

__all__ = ["RULES", "Checker", "Rule", "Violation", "check_connection"]
