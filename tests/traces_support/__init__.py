"""Helpers for the traces tests: a proton peer, proton clients, tshark, process control."""
