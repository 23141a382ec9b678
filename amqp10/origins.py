"""Who sent it: the two ends of one connection, one naming for the whole tree.

Owns: `CLIENT` (the connection's initiator, the side that sent the first SYN / opened the
socket), `SERVER` (the peer it connected to), `ORIGINS` and `other()`. The checker's
`origin`, the monitor's and the traces' `direction`, and the engine-pair sides all use
these values. Data only.
"""

from __future__ import annotations

CLIENT = "client"
SERVER = "server"
ORIGINS = (CLIENT, SERVER)


def other(origin: str) -> str:
    """The other end of the connection."""
    return SERVER if origin == CLIENT else CLIENT
