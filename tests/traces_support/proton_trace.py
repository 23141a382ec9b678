"""Parse proton's PN_TRACE_FRM=1 frame log (what a proton endpoint itself sent and got)."""

from __future__ import annotations

import re

_LINE = re.compile(r"(?:SASL|AMQP):FRAME:(\d*) +(->|<-) +(?:@([a-z-]+)\(\d+\) \[(.*)|(SASL|AMQP)$)")
_FIELD = re.compile(r"([a-z-]+)=(0x[0-9a-f]+|true|false|\d+)\b")


def frames(text: str) -> list[dict]:
    """[{'direction': '->'|'<-', 'name': 'flow'|'protocol-header', 'fields': {...}}]."""
    result = []
    for line in text.splitlines():
        match = _LINE.search(line)
        if not match:
            continue
        channel, arrow, name, rest, _header = match.groups()
        fields: dict[str, object] = {}
        if name:
            # only top-level fields: cut nested composites/maps out
            depth, flat = 0, []
            for char in rest:
                if char in "[{":
                    depth += 1
                elif char in "]}":
                    depth -= 1
                elif depth == 0:
                    flat.append(char)
            for key, value in _FIELD.findall("".join(flat)):
                if value in ("true", "false"):
                    fields[key] = value == "true"
                else:
                    fields[key] = int(value, 0)
        result.append(
            {
                "direction": arrow,
                "name": name or "protocol-header",
                "channel": int(channel) if channel else None,
                "fields": fields,
            }
        )
    return result
