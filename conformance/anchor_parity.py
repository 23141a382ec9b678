"""`python -m amqpspec.conformance.anchor_parity`: the documented entry point of
`audit/anchor_parity.py` (where the code is, and its usage)."""

import sys

from amqpspec.conformance.audit.anchor_parity import main

if __name__ == "__main__":
    sys.exit(main())
