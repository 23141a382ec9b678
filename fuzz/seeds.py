"""Seeds: the legal conversations a campaign mutates.

Owns: `SCENARIOS` (legal client conversations made on the engine by
`fuzz.model.Conversation`: a bare open, a session, a sender publishing, a receiver with
credit, drain and echo, several sessions and links interleaved, a conversation ended
at each level), `scenario(handshake, rng)` (one of them, its parameters drawn from
`rng`), `pooled_scenario(handshake, seed, rng)` (one of a campaign's POOL, each made
once), and the corpus: `load_corpus(dir)` (every trace and reproducer under a directory;
a trace's connections by `fuzz.case.client_sides`, e.g. the conformance suite's recorded
traces, via `traces.load`).
"""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Callable

from amqpspec.fuzz.case import CaseFileError, Step, client_sides, load_case
from amqpspec.fuzz.model import Conversation, Handshake
from amqpspec.traces.load import TraceError

Scenario = Callable[[Conversation, random.Random], None]
POOL = 512  # legal conversations per campaign (pooled_scenario)


def _open_only(conv: Conversation, rng: random.Random) -> None:
    conv.open()


def _session(conv: Conversation, rng: random.Random) -> None:
    conv.open()
    session = conv.begin(rng.choice([0, 1, 10, 2048]), rng.choice([0, 1, 10, 2048]))
    if rng.random() < 0.5:
        conv.end(session)


def _sender(conv: Conversation, rng: random.Random) -> None:
    conv.open()
    session = conv.begin()
    link = conv.attach_sender(session)
    for _ in range(rng.randrange(1, 4)):
        conv.send(link, settled=rng.random() < 0.5)
    if rng.random() < 0.5:
        conv.detach(link, closed=rng.random() < 0.7)


def _receiver(conv: Conversation, rng: random.Random) -> None:
    conv.open()
    session = conv.begin()
    link = conv.attach_receiver(session, credit=rng.choice([1, 5, 100]))
    if rng.random() < 0.5:
        conv.flow(link, rng.choice([0, 1, 10]), drain=True)
    if rng.random() < 0.5:
        conv.flow(link, None, echo=True)
    if rng.random() < 0.3:
        conv.detach(link)


def _interleaved(conv: Conversation, rng: random.Random) -> None:
    conv.open()
    sessions = [conv.begin() for _ in range(rng.randrange(1, 4))]
    links = []
    for session in sessions:
        for _ in range(rng.randrange(1, 3)):
            if rng.random() < 0.5:
                links.append(conv.attach_sender(session))
            else:
                links.append(conv.attach_receiver(session, credit=rng.choice([1, 10])))
    for _ in range(rng.randrange(1, 6)):
        link = rng.choice(links)
        if link.is_sender and link.link_credit > 0:
            conv.send(link)
        elif not link.is_sender:
            conv.flow(link, rng.choice([0, 1, 50]), drain=rng.random() < 0.3)
    for session in sessions:
        if rng.random() < 0.5:
            conv.end(session)


def _closed(conv: Conversation, rng: random.Random) -> None:
    rng.choice([_session, _sender, _receiver])(conv, rng)
    conv.close()


SCENARIOS: dict[str, Scenario] = {
    "open": _open_only,
    "session": _session,
    "sender": _sender,
    "receiver": _receiver,
    "interleaved": _interleaved,
    "closed": _closed,
}


def scenario(handshake: Handshake, rng: random.Random) -> tuple[str, list[Step]]:
    """(name, client steps) of one legal conversation drawn from `rng`."""
    name = rng.choice(sorted(SCENARIOS))
    conv = Conversation(handshake)
    SCENARIOS[name](conv, rng)
    return name, conv.steps()


@functools.lru_cache(maxsize=4096)
def _pooled(handshake: Handshake, key: str) -> tuple[str, tuple[Step, ...]]:
    name, steps = scenario(handshake, random.Random(key))
    return name, tuple(steps)


def pooled_scenario(
    handshake: Handshake, seed: object, rng: random.Random
) -> tuple[str, list[Step]]:
    """One of a campaign's POOL legal conversations, picked by `rng`: conversation k of
    campaign seed S is `scenario(handshake, Random(f"{S}:pool:{k}"))`, made once (the
    engines that make one cost more than sending it)."""
    name, steps = _pooled(handshake, f"{seed}:pool:{rng.randrange(POOL)}")
    return name, list(steps)


# ----------------------------------------------------------------- corpus


def load_corpus(directory: str) -> list[list[Step]]:
    """Every trace (pcap, pcapng, frame log) and reproducer .json under `directory`."""
    corpus: list[list[Step]] = []
    for root, _dirs, files in os.walk(directory):
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                if name.endswith(".json"):
                    corpus.append(load_case(path)[0].steps)
                elif name.endswith((".pcap", ".pcapng", ".parquet")):
                    corpus.extend(client_sides(path))
            except (CaseFileError, TraceError, ValueError, OSError):
                continue
    return [steps for steps in corpus if steps]
