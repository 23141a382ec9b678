"""`amqpspec triage score DIR --truth truth.json`: how well the triage grouped the corpus.

Owns: `score(connections, violations, truth)` and `score_main(dir, truth_path)`. Each
connection's predicted cluster is the signature of its first violation (None: no
violation); its true class is the fault it carries (None: clean). Pairwise precision: of
the pairs put in one cluster, the share that carry the same fault; pairwise recall: of the
pairs that carry the same fault, the share put in one cluster; grouping accuracy: the
share of connections whose cluster's majority fault is theirs (no cluster and no fault
counts as right). Also: defect-only connections that produced a cluster (should be 0), the
share of faulty connections clustered under exactly the signature the truth expects
(`signature_exact`, when the truth names one), and from `clusters.json` the reproducers:
how many, their median length in frames, how many re-triggered their signature offline.
Reads DIR's parquet files, `clusters.json` and the truth; writes `DIR/score.json`.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path


def _pairs(counter: Counter) -> int:
    return sum(n * (n - 1) // 2 for n in counter.values())


def score(predicted: dict[str, str | None], truth: dict[str, dict]) -> dict:
    keys = sorted(truth)
    pred = {key: predicted.get(key) for key in keys}
    fault = {key: truth[key]["fault"] for key in keys}
    together = Counter((pred[k], fault[k]) for k in keys if pred[k] and fault[k])
    clustered = Counter(pred[k] for k in keys if pred[k])
    same_fault = Counter(fault[k] for k in keys if fault[k])
    precision = _pairs(together) / max(1, _pairs(clustered))
    recall = _pairs(together) / max(1, _pairs(same_fault))
    majority = {}
    for cluster in clustered:
        majority[cluster] = Counter(fault[k] for k in keys if pred[k] == cluster).most_common(1)[0][
            0
        ]
    right = sum(1 for k in keys if (majority.get(pred[k]) if pred[k] else None) == fault[k])
    expected = [k for k in keys if fault[k] and truth[k].get("signature")]
    exact = sum(1 for k in expected if pred[k] == truth[k]["signature"])
    defect_only = [
        k
        for k in keys
        if fault[k] is None
        and pred[k]
        and {"snaplen-truncation", "capture-gap"} & set(truth[k].get("noise", ()))
    ]
    return {
        "connections": len(keys),
        "matched": sum(1 for k in keys if k in predicted),
        "clusters": len(clustered),
        "faults": len(same_fault),
        "pairwise_precision": round(precision, 4),
        "pairwise_recall": round(recall, 4),
        "grouping_accuracy": round(right / max(1, len(keys)), 4),
        "false_clusters_on_defect_only": len(defect_only),
        "clean_with_cluster": sum(1 for k in keys if fault[k] is None and pred[k]),
        "signature_exact": round(exact / len(expected), 4) if expected else None,
    }


def reproducer_stats(clusters: list[dict]) -> dict:
    """How many clusters have a reproducer, its median length, how many re-checked."""
    made = [c["reproducer"] for c in clusters if c.get("reproducer")]
    frames = [r["frames"] for r in made]
    return {
        "reproducers": len(made),
        "median_reproducer_frames": statistics.median(frames) if frames else None,
        "reproducers_rechecked": sum(1 for r in made if r["rechecked"]),
    }


def _key(source: str, ends: str, epoch: str | int) -> str:
    return f"{Path(source).name}|{ends}|{epoch}"


def score_main(directory: str, truth_path: str | None) -> int:
    import pyarrow.parquet as pq

    if not truth_path:
        print("amqpspec triage score: --truth truth.json is required", file=sys.stderr)
        return 2
    out = Path(directory)
    try:
        document = json.loads(Path(truth_path).read_text())
        connections = pq.read_table(out / "connections.parquet").to_pylist()
        violations = pq.read_table(out / "violations.parquet").to_pylist()
        clusters = json.loads((out / "clusters.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"amqpspec triage score: bad input: {exc}", file=sys.stderr)
        return 2
    truth = {}
    for entry in document["connections"]:
        ends = sorted(
            ((f"127.0.0.1:{entry['client_port']}"), f"127.0.0.1:{entry['server_port']}"),
            key=lambda text: (text.rsplit(":", 1)[0], int(text.rsplit(":", 1)[1])),
        )
        truth[_key(entry["file"], "<>".join(ends), entry["epoch"])] = entry
    first: dict[str, tuple] = {}
    for row in violations:
        key = row["connection_key"]
        mark = (row["frame_index"] if row["frame_index"] is not None else 1 << 62, row["signature"])
        if key not in first or mark < first[key]:
            first[key] = mark
    predicted: dict[str, str | None] = {}
    for row in connections:
        source, ends, epoch = row["connection_key"].rsplit("|", 2)
        hit = first.get(row["connection_key"])
        predicted[_key(source, ends, epoch)] = hit[1] if hit else None
    result = score(predicted, truth) | reproducer_stats(clusters)
    (out / "score.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, value in result.items():
        print(f"{name:32} {value}")
    return 0
