"""The KRaft launcher's rules that need no JVM: what each node is configured with, the counts it
accepts, the cluster file it refuses, and `raftmeta kraft`'s usage errors. The launcher against
real Kafka is tested in tests/kraft/."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.kraft.cluster import CLUSTER_FILE, KraftCluster, KraftNode, broker_log_dirs, check_shape, port_taken
from raftmeta.kraft.node_config import (
    JvmSettings,
    broker_properties,
    controller_id,
    controller_properties,
    log4j2_properties,
    render_properties,
)

CONTROLLERS = ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"]


def test_controllers_are_numbered_as_kafkas_test_kit_numbers_them() -> None:
    assert [controller_id(i) for i in range(3)] == [3001, 3002, 3003]


def test_a_controller_joins_a_dynamic_quorum_in_isolated_mode(tmp_path: Path) -> None:
    properties = controller_properties(3002, CONTROLLERS[1], CONTROLLERS, tmp_path)
    assert properties["process.roles"] == "controller"
    assert properties["node.id"] == "3002"
    # KIP-853: found through the bootstrap servers; the voters are in the formatted log.
    assert properties["controller.quorum.bootstrap.servers"] == ",".join(CONTROLLERS)
    assert "controller.quorum.voters" not in properties
    assert properties["listeners"] == "CONTROLLER://127.0.0.1:9002"
    assert properties["log.dirs"] == str(tmp_path)


def test_a_broker_has_its_rack_and_internal_topics_fit_the_cluster(tmp_path: Path) -> None:
    properties = broker_properties(1, "127.0.0.1:9092", "rack-b", CONTROLLERS, tmp_path, brokers=1)
    assert (properties["process.roles"], properties["node.id"], properties["broker.rack"]) == ("broker", "1", "rack-b")
    assert properties["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert properties["controller.listener.names"] == "CONTROLLER"
    assert properties["offsets.topic.replication.factor"] == "1"
    assert properties["transaction.state.log.min.isr"] == "1"
    three = broker_properties(1, "127.0.0.1:9092", "rack-b", CONTROLLERS, tmp_path, brokers=5)
    assert three["offsets.topic.replication.factor"] == "3"
    overridden = broker_properties(
        1, "127.0.0.1:9092", "rack-b", CONTROLLERS, tmp_path, brokers=5, overrides={"num.partitions": "6"}
    )
    assert overridden["num.partitions"] == "6"


def test_a_broker_on_static_voters_names_them_and_no_bootstrap_servers(tmp_path: Path) -> None:
    """A broker on raftmeta's quorum: the voters' Kafka listeners as controller.quorum.voters."""
    voters = {3: "127.0.0.1:9003", 1: "127.0.0.1:9001"}
    properties = broker_properties(100, "127.0.0.1:9092", "rack-a", [], tmp_path, 3, static_voters=voters)
    assert properties["controller.quorum.voters"] == "1@127.0.0.1:9001,3@127.0.0.1:9003"
    assert "controller.quorum.bootstrap.servers" not in properties
    with pytest.raises(ValueError, match="static voters or bootstrap controllers, not both"):
        broker_properties(100, "127.0.0.1:9092", "rack-a", CONTROLLERS, tmp_path, 3, static_voters=voters)


def test_a_jbod_broker_has_its_log_directories_the_first_holding_the_metadata_log(tmp_path: Path) -> None:
    directories = broker_log_dirs(tmp_path, 3)
    assert directories == [tmp_path / "data", tmp_path / "data-1", tmp_path / "data-2"]
    properties = broker_properties(100, "127.0.0.1:9092", "rack-a", CONTROLLERS, directories, 3)
    assert properties["log.dirs"] == ",".join(str(d) for d in directories)
    assert broker_log_dirs(tmp_path, 1) == [tmp_path / "data"]
    with pytest.raises(ValueError, match="at least one log directory, got 0"):
        broker_log_dirs(tmp_path, 0)


def test_properties_files_refuse_what_they_cannot_hold() -> None:
    assert render_properties({"a.b": "1", "c": "x y"}) == "a.b=1\nc=x y\n"
    with pytest.raises(ValueError, match="'evil'"):
        render_properties({"evil": "1\nprocess.roles=broker"})


def test_each_node_logs_to_its_own_file(tmp_path: Path) -> None:
    config = log4j2_properties(tmp_path / "server.log")
    assert f"appender.file.fileName = {tmp_path / 'server.log'}" in config
    assert "rootLogger.appenderRef.file.ref = FILE" in config


def test_jvm_flags_are_small_and_keep_the_full_jit() -> None:
    flags = JvmSettings().flags()
    assert "-Xms64m" in flags and "-Xmx512m" in flags and "-XX:+UseSerialGC" in flags
    assert not any(flag.startswith("-XX:TieredStopAtLevel") for flag in flags)
    with pytest.raises(ValueError, match="heap_initial_mb"):
        JvmSettings(heap_initial_mb=1024, heap_max_mb=512)


@pytest.mark.parametrize(
    ("controllers", "brokers", "racks", "rule"),
    [
        (0, 3, 3, "controllers must be between 1 and 9, got 0"),
        (10, 3, 3, "controllers must be between 1 and 9, got 10"),
        (3, 0, 1, "brokers must be between 1 and 99, got 0"),
        (3, 3, 4, r"racks must be between 1 and the number of brokers \(3\), got 4"),
        (3, 3, 0, "racks must be between 1"),
    ],
)
def test_counts_out_of_range_are_refused(controllers: int, brokers: int, racks: int, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        check_shape(controllers, brokers, racks)


def test_a_data_dir_holding_a_cluster_is_refused(tmp_path: Path) -> None:
    (tmp_path / CLUSTER_FILE).write_text(json.dumps({"cluster_id": "x", "data_dir": str(tmp_path), "nodes": []}))
    with pytest.raises(RuntimeError, match=r"kraft\.json exists and it holds a stopped cluster's storage"):
        KraftCluster.start(tmp_path, controllers=1, brokers=1, racks=1)


def test_a_data_dir_with_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "controller-3001").mkdir()  # e.g. left by a start whose format failed
    with pytest.raises(RuntimeError, match=r"is not empty \(it holds controller-3001\): use an empty --data-dir"):
        KraftCluster.start(tmp_path, controllers=1, brokers=1, racks=1)
    assert [p.name for p in tmp_path.iterdir()] == ["controller-3001"]


def test_a_damaged_cluster_file_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / CLUSTER_FILE).write_text('{"cluster_id": ')
    with pytest.raises(ValueError, match=r"kraft\.json is not valid JSON"):
        KraftCluster.load(tmp_path)
    (tmp_path / CLUSTER_FILE).write_text('{"cluster_id": "x"}')
    with pytest.raises(ValueError, match=r"kraft\.json does not describe a KRaft cluster"):
        KraftCluster.load(tmp_path)
    assert (tmp_path / CLUSTER_FILE).read_text() == '{"cluster_id": "x"}'  # refused, not rewritten


@pytest.mark.parametrize(
    ("args", "param"),
    [
        (["up", "--controllers", "0"], "--controllers"),
        (["up", "--brokers", "100"], "--brokers"),
        (["up", "--brokers", "2", "--racks", "3"], "--racks"),
        (["up", "--broker-config", "no-equals-sign"], "--broker-config"),
        (["up", "--controller-config", "=1"], "--controller-config"),
        (["down"], "--data-dir"),
        (["status"], "--data-dir"),
    ],
)
def test_kraft_usage_errors_name_the_flag(tmp_path: Path, args: list[str], param: str) -> None:
    result = CliRunner().invoke(cli, ["kraft", *args, "--data-dir", str(tmp_path / "none"), "--output", "json"])
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "USAGE_ERROR" and error["param"] == param, error
    assert not (tmp_path / "none").exists()  # nothing was started or written


def test_kraft_up_refuses_two_outputs(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["kraft", "up", "--data-dir", str(tmp_path), "--print-bootstrap-server", "--output", "json"]
    )
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["params"] == ["--print-bootstrap-server", "--output json"]


def test_kraft_status_of_a_damaged_cluster_file_fails(tmp_path: Path) -> None:
    (tmp_path / CLUSTER_FILE).write_text("not json")
    result = CliRunner().invoke(cli, ["kraft", "status", "--data-dir", str(tmp_path), "--output", "json"])
    assert result.exit_code == 1
    assert "is not valid JSON" in json.loads(result.stdout)["error"]["message"]


def test_a_port_taken_is_read_from_a_node_that_exited(tmp_path: Path) -> None:
    node = KraftNode(0, "broker", 0, "127.0.0.1:9092", "rack-a", str(tmp_path))  # pid 0: not running
    assert not port_taken(node)  # no logs
    (tmp_path / "console.log").write_text("java.net.BindException: Address already in use\n")
    assert port_taken(node)
    running = KraftNode(0, "broker", os.getpid(), "127.0.0.1:9092", "rack-a", str(tmp_path))
    assert not port_taken(running)
    (tmp_path / "console.log").write_text("Exiting Kafka due to fatal exception during startup.\n")
    assert not port_taken(node)
