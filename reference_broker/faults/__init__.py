"""Deliberate, switchable bugs (`--fault NAME`, off by default): the catalog, what the
parser-layer faults do on engine events and what the wire-layer faults do to outgoing frames.

Owns: the fault names and their effects outside the code paths that consult `Faults` flags.
May touch: the engine of the connection a fault fires on; nothing else of the broker.
"""
