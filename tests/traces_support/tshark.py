"""Run tshark on a pcap and return its AMQP PDUs in order, one dict per PDU (from PDML,
because `-T fields` merges the PDUs of one segment)."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET

TSHARK = shutil.which("tshark")
ARGUMENT_PREFIX = "amqp.performative.arguments."


def amqp_pdus(pcap: str, port: int, timeout: float = 60) -> list[dict]:
    """[{'kind': 'header'|'frame', 'code': int, 'channel': int, 'args': {name: show}}]."""
    assert TSHARK, "tshark is not installed"
    result = subprocess.run(
        [
            TSHARK,
            "-o",
            "tcp.reassemble_out_of_order:TRUE",
            "-r",
            pcap,
            "-d",
            f"tcp.port=={port},amqp",
            "-T",
            "pdml",
        ],
        capture_output=True,
        timeout=timeout,
        check=True,
    )
    pdus: list[dict] = []
    root = ET.fromstring(result.stdout)
    for packet in root.iter("packet"):
        for proto in packet.iter("proto"):
            if proto.get("name") != "amqp":
                continue
            fields: dict[str, str] = {}
            for field in proto.iter("field"):
                name = field.get("name", "")
                fields.setdefault(name, field.get("show", ""))
            if "amqp.init.id" in fields:
                pdus.append({"kind": "header", "code": int(fields["amqp.init.id"])})
                continue
            code = fields.get("amqp.performative") or fields.get("amqp.sasl.method")
            pdus.append(
                {
                    "kind": "frame",
                    "code": int(code) if code else None,
                    "channel": int(fields.get("amqp.channel", "0")),
                    "args": {
                        name[len(ARGUMENT_PREFIX) :]: value
                        for name, value in fields.items()
                        if name.startswith(ARGUMENT_PREFIX)
                    },
                }
            )
    return pdus
