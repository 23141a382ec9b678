"""`amqpspec triage synth`: a synthetic corpus with ground truth, for scoring the triage.

Owns: `KINDS` (data: the injected fault kinds, each with the conformance cases whose one
connection shows it on the wire and the exact signature it must be clustered under),
`CLEAN_CASES` and `synthesize(out, connections, seed)`. A kind is a reference-broker fault
of its `--fault` catalog (`BROKER_KINDS`) or a faulty client, a conformance case's
deliberately illegal frame against the clean broker (`CLIENT_KINDS`). Each broker
configuration runs once (conformance.fault_matrix.run_fault: the broker subprocess on free
ports and `amqpspec run` with the cases, whose results dir records every connection as a
pcap); a case's connection is a template only if the checker finds exactly its kind's
signature on it (clean: nothing), so a timing-dependent fault that did not fire is left
out, not mislabelled. The corpus is then `connections` copies of the templates, each on its
own client port and time, with seeded noise at the packet level (TCP only, AMQP bytes
untouched): retransmits, reordering, port reuse (two connections on one 4-tuple), and on
clean connections only the destructive kinds, snap-length truncation and capture gaps (a
defect-only connection must produce no cluster); the packet edits are traces/pcap_edit.py's.
Files are written by traces/pcap_writer.RecordWriter as micro- and nanosecond pcaps,
pcapng and gzip'd pcaps. `truth.json` says which connection carries which fault, who
injected it and its expected signature.
Writes only under `out`; the broker and the suite run as subprocesses.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from amqpspec.amqp10.checker.rules import RULES
from amqpspec.amqp10.checker.signature import BEFORE_OPEN, OPENED, signature
from amqpspec.traces.pcap_edit import (
    DESTRUCTIVE,
    NOISE_KINDS,
    Packet,
    add_noise,
    move_flow,
    read_flows,
)
from amqpspec.traces.pcap_writer import PCAP_MICRO, PCAP_NANO, PCAPNG, RecordWriter


@dataclass(frozen=True, slots=True)
class FaultKind:
    """One injected fault kind: who injects it and the one cluster it must land in.

    `broker_fault`: the reference broker's `--fault` (the broker is faulty); None: the
    broker is clean and the fault is the conformance case's own deliberately illegal frame
    (the probe plays a faulty client). `cases`: conformance cases whose one connection shows
    the fault on the wire (chosen by running them). `signature`: the exact signature of its
    first violation (amqp10/checker/signature.py), distinct for every kind."""

    name: str
    broker_fault: str | None
    cases: tuple[str, ...]
    signature: str

    @property
    def injected_by(self) -> str:
        if self.broker_fault:
            return f"reference broker --fault {self.broker_fault}"
        return "client: the conformance case's deliberate frame (clean broker)"


def _signature(rule: str, frame: str, state: str) -> str:
    """The checker's signature for `rule`, under the section the checker gives the rule
    (amqp10/checker/rules.py): the expected clusters follow the rule table, never a copy."""
    return signature(rule, RULES[rule].section, frame, state)


def _broker(fault: str, cases: tuple[str, ...], rule: str, frame: str) -> FaultKind:
    return FaultKind(fault, fault, cases, _signature(rule, frame, OPENED))


def _client(name: str, case: str, rule: str, frame: str, state: str = OPENED) -> FaultKind:
    return FaultKind(f"client-{name}", None, (case,), _signature(rule, frame, state))


# The broker faults whose effect shows on one connection's wire. Left out, as they collapse
# or do not show there: ignore-drain (on the wire the same bug as no-drain-reply: no drain
# answer, one cluster); credit-per-frame (a sender that sends less breaks no rule);
# no-requeue-on-detach, redeliver-undeliverable-here, ignore-alarm,
# negative-window-after-alarm, skip-window-check (judged across connections or by what the
# broker did with messages, not by one connection's frames); the parser faults (the frame
# that sets them off is the client's own violation, the same with a clean broker, and a
# hang or a dropped socket breaks no rule of one connection's frames).
BROKER_KINDS: tuple[FaultKind, ...] = (
    _broker(
        "overdeliver-on-regrant",
        ("2.6.7/credit-grow-grant", "2.6.7/credit-regrant-after-batch"),
        "link.credit.transfer-beyond-credit",
        "transfer",
    ),
    _broker(
        "transfer-before-credit",
        ("2.5.6/alarm-consumer-keeps-consuming", "2.5.6/alarm-held-transfer-completes"),
        "link.credit.transfer-without-credit",
        "transfer",
    ),
    _broker(
        "excess-credit-after-drain",
        ("2.6.7/drain-credit-after", "2.6.7/drain-link-usable-after"),
        "link.drain.transfer-after-drain",
        "transfer",
    ),
    _broker(
        "no-drain-reply",
        ("2.6.7/drain-credit-after", "2.6.7/drain-after-partial-consumption"),
        "link.drain.no-reply",
        "flow",
    ),
    _broker(
        "no-echo",
        ("2.7.4/echo-link-state", "2.7.4/echo-zero-credit"),
        "link.echo.unanswered",
        "flow",
    ),
)
# Faulty clients: conformance cases that send a deliberately illegal frame (the clean
# broker refuses it as it must); one case per checker rule.
CLIENT_KINDS: tuple[FaultKind, ...] = (
    _client(
        "begin-before-open",
        "2.4.1/begin-before-open",
        "connection.open-first",
        "begin",
        BEFORE_OPEN,
    ),
    _client(
        "frame-over-512-before-open",
        "2.4.1/frame-over-512-before-open",
        "framing.pre-open-frame-size",
        "open",
        BEFORE_OPEN,
    ),
    _client("second-open", "2.4.1/second-open", "connection.open-channel", "open"),
    _client(
        "frame-on-unbegun-channel",
        "2.5.1/frame-on-unbegun-channel",
        "session.no-session",
        "flow",
    ),
    _client(
        "window-violation",
        "2.5.6/window-violation-burst",
        "session.window-violation",
        "transfer",
    ),
    _client("flow-after-detach", "2.6.2/flow-after-detach", "link.frame-after-detach", "flow"),
    _client("handle-in-use", "2.6.2/handle-in-use", "link.attach.handle-in-use", "attach"),
    _client(
        "transfer-on-receiving-link",
        "2.6.2/transfer-on-receiving-link",
        "link.transfer.wrong-role",
        "transfer",
    ),
    _client(
        "unattached-handle",
        "2.6.2/unattached-handle-flow",
        "link.unattached-handle",
        "flow",
    ),
    _client(
        "handle-above-handle-max",
        "2.7.3/handle-above-handle-max",
        "link.attach.handle-max",
        "attach",
    ),
    _client(
        "begin-channel-in-use",
        "2.7.2/begin-channel-in-use",
        "session.channel-in-use",
        "begin",
    ),
)
KINDS: tuple[FaultKind, ...] = BROKER_KINDS + CLIENT_KINDS
CLEAN_CASES = ("2.6.7/credit-1", "2.6.7/drain-exact", "2.6.7/credit-regrant-in-flight")
CLEAN = "clean"
RUN_ATTEMPTS = 3
LIVENESS_BOUND = 1.0  # the drain faults are liveness rules: triage the corpus with this
SERVER_PORT = 5672
PER_FILE = 3  # connections per corpus file
# each file's form, in turn: (form, gzip'd)
FILE_FORMS = ((PCAP_MICRO, False), (PCAP_NANO, False), (PCAPNG, False), (PCAP_NANO, True))


@dataclass
class _Connection:
    kind: FaultKind | None  # None: clean
    case: str
    packets: list[Packet]


def _runs(cases_per_kind: int | None) -> dict[str | None, dict[str, FaultKind | None]]:
    """Broker fault (None: the clean broker) -> case -> the kind it shows (None: clean)."""
    clean = CLEAN_CASES[:cases_per_kind]
    runs: dict[str | None, dict[str, FaultKind | None]] = {None: dict.fromkeys(clean)}
    for kind in KINDS:
        for case in kind.cases[:cases_per_kind]:
            runs.setdefault(kind.broker_fault, {})[case] = kind
    return runs


def _shows(pcap: Path, kind: FaultKind | None) -> bool:
    """The case's one connection shows exactly its kind's signature (clean: none)."""
    from amqpspec.spark_triage.check import signatures_of_items
    from amqpspec.traces.load import open_trace

    wanted = {kind.signature} if kind else set()
    return signatures_of_items(open_trace(str(pcap)), LIVENESS_BOUND) == wanted


def _run_scenarios(work: Path, cases_per_kind: int | None) -> list[_Connection]:
    """Each broker configuration (conformance.fault_matrix.run_fault: the reference broker
    subprocess with its fault, `amqpspec run` with the cases); every case's one connection
    that shows its kind exactly becomes a template. Cases that did not (a timing-dependent
    fault that did not fire, a clean case slowed past the liveness bound on a loaded
    machine) run again, up to RUN_ATTEMPTS runs in all."""
    from amqpspec.conformance.audit.fault_matrix import run_fault
    from amqpspec.conformance.run.results import load_index

    found: list[_Connection] = []
    for fault, cases in _runs(cases_per_kind).items():
        for attempt in range(RUN_ATTEMPTS):
            results = work / f"{fault or CLEAN}-{attempt + 1}"
            names = " or ".join(case.split("/", 1)[1] for case in cases)
            keyword = f"({names}) and not pipelined"  # the pipelined variants add nothing
            broker = run_fault(fault, results, keyword)
            index = load_index(results).get(broker, {})
            missed: dict[str, FaultKind | None] = {}
            for case, kind in cases.items():
                pcap = index.get(case, {}).get("pcap")
                flows = read_flows(results / pcap) if pcap else []
                if len(flows) == 1 and _shows(results / pcap, kind):
                    found.append(_Connection(kind, case, flows[0]))
                else:
                    missed[case] = kind
                    name = kind.name if kind else CLEAN
                    print(f"triage synth: {case} ({name}) did not show it", file=sys.stderr)
            if not missed:
                break
            cases = missed
    return found


def synthesize(out: str, connections: int, seed: int, cases_per_kind: int | None = None) -> int:
    """Write `out/corpus/` and `out/truth.json`; 0, or 2 when a kind has no template.
    `cases_per_kind`: run only the first N cases of each kind (tests keep the runs short)."""
    rng = random.Random(seed)
    root = Path(out)
    corpus = root / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    corpus.mkdir(parents=True)
    by_kind: dict[str, list[_Connection]] = {}
    for connection in _run_scenarios(root / "_runs", cases_per_kind):
        name = connection.kind.name if connection.kind else CLEAN
        by_kind.setdefault(name, []).append(connection)
    missing = sorted({CLEAN, *(kind.name for kind in KINDS)} - set(by_kind))
    if missing:
        print(f"triage synth: no traces for {', '.join(missing)}", file=sys.stderr)
        return 2
    truth, files = _place(by_kind, connections, rng)
    _write_corpus(corpus, files, truth)
    (root / "truth.json").write_text(
        json.dumps({"version": 1, "liveness_bound": LIVENESS_BOUND, "connections": truth}, indent=1)
        + "\n"
    )
    faults = sorted({entry["fault"] for entry in truth if entry["fault"]})
    print(
        f"triage synth: {len(truth)} connections in {len(files)} files under {corpus}, "
        f"{len(faults)} fault kinds; truth in {root / 'truth.json'}; triage with "
        f"--liveness-bound {LIVENESS_BOUND}"
    )
    return 0


def _place(
    by_kind: dict[str, list[_Connection]], connections: int, rng: random.Random
) -> tuple[list[dict], dict[str, list[Packet]]]:
    """`connections` copies of the templates, kinds in turn, moved to their own ports and
    times (some reusing the previous port), with noise: the truth entries and the packets
    of each file (PER_FILE connections a file)."""
    names = sorted(by_kind)
    truth: list[dict] = []
    files: dict[str, list[Packet]] = {}
    port, clock = 20000, 1_800_000_000 * 1_000_000_000
    previous_port: int | None = None
    for number in range(connections):
        template = rng.choice(by_kind[names[number % len(names)]])
        kind = template.kind
        file_name = f"corpus-{number // PER_FILE:04d}"
        reuse = previous_port is not None and rng.random() < 0.15
        client_port = previous_port if reuse else port
        port += 1
        packets = move_flow(template.packets, client_port, SERVER_PORT, clock)
        clock += 50_000_000 + (packets[-1].time_ns - packets[0].time_ns)
        noise = (["port-reuse"] if reuse else []) + _noise(packets, kind, rng)
        epoch = sum(
            1
            for entry in truth
            if entry["file"] == file_name and entry["client_port"] == client_port
        )
        files.setdefault(file_name, []).extend(packets)
        truth.append(
            {
                "file": file_name,
                "client_port": client_port,
                "server_port": SERVER_PORT,
                "epoch": epoch,
                "fault": kind.name if kind else None,
                "injected_by": kind.injected_by if kind else None,
                "signature": kind.signature if kind else None,
                "case": template.case,
                "noise": noise,
            }
        )
        same_file = (number + 1) // PER_FILE == number // PER_FILE
        previous_port = client_port if same_file else None
    return truth, files


def _noise(packets: list[Packet], kind: FaultKind | None, rng: random.Random) -> list[str]:
    """Capture noise added to one connection's packets (each kind with chance 0.3);
    destructive noise only where no fault is to be seen."""
    added = []
    for noise_kind in NOISE_KINDS:
        if kind and noise_kind in DESTRUCTIVE:
            continue
        if rng.random() < 0.3 and add_noise(packets, noise_kind, rng):
            added.append(noise_kind)
    return added


def _write_corpus(corpus: Path, files: dict[str, list[Packet]], truth: list[dict]) -> None:
    """Each file in its turn of the forms (pcap, pcapng, gzipped), packets in time order;
    the truth entries renamed to the files written."""
    renamed: dict[str, str] = {}
    for index, (name, packets) in enumerate(sorted(files.items())):
        form, compress = FILE_FORMS[index % len(FILE_FORMS)]
        renamed[name] = name + (".pcapng" if form == PCAPNG else ".pcap") + (".gz" * compress)
        with RecordWriter(corpus / renamed[name], form, compress=compress) as capture:
            for packet in sorted(packets, key=lambda p: p.time_ns):
                capture.write(packet.time_ns, packet.data, wirelen=packet.wirelen)
    for entry in truth:
        entry["file"] = renamed[entry["file"]]
