"""``raftmeta reassign`` end to end against a real (pure) controller behind gRPC: generate a plan into a
pool, execute it, watch it in list/verify, let heartbeats finish it; cancel; bad plan files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.controller.grpc_controller import ControllerServer
from tests.controller.helpers import incarnation


@pytest.fixture
def server() -> Iterator[ControllerServer]:
    """Brokers 0..5 on racks a/b/c, 3..5 in pool "fast"; topic orders (3 partitions) on 0..2."""
    srv = ControllerServer()
    for broker_id in range(6):
        registered = srv.run(
            "RegisterBroker",
            controller_pb2.RegisterBrokerRequest(
                broker_id=broker_id,
                incarnation_id=incarnation(broker_id),
                rack="abc"[broker_id % 3],
                pool="fast" if broker_id >= 3 else None,
            ),
        )
        srv.run(
            "BrokerHeartbeat",
            controller_pb2.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=registered.broker_epoch),
        )
    created = srv.run(
        "CreateTopics",
        controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.CreatableTopic(
                    name="orders",
                    assignments=[
                        controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=r)
                        for i, r in enumerate([[0, 1, 2], [1, 2, 0], [2, 0, 1]])
                    ],
                )
            ]
        ),
    )
    assert created.topics[0].error_code == errors_pb2.NONE
    yield srv
    srv.stop()


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def finish_moves(server: ControllerServer, rounds: int = 3) -> None:
    """Every broker heartbeats, reporting what the previous answer told it to add."""
    told: dict[int, list[controller_pb2.TopicIdPartition]] = {b: [] for b in range(6)}
    for _ in range(rounds):
        for broker_id in range(6):
            epoch = server.servicer.controller.image.brokers[broker_id].epoch
            answer = server.run(
                "BrokerHeartbeat",
                controller_pb2.BrokerHeartbeatRequest(
                    broker_id=broker_id, broker_epoch=epoch, caught_up_replicas=told[broker_id]
                ),
            )
            told[broker_id] = list(answer.adding_replicas)


def test_move_a_topic_into_a_pool(server: ControllerServer, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    b = ("--bootstrap-server", server.address)
    code, out, err = invoke("reassign", "generate", *b, "--topics", "orders", "--to-pool", "fast",
                            "--plan-file", str(plan_file), "--output", "json")  # fmt: skip
    assert code == 0, err
    document = json.loads(out)
    assert document["moves"] == 9 and document["partitions_changed"] == 3
    assert document["proposed"] == json.loads(plan_file.read_text())
    assert all(set(p["replicas"]) == {3, 4, 5} for p in document["proposed"]["partitions"])
    assert document["after"]["replicas"]["per_broker"] == {"3": 3, "4": 3, "5": 3}
    assert document["before"]["replicas"]["per_broker"]["0"] == 3

    code, out, _ = invoke("reassign", "execute", *b, "--plan", str(plan_file))
    assert code == 0
    assert out.splitlines()[5] == "Successfully started partition reassignments for orders-0,orders-1,orders-2"
    code, out, _ = invoke("reassign", "list", *b)
    assert code == 0 and out.splitlines()[0] == "Current partition reassignments:"
    assert out.splitlines()[1].startswith("orders-0: replicas: ")
    code, out, _ = invoke("reassign", "verify", *b, "--plan", str(plan_file))
    assert code == 1 and "Reassignment of partition orders-0 is still in progress." in out
    # A second plan while this one runs needs --additional (Kafka's rule).
    code, _, err = invoke("reassign", "execute", *b, "--plan", str(plan_file))
    assert code == 1 and "Cannot execute because there is an existing partition assignment" in err

    finish_moves(server)
    code, out, _ = invoke("reassign", "verify", *b, "--plan", str(plan_file), "--output", "json")
    assert code == 0, out
    assert json.loads(out)["complete"] is True
    code, out, _ = invoke("reassign", "list", *b)
    assert out.strip() == "No partition reassignments found."


def test_generate_text_shows_the_kafka_json_and_the_balance(server: ControllerServer) -> None:
    code, out, err = invoke("reassign", "generate", "--bootstrap-server", server.address, "--exclude-brokers", "0")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1])["partitions"][0] == {"topic": "orders", "partition": 0, "replicas": [0, 1, 2]}
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert all(0 not in p["replicas"] for p in proposed)
    assert "Replica moves: 3 (3 partitions change, 0 only reorder their replicas)" in out
    assert "rack spread violations" in out


def test_generate_keeps_rack_spread_unless_rack_awareness_is_disabled(server: ControllerServer) -> None:
    # Broker 0 leaves rack a with one other broker (3): rack-aware, every replacement goes there;
    # --disable-rack-aware spreads them for balance, and partitions lose rack a.
    args = ("reassign", "generate", "--bootstrap-server", server.address, "--exclude-brokers", "0", "-o", "json")
    code, out, err = invoke(*args)
    assert code == 0, err
    aware = json.loads(out)
    assert [p["replicas"] for p in aware["proposed"]["partitions"]] == [[3, 1, 2], [1, 2, 3], [2, 3, 1]]
    assert aware["after"]["rack_spread_violations"] == 0
    code, out, err = invoke(*args, "--disable-rack-aware")
    assert code == 0, err
    unaware = json.loads(out)
    assert unaware["moves"] == aware["moves"] == 3
    assert unaware["after"]["rack_spread_violations"] > 0
    assert unaware["after"]["replicas"]["stddev"] < aware["after"]["replicas"]["stddev"]


def test_cancel_restores_the_original_replicas(server: ControllerServer, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4, 5]}]})
    )
    b = ("--bootstrap-server", server.address)
    assert invoke("reassign", "execute", *b, "--plan", str(plan_file))[0] == 0
    code, out, _ = invoke("reassign", "cancel", *b, "--all")
    assert code == 0 and out.startswith("Successfully cancelled partition reassignments for: orders-0")
    part = server.servicer.controller.committed_image.topic_by_name("orders").partitions[0]  # type: ignore[union-attr]
    assert (part.replicas, part.adding_replicas) == ((0, 1, 2), ())
    code, out, _ = invoke("reassign", "cancel", *b, "--plan", str(plan_file))
    assert code == 0 and "None in progress for: orders-0" in out


def test_execute_prints_kafkas_rollback_json_first(server: ControllerServer, tmp_path: Path) -> None:
    """kafka-reassign-partitions --execute's lines, byte for byte (its ReassignPartitionsCommandTest's
    golden text): the plan's partitions as they are now, sorted, compact, log_dirs "any"; then
    the started ones, sorted. A partition the cluster does not have is the reassignment's to refuse."""
    plan = {"version": 1, "partitions": [
        {"topic": "orders", "partition": 2, "replicas": [5, 3, 4]},
        {"topic": "orders", "partition": 0, "replicas": [3, 4, 5]},
        {"topic": "nosuch", "partition": 0, "replicas": [3, 4, 5]},
    ]}  # fmt: skip
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    b = ("--bootstrap-server", server.address)
    code, out, err = invoke("reassign", "execute", *b, "--plan", str(plan_file))
    assert code == 1 and "Error reassigning nosuch-0: UNKNOWN_TOPIC_OR_PARTITION" in err
    rollback = (
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[0,1,2],"log_dirs":["any","any","any"]},'
        '{"topic":"orders","partition":2,"replicas":[2,0,1],"log_dirs":["any","any","any"]}]}'
    )
    assert out.splitlines() == [
        "Current partition replica assignment",
        "",
        rollback,
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignments for orders-0,orders-2",
    ]
    # The rollback file is a plan execute takes (once the moves are cancelled).
    assert invoke("reassign", "cancel", *b, "--all")[0] == 0
    (tmp_path / "rollback.json").write_text(rollback)
    assert invoke("reassign", "execute", *b, "--plan", str(tmp_path / "rollback.json"))[0] == 0
    code, out, _ = invoke("reassign", "execute", *b, "--plan", str(plan_file), "--additional", "--output", "json")
    assert json.loads(out)["rollback"] == json.loads(rollback)


