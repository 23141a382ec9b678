"""The vocabulary of the AMQP 1.0 extensions the project speaks: their capability names,
connection properties, condition symbols and field values, one definition each for the
reference broker that implements them and the conformance cases that grade them.

Owns the names only (data, no behaviour). The extension texts are not part of the core
specification in /work/shared/spec; each group names its source:
- soleconn: OASIS "AMQP Enforcing Connection Uniqueness Version 1.0" (Committee
  Specification 01, 17 September 2018,
  https://docs.oasis-open.org/amqp/soleconn/v1.0/soleconn-v1.0.html), as Qpid Broker-J
  implements it (reference_broker/features/sole_connection.py,
  conformance/cases/s2_7_1_sole_connection.py).
- anonymous relay: OASIS "AMQP Anonymous Terminus for Message Routing Version 1.0"
  (reference_broker/features/relay.py, conformance/cases/s3_5_4_anonymous_relay.py).
"""

from __future__ import annotations

from amqpspec.amqp10.types import symbol

# -- soleconn: connection capability, open properties and the close's info ----------------
SOLE_CONNECTION_CAPABILITY = "sole-connection-for-container"
SOLE_CONNECTION_ENFORCEMENT_POLICY = symbol("sole-connection-enforcement-policy")  # uint
SOLE_CONNECTION_DETECTION_POLICY = symbol("sole-connection-detection-policy")  # uint
CONNECTION_ESTABLISHMENT_FAILED = symbol("amqp:connection-establishment-failed")  # boolean
SOLE_CONNECTION_ENFORCEMENT = symbol("sole-connection-enforcement")  # close info (resource-locked)
INVALID_FIELD_KEY = symbol("invalid-field")  # close info (invalid-field): which field
CONTAINER_ID_FIELD = symbol("container-id")
# sole-connection-enforcement-policy values
REFUSE_CONNECTION = 0  # the default
CLOSE_EXISTING = 1
# sole-connection-detection-policy values
DETECTION_STRONG = 0
DETECTION_WEAK = 1

# -- anonymous relay: connection capability ----------------------------------------------
ANONYMOUS_RELAY_CAPABILITY = "ANONYMOUS-RELAY"
