"""`amqpspec trace show|check|convert|replay FILE`: read a pcap/pcapng/Parquet trace.

Owns: the subcommand's options and output. Exit status: 0 fine (check: no MUST
violation; replay: the broker answered every connection as recorded), 1 check found a
MUST violation (replay: an answer differs), 2 unreadable input or bad usage. `replay`
re-sends each connection's client side to `--broker` (the work is fuzz.replay).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from amqpspec.traces.check import check_trace
from amqpspec.traces.framelog import FrameLogWriter
from amqpspec.traces.load import TraceError, open_trace
from amqpspec.traces.reassembly import AMQP_PORTS
from amqpspec.traces.render import json_record, show_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="trace_command", metavar="ACTION")
    show = sub.add_parser("show", help="one line per frame (PN_TRACE_FRM style)")
    show.add_argument("file", help="pcap, pcapng or Parquet frame log")
    show.add_argument("--json", action="store_true", help="JSON lines instead of text")
    show.add_argument("--time", action="store_true", help="add each frame's timestamp")
    show.add_argument("--connection", type=int, help="only this connection id")
    check = sub.add_parser("check", help="run the protocol checker on every connection")
    check.add_argument("file", help="pcap, pcapng or Parquet frame log")
    check.add_argument("--json", action="store_true", help="JSON lines instead of text")
    check.add_argument(
        "--liveness-bound", type=float, default=None, help="seconds before a stall is reported"
    )
    convert = sub.add_parser("convert", help="pcap/pcapng -> Parquet frame log")
    convert.add_argument("file", help="pcap or pcapng (or a frame log, re-written)")
    convert.add_argument("out", help="output .parquet path")
    convert.add_argument("--trace-id", help="trace id column (default: the input's file name)")
    replay = sub.add_parser("replay", help="re-send the client side, compare the broker's")
    replay.add_argument("file", help="pcap, pcapng or Parquet frame log")
    replay.add_argument("--broker", required=True, help="amqp://[user:pass@]HOST:PORT")
    replay.add_argument("--profile", default="generic", help="broker profile (login)")
    for sub_parser in (show, check, convert, replay):
        sub_parser.add_argument(
            "--port",
            type=int,
            action="append",
            help="AMQP server port(s) for captures that start mid-connection "
            f"(default {sorted(AMQP_PORTS)})",
        )


def _ports(args: argparse.Namespace) -> frozenset[int]:
    return frozenset(args.port) | AMQP_PORTS if args.port else AMQP_PORTS


def _show(args: argparse.Namespace) -> int:
    trace = open_trace(args.file, _ports(args))
    out = sys.stdout
    for item in trace:
        if args.connection is not None and item.connection_id != args.connection:
            continue
        if args.json:
            out.write(json.dumps(json_record(item)) + "\n")
        else:
            out.write(show_line(item, with_time=args.time) + "\n")
    return 0


def _check(args: argparse.Namespace) -> int:
    trace = open_trace(args.file, _ports(args))
    findings = check_trace(trace, args.liveness_bound)
    must = 0
    for finding in findings:
        if finding.level == "MUST":
            must += 1
        if args.json:
            v = finding.violation
            record = {
                "connection": finding.connection_id,
                "index": finding.frame_index,
                "level": finding.level,
                "rule_id": v.rule_id if v else None,
                "section": v.section if v else None,
                "origin": v.origin if v else None,
                "reason": v.reason if v else finding.note,
            }
            print(json.dumps(record))
        else:
            print(finding.line())
    violations = sum(1 for f in findings if f.violation is not None)
    print(
        f"{args.file}: {len(trace.connections)} connection(s), {violations} violation(s), "
        f"{must} of them MUST",
        file=sys.stderr,
    )
    return 1 if must else 0


def _convert(args: argparse.Namespace) -> int:
    trace = open_trace(args.file, _ports(args))
    trace_id = args.trace_id or os.path.splitext(os.path.basename(args.file))[0]
    temporary = args.out + ".tmp"
    writer = FrameLogWriter(temporary, trace_id)
    try:
        for item in trace:
            writer.add(item, trace.connections.get(item.connection_id))
    except BaseException:
        writer.close()
        os.unlink(temporary)
        raise
    writer.close(trace.connections.values())
    os.replace(temporary, args.out)
    print(f"{args.out}: {writer.rows_written} rows, {len(trace.connections)} connection(s)")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from amqpspec.fuzz.oracle import alive
    from amqpspec.fuzz.replay import replay_trace  # the fuzzer owns sending traces to brokers

    open_trace(args.file, _ports(args))  # unreadable input: exit 2 before any traffic
    target = _replay_target(args)
    if not alive(target):
        raise TraceError(f"broker {target.url} is unreachable")
    results = replay_trace(target, args.file)
    for result in results:
        print(result.line())
    same = sum(r.same for r in results)
    print(f"{args.file}: {same} of {len(results)} connection(s) answered as recorded")
    return 0 if same == len(results) else 1


def _replay_target(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from amqpspec.fuzz.cli import FuzzUsageError, target_from

    try:
        return target_from(args.broker, args.profile)
    except FuzzUsageError as exc:
        raise TraceError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    actions = {"show": _show, "check": _check, "convert": _convert, "replay": _replay}
    action = actions.get(args.trace_command or "")
    if action is None:
        print("usage: amqpspec trace {show,check,convert,replay} FILE ...", file=sys.stderr)
        return 2
    try:
        return action(args)
    except TraceError as exc:
        print(f"amqpspec trace {args.trace_command}: cannot read {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