def test_rejected_partitions_exit_1_with_the_rule(server: ControllerServer, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4]}]})
    )
    code, _, err = invoke("reassign", "execute", "--bootstrap-server", server.address, "--plan", str(plan_file))
    assert code == 1
    assert (
        "Error reassigning orders-0: INVALID_REPLICATION_FACTOR: The replication factor is changed from 3 to 2" in err
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read"),
        ('{"version": 2, "partitions": []}', 'expected {"version": 1, "partitions": [...]}'),
        ('{"version": 1, "partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}', "partitions[0] needs"),
        (
            '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},'
            ' {"topic": "t", "partition": 0, "replicas": [2]}]}',
            "partition t-0 appears twice",
        ),
    ],
)
def test_bad_plan_files_are_usage_errors(tmp_path: Path, content: str, message: str) -> None:
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(content)
    code, _, err = invoke("reassign", "execute", "--bootstrap-server", "127.0.0.1:1", "--plan", str(plan_file))
    assert code == 2
    assert message in err


def test_generate_needs_a_goal() -> None:
    code, _, err = invoke("reassign", "generate", "--bootstrap-server", "127.0.0.1:1")
    assert code == 2 and "give at least one of --to-pool, --exclude-brokers, --broker-list, --rebalance" in err


def test_broker_list_and_topics_to_move_json_file_as_kafka_reads_them(server: ControllerServer, tmp_path: Path) -> None:
    """kafka-reassign-partitions.sh --generate --topics-to-move-json-file F --broker-list 1,2,3,4,5: the
    replicas may use only the listed brokers (broker 0 is left)."""
    move = tmp_path / "topics.json"
    move.write_text(json.dumps({"topics": [{"topic": "orders"}], "version": 1}))
    args = ("reassign", "generate", "--bootstrap-server", server.address, "--output", "json")
    code, out, err = invoke(*args, "--topics-to-move-json-file", str(move), "--broker-list", "1,2,3,4,5")
    assert code == 0, err
    proposed = json.loads(out)["proposed"]["partitions"]
    assert proposed and all(0 not in p["replicas"] and p["topic"] == "orders" for p in proposed)
    move.write_text(json.dumps({"topics": [{"name": "orders"}]}))
    code, _, err = invoke(*args, "--topics-to-move-json-file", str(move), "--broker-list", "1,2,3")
    assert code == 2 and "--topics-to-move-json-file" in err and "topics[0] needs a string topic" in err
    code, _, err = invoke(*args, "--broker-list", "1,2,99")
    assert code == 2 and "brokers [99] are not registered" in err
