"""The compiled fast path (amqp10.speedups, scripts/build_speedups.py, docs/speedups.md).

When the build has run, its modules really load compiled, AMQP10_PURE=1 really loads the
.py files, a stale extension is refused with a warning, and the compiled and pure frame
decoders/encoders agree byte for byte and error for error (a pure-Python worker process
beside this one). Without a build the compiled-only tests skip, which CI counts as a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpspec import amqp10
from amqpspec.amqp10 import codec, frames, speedups
from amqpspec.amqp10.errors import DecodeError, EncodeError
from amqpspec.fuzz import strategies as fuzz_st

ROOT = Path(__file__).resolve().parent.parent
BUILT = speedups.MANIFEST.exists()
needs_build = pytest.mark.skipif(
    not BUILT,
    reason="amqp10 is not compiled: apt-get install gcc python3-dev; "
    "pip install -e '.[speedups]' (or python3 scripts/build_speedups.py)",
)
SHOW = (
    "import json; from amqpspec import amqp10; import amqpspec.amqp10.composites as c; "
    "print(json.dumps({**amqp10.implementation(), 'twins': len(c.COMPILED_TWINS)}))"
)


def _env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "AMQP10_PURE"}
    env.update(changes)
    return env


def _show(pythonpath: Path = ROOT, **env: str) -> tuple[dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-c", SHOW],
        env=_env(PYTHONPATH=str(pythonpath), **env),
        cwd=pythonpath,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout), done.stderr


def test_this_process_runs_what_was_built() -> None:
    info = amqp10.implementation()
    if os.environ.get("AMQP10_EXPECT_COMPILED") == "1":
        assert BUILT, "AMQP10_EXPECT_COMPILED=1 but scripts/build_speedups.py has not run"
    if speedups.pure_forced() or not BUILT:
        assert info["mode"] == "pure" and not info["compiled"]
        assert not amqp10.composites.COMPILED_TWINS
    else:
        assert info == {
            "mode": "compiled",
            "compiled": ["codec", "composites", "frames", "message_head", "serial"],
            "pure": [],
            "stale": [],
            "forced_pure": False,
        }
        assert frames.__file__.endswith(".so") and codec.__file__.endswith(".so")
        # the .pxd files applied (build_speedups.package_tree): FrameDecoder a cdef class
        assert not hasattr(frames.FrameDecoder(), "__dict__")
        assert "dec" in amqp10.composites.COMPILED_TWINS


@needs_build
def test_compiled_unless_amqp10_pure() -> None:
    compiled, err = _show()
    assert compiled["mode"] == "compiled" and compiled["twins"] > 0 and not err
    pure, err = _show(AMQP10_PURE="1")
    assert pure["mode"] == "pure" and pure["forced_pure"] and pure["twins"] == 0
    assert pure["pure"] == compiled["compiled"] and not err


@needs_build
def test_a_stale_extension_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "amqp10"
    shutil.copytree(ROOT / "amqp10", copy, ignore=shutil.ignore_patterns("__pycache__"))
    # amqpspec.amqp10 <- the copy (setup.py's map: amqpspec.<part> <- <part>/)
    (tmp_path / "amqpspec").mkdir()
    (tmp_path / "amqpspec" / "__init__.py").write_text(
        "import os\n__path__.append(os.path.dirname(os.path.dirname(__file__)))\n"
    )
    with (copy / "serial.py").open("a") as source:
        source.write("# changed after the build\n")
    info, err = _show(tmp_path)
    assert info["stale"] == ["serial"] and info["pure"] == ["serial"]
    assert info["compiled"] == ["codec", "composites", "frames", "message_head"]
    assert info["mode"] == "partial"
    # the copy has no scripts/ beside it, so the hint is pip's (an installed wheel's)
    assert "serial" in err and "stale" in err and "pip install --force-reinstall" in err
    (copy / "_speedups.json").unlink()  # no record at all: nothing compiled is trusted
    info, err = _show(tmp_path)
    assert info["mode"] == "pure" and len(info["stale"]) == 5 and err.count(" is stale ") == 5


# ----------------------------------------------------------------- compiled == pure


def outcome(data: bytes, split: int) -> list[str]:
    """Everything a FrameDecoder makes of `data` fed in two chunks, each frame re-encoded,
    and codec.decode_value at the first bytes: the same in both modes, errors included."""
    seen: list[str] = []
    decoder = frames.FrameDecoder()
    try:
        for chunk in (data[:split], data[split:]):
            decoder.feed(chunk)
            while (item := decoder.next_item()) is not None:
                seen.append(repr(item))
                if isinstance(item, frames.Frame) and item.performative is not None:
                    encoded = frames.encode_frame(item.performative, item.channel, item.payload)
                    seen.append(encoded.hex())
                if isinstance(item, frames.Frame) and item.name == "sasl-outcome":
                    decoder.expect_protocol_header()
    except (DecodeError, EncodeError) as exc:  # the kind and facts too (amqp10/errors.py)
        seen.append(f"{type(exc).__name__} {exc} {exc.facts()}")
    for start in range(min(len(data), 12)):
        try:
            value, end = codec.decode_value(data, start)
            seen.append(f"{start}: {value!r} {end} {codec.encode(value).hex()}")
        except (DecodeError, EncodeError) as exc:
            seen.append(f"{start}: {type(exc).__name__} {exc} {exc.facts()}")
    return seen


def transfer_bytes(args: list[Any]) -> str:
    channel, handle, delivery_id, tag, message_format, settled, payload = args
    return frames.encode_transfer_frame(
        channel,
        handle,
        delivery_id,
        bytes.fromhex(tag),
        message_format,
        settled,
        bytes.fromhex(payload),
    ).hex()


def serve() -> None:
    """The pure worker: one JSON request per line in, one JSON answer per line out."""
    for line in sys.stdin:
        request = json.loads(line)
        if request[0] == "decode":
            answer: Any = outcome(bytes.fromhex(request[1]), request[2])
        else:
            answer = transfer_bytes(request[1])
        print(json.dumps(answer), flush=True)


@pytest.fixture(scope="module")
def pure_worker() -> Any:
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import test_speedups; "
    code += "test_speedups.serve()"
    worker = subprocess.Popen(
        [sys.executable, "-c", code],
        env=_env(PYTHONPATH=str(ROOT), AMQP10_PURE="1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def ask(request: list[Any]) -> Any:
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(json.dumps(request) + "\n")
        worker.stdin.flush()
        return json.loads(worker.stdout.readline())

    yield ask
    worker.stdin.close()  # type: ignore[union-attr]
    worker.wait(timeout=30)


PERFORMATIVES = ("open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end")


@st.composite
def wire(draw: Any) -> tuple[bytes, int]:
    """Frames of drawn performatives (some transfers with payload), then maybe damaged."""
    data = bytearray(frames.AMQP_HEADER.encode())
    for _ in range(draw(st.integers(1, 3))):
        performative = draw(st.sampled_from(PERFORMATIVES).flatmap(fuzz_st.composite))
        payload = draw(st.binary(max_size=20)) if performative.NAME == "transfer" else b""
        data += frames.encode_frame(performative, draw(st.integers(0, 3)), payload)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(("flip", "cut", "insert")))
        if kind == "flip":
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at : at + draw(st.integers(1, 4))]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
    return bytes(data), draw(st.integers(0, len(data)))


@given(wire())
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
def test_compiled_and_pure_decode_alike(pure_worker: Any, case: tuple[bytes, int]) -> None:
    data, split = case
    assert outcome(data, split) == pure_worker(["decode", data.hex(), split])


uints = st.one_of(st.integers(0, 300), st.integers(0, 2**32 - 1))


@given(
    st.tuples(
        st.integers(0, 0xFFFF),
        uints,
        uints,
        st.binary(max_size=32).map(bytes.hex),
        uints,
        st.booleans(),
        st.binary(max_size=40).map(bytes.hex),
    )
)
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
def test_compiled_and_pure_encode_transfers_alike(pure_worker: Any, args: tuple) -> None:
    assert transfer_bytes(list(args)) == pure_worker(["transfer", list(args)])
