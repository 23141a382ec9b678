"""`python -m amqpspec.conformance.ledger`: the documented entry point of
`audit/ledger.py` (where the code is, and its usage)."""

import sys

from amqpspec.conformance.audit.ledger import main

if __name__ == "__main__":
    sys.exit(main())
