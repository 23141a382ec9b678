"""reference_broker: see ARCHITECTURE.md. Built by a later issue."""
