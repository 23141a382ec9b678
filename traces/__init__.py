"""traces: record, read and check AMQP 1.0 frame traces (docs/traces.md).

Owns the package `traces/`:
- `proxy.RecordingProxy` + `recorder.Recorder` + `framelog_process` — `amqpspec capture`:
  relay byte for byte, write a pcap, build the Parquet frame log in a child process.
- `pcap_writer` — the one capture writer: `RecordWriter` (micro-/nanosecond pcap, pcapng,
  gzip'd) and `PcapWriter` (synthesized Ethernet/IP/TCP flows tshark dissects as AMQP);
  `pcap_edit` — packet-level noise on such flows (the synthetic triage corpus).
- `pcap_reader` (pcap/pcapng, link layers, IP -> TCP segments, struct only) and
  `reassembly.PcapTraceReader` (TCP reassembly -> `amqp10.monitor.TraceItem`s per
  connection, decoded by the core's connection monitor).
- `framelog` — the versioned Parquet schema, writer and reader.
- `load.open_trace` — any trace file; `render` — show lines / JSON; `check.check_trace`
  — the core's connection monitor per connection; `cli` / `capture_cli` — the `amqpspec`
  subcommands.
"""
