"""`python -m amqpspec.conformance.fault_matrix`: the documented entry point of
`audit/fault_matrix.py` (where the code is, and its usage)."""

import sys

from amqpspec.conformance.audit.fault_matrix import main

if __name__ == "__main__":
    sys.exit(main())
