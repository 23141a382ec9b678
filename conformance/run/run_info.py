"""What a report says about the run behind a results directory: the run header.

Owns: `RunInfo` (amqpspec's version and commit, when the run started and ended, the command,
the profile, the expectations file, the broker URL without its password, the transport
(tcp, or websocket for a ws:// or wss:// URL), and the broker's
product, version and platform as its own open frame announced them: 2.7.1 open
`properties`, whose keys `product`, `version` and `platform` are the connection
properties AMQP's registry names) and `broker_identity()`, which reads them from a case's
recorded connections. The plugin records one RunInfo per broker in the results DIR,
`DIR/runs/<broker>.json`, and the product and version in each of the broker's index.json
entries (`broker_product`, `broker_version`: results.ResultsDir.write_index). Pure apart from
`current_commit`, which asks git about the source checkout.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from amqpspec.amqp10.composites import Open
from amqpspec.amqp10.origins import SERVER

IDENTITY_KEYS = ("product", "version", "platform")  # open properties a report shows


@dataclass
class RunInfo:
    broker: str = ""
    profile: str = ""
    amqpspec_version: str = ""
    commit: str = ""
    started: str = ""  # ISO 8601, UTC
    finished: str = ""
    command: str = ""
    expectations: str = ""
    broker_url: str = ""
    # how the run reached the broker: "tcp" or "websocket" (ws:// / wss://, ws_bridge.py)
    transport: str = "tcp"
    # from the broker's open: product, version, platform, container-id
    identity: dict[str, str] = field(default_factory=dict)

    @property
    def announced(self) -> str:
        """The product and version for a report's header, or what stands in for them."""
        if self.product:
            return self.product
        if "container-id" not in self.identity:
            return "(not recorded)"
        container = self.identity["container-id"]
        named = f"; container-id {container!r}" if container else ""
        return f"(not announced in its open{named})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        info = cls(**known)
        info.identity = {str(k): str(v) for k, v in (info.identity or {}).items()}
        return info

    @property
    def product(self) -> str:
        """ "RabbitMQ 3.10.8" as the broker's open said it, or "" when it said nothing."""
        return " ".join(
            v for v in (self.identity.get("product", ""), self.identity.get("version", "")) if v
        )


def iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def public_url(url: str) -> str:
    """The broker URL with its password left out (a report is published)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def command_line(argv: list[str]) -> str:
    """The command as typed (`amqpspec run ...`), passwords in URLs left out."""
    name = Path(argv[0]).name if argv else ""
    if name in ("cli.py", "__main__.py"):  # python -m amqpspec.cli
        name = "amqpspec"
    words = [name, *argv[1:]]
    return " ".join(public_url(w) if "://" in w else w for w in words).strip()


def current_commit() -> str:
    """The git commit of the amqpspec source checkout that runs, or "" (an installed wheel)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return ""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def start_info(broker: str, profile: str, broker_url: str, expectations: str | None) -> RunInfo:
    from amqpspec import __version__

    return RunInfo(
        broker=broker,
        profile=profile,
        amqpspec_version=__version__,
        commit=current_commit(),
        started=iso_now(),
        command=command_line(sys.argv),
        expectations=expectations or "",
        broker_url=public_url(broker_url),
        transport="websocket" if broker_url.startswith(("ws://", "wss://")) else "tcp",
    )


def broker_identity(recordings: list[Any]) -> dict[str, str]:
    """product / version / platform / container-id from the first open the broker sent on
    any of `recordings` (the probe's connections of one case); {} when none arrived."""
    for recording in recordings:
        for item in recording.items:
            frame = item.item
            performative = getattr(frame, "performative", None)
            if item.direction != SERVER or not isinstance(performative, Open):
                continue
            identity = {"container-id": str(performative.container_id)}
            for key, value in (performative.properties or {}).items():
                name = str(key)
                if name in IDENTITY_KEYS:
                    identity[name] = str(value)
            return identity
    return {}
