"""``raftmeta node --kafka-listener/--kafka-peers``: checked before the node starts, and turned into
the NodeConfig the listener reads; ``raftmeta fuzz --target kafka``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.fuzz.runner import DECODER_ROUND_EXAMPLES
from raftmeta.kafka.context import KafkaNode
from raftmeta.kafka.server import kafka_nodes, server_ssl_context
from raftmeta.server.config import NodeConfig

NODE = ["node", "--node-id", "1", "--listen", "127.0.0.1:1", "--voters", "1@127.0.0.1:1", "--cluster-id", "c"]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--kafka-listener", "nonsense"], "--kafka-listener"),
        (["--kafka-listener", "127.0.0.1:99999"], "--kafka-listener"),
        (["--kafka-listener", "127.0.0.1:9092", "--kafka-peers", "2@nowhere"], "--kafka-peers"),
        # The budget must hold the largest frame (Kafka refuses the same for queued.max.request.bytes).
        (
            ["--kafka-listener", "127.0.0.1:9092", "--kafka-queued-max-request-bytes", "1000"],
            "--kafka-queued-max-request-bytes",
        ),
        (["--kafka-listener", "127.0.0.1:9092", "--kafka-frame-timeout-ms", "0"], "--kafka-frame-timeout-ms"),
    ],
)
def test_bad_kafka_flags_are_usage_errors(tmp_path: Path, flags: list[str], named: str) -> None:
    result = CliRunner().invoke(cli, [*NODE, "--data-dir", str(tmp_path / "d"), *flags])
    assert result.exit_code == 2, result.output
    assert named in result.output
    assert not (tmp_path / "d").exists()  # refused before the node touched anything


def test_kafka_nodes_are_this_node_and_its_peers(tmp_path: Path) -> None:
    config = NodeConfig(
        node_id=2,
        listen="127.0.0.1:1",
        voters={1: "127.0.0.1:1", 2: "127.0.0.1:2"},
        data_dir=tmp_path,
        cluster_id="c",
        kafka_listener="127.0.0.1:9202",
        kafka_peers={1: "127.0.0.1:9201", 3: "[::1]:9203"},
    )
    assert kafka_nodes(config) == [
        KafkaNode(1, "127.0.0.1", 9201),
        KafkaNode(2, "127.0.0.1", 9202),
        KafkaNode(3, "::1", 9203),
    ]


def test_plaintext_without_tls_settings() -> None:
    assert server_ssl_context(None) is None


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_fuzz_target_kafka_runs_a_round_against_a_real_quorum(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["fuzz", "--target", "kafka", "--duration", "0", "--seed", "3", "--data-dir", str(tmp_path / "f"),
              "--nodes", "1", "--output", "json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (target,) = json.loads(result.stdout)["targets"]
    assert target["name"] == "kafka" and target["failures"] == []
    assert target["examples"] == DECODER_ROUND_EXAMPLES  # one whole round
    assert target["outcomes"]["refused"] > 0 and target["outcomes"]["request"] > 0
