"""``raftmeta configs`` (kafka-configs.sh) against a real quorum: set, list and delete topic configs
through IncrementalAlterConfigs; a refused change writes nothing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.client import SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import errors_pb2

from .test_node import create

pytestmark = pytest.mark.integration


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["configs", *args])
    return result.exit_code, result.stdout


def test_alter_describe_and_delete_topic_configs(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    assert create(client, "orders").error_code == errors_pb2.NONE
    b = ("--bootstrap-server", quorum.bootstrap_server, "--entity-type", "topics", "--entity-name", "orders")
    code, out = run(*b, "--alter", "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]")
    assert code == 0 and "Completed updating config for topic orders." in out
    code, out = run(*b, "--describe")
    assert code == 0
    assert out.splitlines() == [
        "Dynamic configs for topic orders are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete}",
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}",
    ]
    assert dict(client.describe_topics(["orders"]).topics[0].configs) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "5000",
    }

    before = client.describe_quorum().high_watermark
    code, out = run(*b, "--alter", "--add-config", "retention.ms=soon", "--output", "json")
    assert code == 1
    assert json.loads(out)["topics"] == [
        {
            "name": "orders",
            "error_code": "INVALID_CONFIG",
            "error_message": "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        }
    ]
    assert client.describe_quorum().high_watermark == before, "a refused change writes nothing"

    assert run(*b, "--alter", "--delete-config", "retention.ms")[0] == 0
    code, out = run(*b, "--describe", "--all", "--output", "json")
    configs = {c["name"]: (c["value"], c["is_default"]) for c in json.loads(out)["topics"][0]["configs"]}
    assert configs["retention.ms"] == ("604800000", True)
    assert configs["cleanup.policy"] == ("compact,delete", False)
