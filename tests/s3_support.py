"""An S3-compatible server on loopback for the URL tests: moto's own server
(`moto.server.ThreadedMotoServer`) on a free port, one bucket, objects uploaded with boto3 (an
independent writer from the reader under test), the AWS variables pyarrow and boto3 read
set while it runs (docs/triage.md, 'Inputs by URL') and put back, the server stopped."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

BUCKET = "captures"


@dataclass
class S3Server:
    endpoint: str
    env: dict[str, str]  # what a process needs to read the bucket (executors too)
    client: object  # boto3's S3 client

    def upload(self, local: Path, key: str) -> str:
        """The object `key` with `local`'s bytes; its s3a: URL."""
        self.client.put_object(Bucket=BUCKET, Key=key, Body=local.read_bytes())
        return f"s3a://{BUCKET}/{key}"

    def upload_tree(self, root: Path, prefix: str) -> str:
        """Every file under `root` as `prefix/<relative path>`; the prefix's s3a: URL."""
        for path in sorted(root.rglob("*")):
            if path.is_file():
                self.upload(path, f"{prefix}/{path.relative_to(root).as_posix()}")
        return f"s3a://{BUCKET}/{prefix}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def s3_server() -> Iterator[S3Server]:
    """The server and its bucket; the calling test skips where moto's server is missing."""
    pytest.importorskip("moto.server", reason="pip install 'moto[server]' (the test extra)")
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "amqpspec-test",
        "AWS_SECRET_ACCESS_KEY": "amqpspec-test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",  # never ask 169.254.169.254 for credentials
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield S3Server(endpoint, env, client)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()
