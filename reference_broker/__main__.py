"""`python -m amqpspec.reference_broker [options]`: the same as `amqpspec broker`."""

import sys

from .cli import main

sys.exit(main())
