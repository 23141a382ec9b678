"""Broker benchmark: msgs/s through the reference broker, RabbitMQ 3.10 (Debian)
and Qpid Proton's C example broker in the same run, with the Proton C example clients.

    amqpspec bench brokers [--messages 100000] [--rounds 3] [--credit 200] [--brokers ...]
    python -m amqpspec.bench.broker_bench [same options]

Owns: building the C client variants used here and by tests/test_broker_traced.py
(`build_c_clients`), starting and stopping the three brokers on private ports, the timed
runs, the table and the JSON report (reports/bench/brokers-DATE.json).

What is timed, per broker and round (brokers interleaved, their order rotated each round):
- sequential: `send N` to an empty queue until every message is accepted, then `receive N`
  from it; two rates (N / wall time of each client process, connection set-up included).
- concurrent: `receive N` and `send N` started together; N / wall time until both exit.
- durable (brokers that persist; not with --no-durable): the sequential pair on a durable
  queue with durable messages, each accepted only once on disk (publisher confirms).
Beside each rate: the broker process's CPU seconds (/proc/PID/stat) and its RSS.
Messages: the C `send` example patched to a 12-byte binary body (the stock example sends a
map `{"sequence": n}` with a message-id). Credit: the stock C `receive` example grants all
N credits at once when given a count (BATCH=1000 only when unlimited), so a variant built
from the same source grants `--credit` (default 200) and tops it up to that value whenever
it falls to half; it prints no bodies. Sends are unsettled (the broker confirms each).
Every broker started here is stopped in `finally` (by its PID / its tools/brokers script).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import pathlib
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

from amqpspec import amqp10
from amqpspec.bench.script import script_main
from amqpspec.bench.table import print_table
from amqpspec.reference_broker.runtime.process import BrokerProcess, free_port

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools" / "brokers"
EXAMPLES = pathlib.Path("/usr/share/proton/examples/c")
DEFAULT_BUILD_DIR = pathlib.Path(tempfile.gettempdir()) / "amqpspec-bench-proton-c"
BODY = b"hello world!"
assert len(BODY) == 12
QUEUE = "bench"
DURABLE_QUEUE = "bench-durable"  # durable queue, durable messages (the durable modes)
CLIENT_TIMEOUT = 600.0
BROKERS = ("reference", "rabbitmq", "proton-c")

# --- C client variants ---------------------------------------------------------------------

_RECEIVE_PATCHES = [
    # a credit window instead of all N credits at once (count given) / 1000 (unlimited)
    ("static const int BATCH = 1000;", "static const int BATCH = RECEIVE_CREDIT;"),
    (
        "pn_link_flow(l, app->message_count ? app->message_count : BATCH);",
        "pn_link_flow(l, app->message_count && app->message_count < BATCH"
        " ? app->message_count : BATCH);",
    ),
    # top up to the window whenever credit is down to half (credit 1 and 2: after every
    # message, i.e. the prefetch-2 re-grant pattern), never past the count: a counted
    # receiver takes exactly N messages and reports once
    (
        "         if (app->message_count == 0) {\n"
        "           /* receive forever - see if more credit is needed */\n"
        "           if (pn_link_credit(l) < BATCH/2) {\n"
        "             /* Grant enough credit to bring it up to BATCH: */\n"
        "             pn_link_flow(l, BATCH - pn_link_credit(l));\n"
        "           }\n"
        "         } else if (++app->received >= app->message_count) {\n",
        "         {\n"
        "           int want = BATCH;\n"
        "           if (app->message_count) {\n"
        "             ++app->received;\n"
        "             if (app->message_count - app->received < want)"
        " want = app->message_count - app->received;\n"
        "           }\n"
        "           if (pn_link_credit(l) <= BATCH/2 && pn_link_credit(l) < want)\n"
        "             pn_link_flow(l, want - pn_link_credit(l));\n"
        "         }\n"
        "         if (app->message_count && app->received == app->message_count) {\n",
    ),
]
_QUIET_PATCH = ('    printf("%s\\n", pn_string_get(s));\n', "")
_SEND12_PATCHES = [
    (
        "  pn_message_set_id(app->message, (pn_atom_t){.type=PN_ULONG, .u.as_ulong=app->sent});\n",
        "",
    ),
    (
        "  pn_data_put_map(body);\n"
        "  pn_data_enter(body);\n"
        '  pn_data_put_string(body, pn_bytes(sizeof("sequence")-1, "sequence"));\n'
        "  pn_data_put_int(body, app->sent); /* The sequence number */\n"
        "  pn_data_exit(body);\n",
        f'  pn_data_put_binary(body, pn_bytes({len(BODY)}, "{BODY.decode()}"));\n',
    ),
]
# durable messages (header.durable = true, 3.2.1): the durable modes' sender
_DURABLE_PATCH = (
    "  body = pn_message_body(app->message);\n",
    "  pn_message_set_durable(app->message, true);\n  body = pn_message_body(app->message);\n",
)


def _patched(source: str, patches: list[tuple[str, str]]) -> str:
    for old, new in patches:
        if source.count(old) != 1:
            raise RuntimeError(f"proton C example changed: cannot patch {old.strip()!r}")
        source = source.replace(old, new)
    return source


def _compile(source_text: str, output: pathlib.Path, defines: dict[str, int]) -> None:
    source = output.with_suffix(".c")
    source.write_text(source_text)
    flags = [f"-D{name}={value}" for name, value in defines.items()]
    subprocess.run(
        [
            *("gcc", "-O2", f"-I{EXAMPLES}", *flags, "-o", str(output), str(source)),
            *("-lqpid-proton", "-lpthread"),
        ],
        check=True,
        timeout=300,
    )


def c_examples_available() -> bool:
    return (EXAMPLES / "receive.c").exists() and shutil.which("gcc") is not None


def build_c_clients(build_dir: pathlib.Path, credits: tuple[int, ...] = (200,)) -> pathlib.Path:
    """Build the stock examples (broker send receive direct, by proton-c-broker.sh build)
    and the variants: `send12` (12-byte binary body), `send12-durable` (the same, durable
    messages) and, per credit C, `receive-credit-C`
    (credit window C, prints bodies) and `receive-quiet-credit-C` (prints only the count).
    Idempotent; returns build_dir."""
    build_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PROTON_BUILD_DIR": str(build_dir)}
    subprocess.run([str(TOOLS / "proton-c-broker.sh"), "build"], env=env, check=True, timeout=300)
    receive = (EXAMPLES / "receive.c").read_text()
    send = (EXAMPLES / "send.c").read_text()
    send12 = _patched(send, _SEND12_PATCHES)
    targets = {"send12": (send12, {}), "send12-durable": (_patched(send12, [_DURABLE_PATCH]), {})}
    for credit in credits:
        windowed = _patched(receive, _RECEIVE_PATCHES)
        targets[f"receive-credit-{credit}"] = (windowed, {"RECEIVE_CREDIT": credit})
        quiet = _patched(windowed, [_QUIET_PATCH])
        targets[f"receive-quiet-credit-{credit}"] = (quiet, {"RECEIVE_CREDIT": credit})
    for name, (text, defines) in targets.items():
        output = build_dir / name
        source = output.with_suffix(".c")
        if not output.exists() or not source.exists() or source.read_text() != text:
            _compile(text, output, defines)
    return build_dir


def run_c_client(program: pathlib.Path, port: int, address: str, count: int) -> str:
    """Run one C example client to completion; return its last output line."""
    result = subprocess.run(
        [str(program), "127.0.0.1", str(port), address, str(count)],
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{program.name} exited {result.returncode}: {result.stderr[-2000:]}")
    return result.stdout.strip().splitlines()[-1]


# --- brokers -------------------------------------------------------------------------------


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def rabbitmq_port(taken: set[int]) -> int:
    """A free port whose RabbitMQ companion (port + 20000, where a node may put its
    distribution listener) is free too; not one of `taken`."""
    while True:
        port = free_port(taken)
        if not port_in_use(port + 20000 if port < 45535 else port):
            taken.add(port)
            return port


def _http(method: str, url: str, body: dict | None = None) -> int:
    import base64

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


@dataclass
class Broker:
    """One broker under test: how to reach it, and how to empty its queue."""

    name: str
    label: str
    port: int
    address: str
    admin_url: str | None = None
    pid: int | None = None  # the broker's OS process: its CPU time and RSS go in the report
    durable_address: str | None = None  # None: no persistence, no durable modes

    def queue_depth(self, queue: str = QUEUE) -> int | None:
        if self.admin_url is None:
            return None
        from amqpspec.reference_broker.admin.client import ManagementClient

        with ManagementClient(self.admin_url) as admin:
            return int(admin.queue(queue).get("messages") or 0)

    def purge(self, queue: str = QUEUE) -> None:
        from amqpspec.reference_broker.admin.client import ManagementClient

        with ManagementClient(self.admin_url) as admin:
            admin.purge_queue(queue)


@contextlib.contextmanager
def reference_broker(work: pathlib.Path, *options: str) -> Iterator[Broker]:
    """The reference broker on free ports; `options` are added to its command line."""
    process = BrokerProcess(
        "--data-dir",
        str(work / "reference-data"),
        *options,
        admin=True,
        log=work / "reference-broker.log",
        wait=30.0,
    )
    try:
        from amqpspec.reference_broker.admin.client import ManagementClient

        admin_url = f"http://127.0.0.1:{process.admin_port}"
        with ManagementClient(admin_url) as admin:
            admin.declare_queue(QUEUE, durable=False)
            admin.declare_queue(DURABLE_QUEUE, durable=True)
        version = _reference_version()
        yield Broker(
            "reference",
            f"reference broker {version}",
            process.port,
            f"/queues/{QUEUE}",
            admin_url,
            pid=process.proc.pid,
            durable_address=f"/queues/{DURABLE_QUEUE}",
        )
    finally:
        process.stop()


def _reference_version() -> str:
    try:
        from importlib.metadata import version

        return version("amqpspec")
    except Exception:
        return ""


def _dpkg_version(package: str) -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


@contextlib.contextmanager
def rabbitmq_broker(work: pathlib.Path, settings: dict[str, str] | None = None) -> Iterator[Broker]:
    """A throw-away RabbitMQ node on free ports; `settings` override rabbitmq.sh's environment
    (AMQP_PORT, MGMT_PORT, NODE_NAME, RABBITMQ_DATA_DIR, MEMORY_HIGH_WATERMARK_BYTES, ...)."""
    script = TOOLS / "rabbitmq.sh"
    if not pathlib.Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists():
        raise RuntimeError(f"RabbitMQ not installed: run '{script} install'")
    settings = settings or {}
    ports = ("AMQP_PORT", "MGMT_PORT", "DIST_PORT")
    taken = {int(settings[name]) for name in ports if name in settings}
    env = {
        **os.environ,
        "RABBITMQ_DATA_DIR": str(work / "rabbitmq"),
        **{name: str(rabbitmq_port(taken)) for name in ports if name not in settings},
        # a node name of its own: another rabbit@localhost may already be registered in epmd
        "NODE_NAME": f"amqpspec-bench-{os.getpid()}@localhost",
        "STOP_MODE": "kill",
        **settings,
    }
    amqp_port, mgmt_port = int(env["AMQP_PORT"]), int(env["MGMT_PORT"])
    data_dir = pathlib.Path(env["RABBITMQ_DATA_DIR"])
    try:
        subprocess.run([str(script), "start"], env=env, check=True, timeout=180)
        mgmt = f"http://127.0.0.1:{mgmt_port}"
        for queue, durable in ((QUEUE, False), (DURABLE_QUEUE, True)):
            _http(
                "PUT",
                f"{mgmt}/api/queues/%2F/{queue}",
                {"durable": durable, "arguments": {"x-queue-type": "classic"}},
            )
        version = _dpkg_version("rabbitmq-server")
        yield Broker(
            "rabbitmq",
            f"RabbitMQ {version.split('-')[0]}",
            amqp_port,
            f"/amq/queue/{QUEUE}",
            mgmt,
            pid=_pid_file(data_dir / "rabbitmq.pid"),
            durable_address=f"/amq/queue/{DURABLE_QUEUE}",
        )
    finally:
        subprocess.run([str(script), "stop"], env=env, timeout=120, check=False)


@contextlib.contextmanager
def proton_c_broker(build_dir: pathlib.Path) -> Iterator[Broker]:
    script = TOOLS / "proton-c-broker.sh"
    port = free_port()
    env = {**os.environ, "PROTON_BUILD_DIR": str(build_dir), "PROTON_PORT": str(port)}
    try:
        subprocess.run([str(script), "start"], env=env, check=True, timeout=60)
        version = _dpkg_version("libqpid-proton11")
        pid = _pid_file(build_dir / f"broker-{port}.pid")
        yield Broker("proton-c", f"Proton C broker {version.split('-')[0]}", port, QUEUE, pid=pid)
    finally:
        subprocess.run([str(script), "stop"], env=env, timeout=60, check=False)


@contextlib.contextmanager
def started_brokers(
    names: list[str], prefix: str, c_clients: Callable[[], pathlib.Path]
) -> Iterator[list[Broker]]:
    """The brokers `names` (reference, rabbitmq, else the Proton C example broker from the
    build `c_clients()` returns) started in this order, in one temporary work directory named
    from `prefix`; all stopped at the end."""
    with (
        tempfile.TemporaryDirectory(prefix=prefix) as tmp,
        contextlib.ExitStack() as stack,
    ):
        work = pathlib.Path(tmp)
        brokers = []
        for name in names:
            if name == "reference":
                brokers.append(stack.enter_context(reference_broker(work)))
            elif name == "rabbitmq":
                brokers.append(stack.enter_context(rabbitmq_broker(work)))
            else:
                brokers.append(stack.enter_context(proton_c_broker(c_clients())))
        yield brokers


def _pid_file(path: pathlib.Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def process_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process so far (/proc/PID/stat), None if unknown."""
    if pid is None:
        return None
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def process_rss_mib(pid: int | None) -> float | None:
    """Resident set size of a process in MiB (/proc/PID/status VmRSS), None if unknown."""
    if pid is None:
        return None
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# --- timed runs ----------------------------------------------------------------------------


