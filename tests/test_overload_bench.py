"""bench/overload at small sizes over real sockets: each measurement runs end to end against
its own reference broker and its verdict holds (the full sizes are in bench/README.md)."""

from __future__ import annotations

import argparse

from amqpspec.bench.overload import alarm_flood, conn_scale, hostile, kill_soak


def args(module, **values) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    namespace = parser.parse_args([])
    for key, value in values.items():
        setattr(namespace, key, value)
    return namespace


def test_kill_soak_loses_nothing_confirmed(tmp_path):
    result = kill_soak.soak(cycles=3, min_run=0.2, max_run=0.5, seed=3, in_flight=32)
    classic, stream = result["classic"], result["stream"]
    assert classic["confirmed"] > 0 and stream["confirmed"] > 0
    assert classic["lost"] == 0 and stream["lost"] == 0, result
    assert classic["duplicates_unmarked"] == 0, classic["unmarked_ids"]
    assert stream["duplicate_ids"] == 0 and stream["offsets_reused"] == 0
    txn = result["transactions"]  # Part 4: committed there, rolled back never, none partial
    assert txn["committed"] > 0 and txn["rolled_back"] > 0, txn
    assert txn["committed_lost"] == txn["rolled_back_seen"] == txn["partial"] == 0, txn
    assert kill_soak.ok(result)
    assert kill_soak.run(args(kill_soak, cycles=1, out=str(tmp_path))) == 0
    assert (tmp_path / "overload-kill-soak.json").exists()


def test_alarm_flood_blocks_publishers_and_keeps_consumers_draining(tmp_path):
    result = alarm_flood.flood(total_mb=512, watermark_mb=192, body_kb=32, timeout=120)
    assert result["publisher_blocked_times"] > 0 and result["received_while_blocked"] > 0, result
    assert result["published_after_first_unblock"] > 0, result
    assert result["peak_over_watermark"] <= 1.5, result
    assert result["lost"] == 0 and result["duplicated"] == 0, result
    assert alarm_flood.ok(result), result


def test_conn_scale_holds_idle_connections_and_answers_new_clients():
    result = conn_scale.scale(connections=300, sessions=2, probe_count=5, batch=100)
    assert result["broker_connections_while_held"] >= 300, result  # none dropped
    assert 0 < result["kb_per_connection"] <= result["goal_kb_per_connection"], result
    assert result["probe_with_connections_held"]["median_ms"] <= result["goal_probe_ms"], result


def test_hostile_peers_get_the_spec_errors_and_the_normal_client_keeps_going():
    result = hostile.hostile(
        slowloris=60, randoms=60, seconds=4.0, trickle=0.3, pause=0.2, handshake_timeout=0.5
    )
    assert result["broker_alive"] and result["admin_api_answered"], result
    assert result["unanswered_or_undecodable"] == 0, result
    answers = result["answers"]
    ended_slow = {**answers["slowloris"], **result["still_connected_at_end"]["slowloris"]}
    assert ended_slow.get("close:amqp:resource-limit-exceeded", 0) > 0, result  # handshake
    assert answers["random"], result
    for answer in answers["random"]:  # 2.2: our header then EOF, or open + close with an error
        assert answer == "header+eof" or answer.startswith("close:amqp:"), result
    assert result["normal_client_msgs_per_s"]["during"] > 0, result


def test_hostile_paces_the_normal_client_to_its_usual_rate():
    result = hostile.hostile(
        slowloris=5, randoms=5, seconds=2.0, trickle=0.3, pause=0.2, handshake_timeout=0.5,
        normal_rate=400,
    )  # fmt: skip
    assert result["normal_client_rate_limit"] == 400, result
    rates = result["normal_client_msgs_per_s"]
    # paced: it never runs ahead of the rate (a catch-up burst at most), and it does run
    assert all(0 < rates[phase] <= 400 * 1.5 for phase in ("before", "during")), result
    assert result["broker_alive"] and result["unanswered_or_undecodable"] == 0, result
