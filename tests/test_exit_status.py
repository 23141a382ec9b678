"""The exit status contract (amqpspec.exit_status): a run that broke ends in 3, never in 1
(which claims violations or findings), with one line on stderr naming what broke. The
triage job's own codes are tested on Spark in test_triage_spark.py and on a standalone
cluster in test_triage_cluster.py."""

from __future__ import annotations

import pytest

from amqpspec import engine_cli, exit_status
from amqpspec.cli import main
from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.spark_triage.failure import first_error


def test_the_codes():
    assert (exit_status.OK, exit_status.VIOLATIONS) == (0, 1)
    assert (exit_status.BAD_INPUT, exit_status.JOB_FAILED) == (2, 3)


def test_an_exception_of_the_tools_own_exits_3_with_one_line(monkeypatch, capsys):
    def broken(args):
        raise RuntimeError("state table missing\nsecond line")

    monkeypatch.setattr(engine_cli, "run", broken)
    assert main(["engine", "diagram", "--machine", "session"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err  # the trace first, for whoever debugs it
    assert err.strip().splitlines()[-1] == (
        "amqpspec engine: the run failed, no verdict (exit 3): RuntimeError: "
        "state table missing (traceback above)"
    )


@pytest.fixture(scope="module")
def broker():
    running = reference_broker()
    yield running
    running.stop()


def test_a_fuzz_campaign_stopped_by_its_own_error_exits_3(broker, tmp_path, monkeypatch, capsys):
    """A worker that crashes stops the campaign before its budget: no verdict (3)."""
    from amqpspec.fuzz import campaign

    def broken_case(config, index):
        raise RuntimeError("mutator bug")

    monkeypatch.setattr(campaign, "make_case", broken_case)
    code = main(
        [
            "fuzz",
            "--broker",
            broker.url,
            "--profile",
            "reference",
            "--out",
            str(tmp_path / "out"),
            "--cases",
            "20",
            "--workers",
            "1",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.strip().splitlines()[-1] == (
        "amqpspec fuzz: the campaign failed, no verdict (exit 3): "
        "a worker failed: RuntimeError('mutator bug')"
    )


SPARK_TEXT = """Py4JJavaError: An error occurred while calling o87.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 2.0 \
failed 4 times, most recent failure: Lost task 1.3 in stage 2.0 (TID 9) (127.0.0.1 executor 1): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/pyspark.zip/pyspark/worker.py", line 4207, in invoke_udf
    func()
FileNotFoundError: [Errno 2] No such file or directory: '../captures/a.pcap'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
ValueError: later
\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:5)
"""


def test_the_first_executor_error_is_found_in_sparks_text():
    found = first_error(SPARK_TEXT)
    assert found.stage == "2.0" and found.executor == "127.0.0.1 executor 1"
    assert found.error == (
        "FileNotFoundError: [Errno 2] No such file or directory: '../captures/a.pcap'"
    )
    java = first_error("Py4JJavaError: call failed\n: java.io.IOException: disk full\n\tat x")
    assert java.error == "java.io.IOException: disk full" and java.stage is None


def test_a_conformance_run_that_judged_nothing_never_exits_1(capsys) -> None:
    """`amqpspec run` with no case result: pytest's usage error is bad input, an
    interrupted or broken session the job failing, an empty selection pytest's 5."""
    from amqpspec.conformance.run.cli import _no_results
    from amqpspec.exit_status import BAD_INPUT, JOB_FAILED

    assert _no_results(0) == 0 and _no_results(5) == 5
    assert _no_results(4) == BAD_INPUT
    for broken in (1, 2, 3):  # failed without results, interrupted, internal error
        assert _no_results(broken) == JOB_FAILED
        assert f"no verdict (exit {JOB_FAILED})" in capsys.readouterr().err
