"""run: one conformance run, from the command line to the verdicts on disk.

Owns: `amqpspec run` (`cli`), the pytest plugin (`plugin`; `conformance/plugin.py` is its
documented entry point), the case registry (`registry`: `Case`, `case(...)`, `load_cases`),
the runner (`runner`: one case -> one graded verdict, `context.CaseContext`), concurrent cases
(`jobs`), the broker's preflight and health checks (`preflight`), what the run learns about the
broker (`facts`), the checker's rows (`checker_rows`), the run header (`run_info`), results
and expectations files (`results`), progress output (`progress`), and the two transports a run
may put between the probe and the broker (`relay`: a recording TCP relay for a real client
library, `ws_bridge`: TCP <-> WebSocket). May touch: the results directory, stdout, loopback
sockets.
"""