@dataclass
class Sample:
    broker: str
    round: int
    mode: str  # one of MODES
    messages: int
    seconds: float
    left_in_queue: int | None = None  # queue depth after the round (None: not measurable)
    broker_cpu_seconds: float | None = None  # the broker process's CPU time during the mode
    broker_rss_mib: float | None = None  # its resident size right after the mode

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def _timed(program: pathlib.Path, port: int, address: str, count: int, expect: str) -> float:
    start = time.perf_counter()
    last = run_c_client(program, port, address, count)
    elapsed = time.perf_counter() - start
    if last != expect:
        raise RuntimeError(f"{program.name}: expected {expect!r}, got {last!r}")
    return elapsed


def _spawn(program: pathlib.Path, port: int, address: str, count: int) -> subprocess.Popen:
    return subprocess.Popen(
        [str(program), "127.0.0.1", str(port), address, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def output_within(process: subprocess.Popen, timeout: float, late: str) -> tuple[str, str]:
    """The process's (stdout, stderr) once it exits; killed and RuntimeError(`late`) when it
    runs longer than `timeout` seconds."""
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate(timeout=10)
        raise RuntimeError(late) from None


def _finish(process: subprocess.Popen, expect: str) -> None:
    out, err = output_within(process, CLIENT_TIMEOUT, f"client timed out (expected {expect!r})")
    last = out.strip().splitlines()[-1] if out.strip() else ""
    if process.returncode != 0 or last != expect:
        raise RuntimeError(f"client exit {process.returncode}, {last!r}: {err[-2000:]}")


def _sample(broker: Broker, round_no: int, mode: str, messages: int, run) -> Sample:
    """Time `run()` (returns wall seconds) and the broker process's CPU time over it."""
    cpu = process_cpu_seconds(broker.pid)
    seconds = run()
    after = process_cpu_seconds(broker.pid)
    sample = Sample(broker.name, round_no, mode, messages, seconds)
    if cpu is not None and after is not None:
        sample.broker_cpu_seconds = round(after - cpu, 3)
    sample.broker_rss_mib = process_rss_mib(broker.pid)
    return sample


def run_round(
    broker: Broker,
    clients: pathlib.Path,
    credit: int,
    messages: int,
    round_no: int,
    durable: bool = True,
) -> list[Sample]:
    """The modes of one round on one broker; the durable ones (durable queue, durable
    messages, every one accepted = confirmed after the broker's fsync) only where the
    broker persists (`durable_address`) and `durable` is set."""
    send = clients / "send12"
    receive = clients / f"receive-quiet-credit-{credit}"
    sent = f"{messages} messages sent and acknowledged"
    received = f"{messages} messages received"
    port, address = broker.port, broker.address

    def concurrent() -> float:
        start = time.perf_counter()
        receiver = _spawn(receive, port, address, messages)
        sender = _spawn(send, port, address, messages)
        _finish(sender, sent)
        _finish(receiver, received)
        return time.perf_counter() - start

    runs = [
        ("sequential-send", lambda: _timed(send, port, address, messages, sent)),
        ("sequential-receive", lambda: _timed(receive, port, address, messages, received)),
        ("concurrent", concurrent),
    ]
    queues = [QUEUE]
    if durable and broker.durable_address is not None:
        durable_send, durable_address = clients / "send12-durable", broker.durable_address
        runs += [
            ("durable-send", lambda: _timed(durable_send, port, durable_address, messages, sent)),
            (
                "durable-receive",
                lambda: _timed(receive, port, durable_address, messages, received),
            ),
        ]
        queues.append(DURABLE_QUEUE)
    samples = [_sample(broker, round_no, mode, messages, run) for mode, run in runs]
    # RabbitMQ's management API refreshes queue statistics every 5 s: poll for a while;
    # whatever is still there is recorded (and purged so the next round starts empty)
    left: int | None = None
    for queue in queues:
        deadline = time.monotonic() + 12
        while (depth := broker.queue_depth(queue)) not in (None, 0) and (
            time.monotonic() < deadline
        ):
            time.sleep(1)
        if depth:
            print(f"note: {broker.name}: {depth} left in {queue} after round {round_no + 1}")
            broker.purge(queue)
        if depth is not None:
            left = (left or 0) + depth
    for sample in samples:
        sample.left_in_queue = left
    return samples


MODES = ("sequential-send", "sequential-receive", "concurrent", "durable-send", "durable-receive")


def cpu_per_100k(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """Median broker CPU seconds per 100,000 messages, per broker and mode (load-robust)."""
    by: dict[str, dict[str, list[float]]] = {}
    for s in samples:
        if s.broker_cpu_seconds is not None:
            per = s.broker_cpu_seconds * 100_000 / s.messages
            by.setdefault(s.broker, {}).setdefault(s.mode, []).append(per)
    return {b: {m: statistics.median(v) for m, v in modes.items()} for b, modes in by.items()}


def medians(samples: list[Sample]) -> dict[str, dict[str, float]]:
    by: dict[str, dict[str, list[float]]] = {}
    for sample in samples:
        by.setdefault(sample.broker, {}).setdefault(sample.mode, []).append(sample.rate)
    return {b: {m: statistics.median(r) for m, r in modes.items()} for b, modes in by.items()}


def table_rows(
    summary: dict[str, dict[str, float]],
    labels: dict[str, str],
    cpu: dict[str, dict[str, float]] | None = None,
) -> list[list[str]]:
    rows = []
    for name in summary:
        for mode in MODES:
            rate = summary[name].get(mode)
            if rate is None:
                continue
            ratios = []
            for other in ("rabbitmq", "proton-c"):
                base = summary.get(other, {}).get(mode)
                ratios.append(f"{rate / base:.2f}x" if base else "")
            seconds = (cpu or {}).get(name, {}).get(mode)
            cpu_text = "" if seconds is None else f"{seconds:.2f}"
            rows.append([labels[name], mode, f"{rate:,.0f}", *ratios, cpu_text])
    return rows


HEADERS = [
    "broker",
    "mode",
    "msgs/s (median)",
    "vs RabbitMQ 3.10",
    "vs Proton C broker",
    "CPU s/100k",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=100_000, help="messages per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (brokers interleaved)")
    parser.add_argument("--credit", type=int, default=200, help="receiver credit window")
    parser.add_argument(
        "--brokers",
        default=",".join(BROKERS),
        help=f"comma-separated subset of {','.join(BROKERS)}",
    )
    parser.add_argument(
        "--no-durable",
        action="store_true",
        help="skip the durable modes (durable queue and messages, confirmed after fsync)",
    )
    parser.add_argument("--build-dir", default=str(DEFAULT_BUILD_DIR), help="C client builds")
    parser.add_argument(
        "--out", default=str(ROOT / "reports" / "bench"), help="directory for the JSON report"
    )


def run(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.brokers.split(",") if n.strip()]
    unknown = set(names) - set(BROKERS)
    if unknown:
        print(f"unknown brokers: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if not c_examples_available():
        print(
            f"proton C examples missing: run '{TOOLS / 'proton-c-broker.sh'} install'",
            file=sys.stderr,
        )
        return 2
    clients = build_c_clients(pathlib.Path(args.build_dir), (args.credit,))
    samples, labels = _measure(args, names, clients)
    summary = medians(samples)
    title = (
        f"{args.messages:,} x 12-byte messages, credit {args.credit}, Proton C example "
        f"clients, median of {args.rounds} rounds (msgs/s, higher is better)"
    )
    cpu = cpu_per_100k(samples)
    print_table(HEADERS, table_rows(summary, labels, cpu), title, left_columns=("broker", "mode"))
    path = _write_report(args, samples, labels, summary, cpu)
    print(f"report {path}")
    return 0


def _measure(
    args: argparse.Namespace, names: list[str], clients: pathlib.Path
) -> tuple[list[Sample], dict[str, str]]:
    """Start the brokers `names`, run `args.rounds` rounds (each starting with the next
    broker); the samples and each broker's label."""
    samples: list[Sample] = []
    labels: dict[str, str] = {}
    with started_brokers(names, "amqpspec-bench-", lambda: clients) as brokers:
        for broker in brokers:
            labels[broker.name] = broker.label
            print(f"{broker.label}: 127.0.0.1:{broker.port} address {broker.address}", flush=True)
        for round_no in range(args.rounds):
            shift = round_no % len(brokers)
            for broker in brokers[shift:] + brokers[:shift]:
                got = run_round(
                    broker, clients, args.credit, args.messages, round_no, not args.no_durable
                )
                samples += got
                print(
                    f"round {round_no + 1} {broker.name}: "
                    + ", ".join(f"{s.mode} {s.rate:,.0f}/s" for s in got),
                    flush=True,
                )
    return samples, labels


def _write_report(
    args: argparse.Namespace,
    samples: list[Sample],
    labels: dict[str, str],
    summary: dict[str, dict[str, float]],
    cpu: dict[str, dict[str, float]],
) -> pathlib.Path:
    """OUT/brokers-DATE.json: the command, the machine, the medians and every sample."""
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC)
    path = out_dir / f"brokers-{stamp:%Y-%m-%d}.json"
    report = {
        "date": stamp.isoformat(timespec="seconds"),
        "command": _command_line(),
        "messages": args.messages,
        "rounds": args.rounds,
        "credit": args.credit,
        "body_bytes": len(BODY),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "amqp10": amqp10.implementation(),  # compiled or pure (docs/speedups.md)
        },
        "load_average": os.getloadavg(),
        "brokers": labels,
        "median_rates": summary,
        "median_broker_cpu_seconds_per_100k": {
            b: {m: round(v, 3) for m, v in modes.items()} for b, modes in cpu.items()
        },
        "samples": [asdict(s) | {"rate": s.rate} for s in samples],
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def _command_line() -> str:
    program = pathlib.Path(sys.argv[0]).name
    if program == "amqpspec":
        return " ".join(["amqpspec", *sys.argv[1:]])
    return " ".join([sys.executable, "-m", "amqpspec.bench.broker_bench", *sys.argv[1:]])


def main(argv: list[str] | None = None) -> int:
    return script_main(__doc__, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
