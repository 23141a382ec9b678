"""spark_triage: trace corpora -> violations, signature clusters, minimal reproducers, report.

`amqpspec triage` / `spark-submit spark_triage/job.py` (job.py); docs/triage.md. Modules:
inputs (discovery), datasource (the `amqpspec-pcap` Spark data source), framelog_segments,
check (per-flow reassembly + the core's monitor, signatures, capture defects), clusters,
known_issues, reproducers, report, session, synth and score (synthetic corpus, scoring).
"""
