"""Coverage-guided fuzzing of the codec with atheris (libFuzzer), run as a child process.

    python -m amqpspec.fuzz.atheris_codec [libFuzzer options] CORPUS_DIR...

Owns: instrumenting `amqp10` (only it, before anything else imports it) and handing
libFuzzer the codec oracle of `fuzz.inprocess.codec_one`; an input whose decoding raises
anything but DecodeError is a crash (libFuzzer writes it where -artifact_prefix says).
`amqpspec fuzz codec` starts it and turns what it wrote into crashers.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["amqpspec.amqp10"]):
    import amqpspec.amqp10.codec
    import amqpspec.amqp10.frames  # noqa: F401

from amqpspec.fuzz.inprocess import codec_one


def one(data: bytes) -> None:
    crash = codec_one(data)
    if crash is not None:
        raise AssertionError(crash)


def main() -> None:
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
