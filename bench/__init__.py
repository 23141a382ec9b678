"""bench: see ARCHITECTURE.md. Built by a later issue."""
