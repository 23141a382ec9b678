"""spark_triage: see ARCHITECTURE.md. Built by a later issue."""
