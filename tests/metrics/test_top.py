"""``raftmeta quorum top``: the document built from DescribeQuorum, DescribeCluster and the nodes'
metrics (in memory), its rendering, and the command against a real quorum (integration)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import generate_latest
from rich.console import Console

from raftmeta.cli.main import cli
from raftmeta.cli.top import render, top_document
from raftmeta.client import SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.metrics.node import NodeMetrics, RaftView
from raftmeta.metrics.scrape import Scrape, parse, window
from raftmeta.v1 import controller_pb2 as pb
from raftmeta.v1 import errors_pb2
from tests.integration.test_node import create
from tests.metrics.test_collectors import sample_image


def node_scrape(role: str, leader: int, *, active: bool, latencies: tuple[float, ...] = ()) -> Scrape:
    metrics = NodeMetrics()
    view = RaftView(role, 4, leader, leader, 50, 52 if role == "leader" else 50, 4, 0, 0, active, 49, sample_image())
    metrics.set_view(lambda: view)
    for i, latency in enumerate(latencies):
        metrics.leader_appended(i + 1, 0.0)
        metrics.committed(i + 1, 1, latency)
    return parse(generate_latest(metrics.registry).decode())


def describe_quorum() -> pb.DescribeQuorumResponse:
    return pb.DescribeQuorumResponse(
        cluster_id="c",
        leader_id=1,
        leader_epoch=4,
        high_watermark=50,
        voters=[
            pb.QuorumReplicaState(replica_id=1, log_end_offset=52, lag=0, last_fetch_ms_ago=0),
            pb.QuorumReplicaState(replica_id=2, log_end_offset=50, lag=0, last_fetch_ms_ago=3),
            pb.QuorumReplicaState(replica_id=3, log_end_offset=-1, lag=-1, last_fetch_ms_ago=-1),
        ],
    )


def test_the_document_joins_describe_quorum_cluster_and_metrics() -> None:
    scrapes = {
        1: node_scrape("leader", 1, active=True, latencies=(0.0015,) * 9 + (0.2,)),
        2: node_scrape("follower", 1, active=False),
        3: None,  # its endpoint does not answer
    }
    cluster = pb.DescribeClusterResponse(brokers=[pb.BrokerDescription(broker_id=b, fenced=b == 3) for b in (1, 2, 3)])
    document = top_document(describe_quorum(), cluster, scrapes)
    assert [v["id"] for v in document["voters"]] == [1, 2, 3]
    leader, follower, down = document["voters"]
    assert (leader["role"], leader["epoch"], leader["high_watermark"], leader["log_end_offset"]) == (
        "leader",
        4,
        50,
        52,
    )
    assert 1 <= leader["commit_latency_p50_ms"] <= 2
    assert leader["commit_latency_p99_ms"] > 100
    assert (follower["role"], follower["lag"], follower["last_fetch_ms_ago"]) == ("follower", 0, 3)
    assert follower["commit_latency_p50_ms"] is None
    assert (down["metrics"], down["lag"], down["role"]) == ("down", None, "down"), "not a follower: it is dead"
    assert document["brokers"] == {"active": 2, "fenced": 1}
    assert document["partitions"] == {
        "topics": 2,
        "partitions": 4,
        "offline": 1,
        "under_replicated": 2,
        "preferred_replica_imbalance": 1,
    }
    console = Console(width=140, record=True)
    console.print(render(document))
    text = console.export_text()
    assert "COMMIT p50 ms" in text and "UNDER-REPLICATED" in text and "down" in text
    header, values = text.splitlines()[-2:]
    assert dict(zip(header.split(), values.split(), strict=True))["BROKERS"] == "3", "2 active + 1 fenced"
    assert dict(zip(header.split(), values.split(), strict=True))["FENCED"] == "1"


def test_without_metrics_the_document_still_has_the_quorum() -> None:
    document = top_document(describe_quorum(), None, {})
    assert [(v["id"], v["role"], v["metrics"]) for v in document["voters"]] == [
        (1, "leader", "none"),
        (2, "follower", "none"),
        (3, "not fetching", "none"),
    ]
    assert document["partitions"] is None and document["brokers"] is None


def test_an_observer_is_labelled_once() -> None:
    quorum = describe_quorum()
    quorum.observers.append(pb.QuorumReplicaState(replica_id=4, log_end_offset=50, lag=0, last_fetch_ms_ago=2))
    scrapes = {1: node_scrape("leader", 1, active=True), 2: None, 3: None, 4: node_scrape("observer", 1, active=False)}
    document = top_document(quorum, None, scrapes)
    assert [(o["id"], o["role"]) for o in document["observers"]] == [(4, "observer")]
    console = Console(width=140, record=True)
    console.print(render(document))
    lines = [line.split() for line in console.export_text().splitlines()]
    nodes = lines[lines.index(["NODE", "ROLE", "EPOCH", "HW", "LEO", "LAG", "FETCH", "AGO", "ms", "COMMIT", "p50", "ms",
                               "p99", "ms", "METRICS"]) + 1 :][:4]  # fmt: skip
    rows = {cells[0]: cells[1:3] for cells in nodes}
    assert rows["4"][0] == "observer" and rows["4"][1] != "(observer)", rows["4"]
    assert rows["2"][0] == "down"


def test_window_takes_the_interval_between_scrapes() -> None:
    before = node_scrape("leader", 1, active=True, latencies=(0.2,) * 10)
    after = node_scrape("leader", 1, active=True, latencies=(0.2,) * 10 + (0.0015,) * 10)
    q = window(after, before, "raftmeta_raft_commit_latency_seconds").histogram_quantile(
        "raftmeta_raft_commit_latency_seconds", 0.99
    )
    assert q is not None and q < 0.01
    restarted = window(before, after, "raftmeta_raft_commit_latency_seconds")  # counters went back: all of it
    assert restarted.histogram_quantile("raftmeta_raft_commit_latency_seconds", 0.5) is not None


def test_top_needs_one_source() -> None:
    result = CliRunner().invoke(cli, ["quorum", "top"])
    assert result.exit_code == 2
    assert "exactly one of --bootstrap-server or --data-dir" in result.output


@pytest.mark.integration
def test_top_of_a_running_quorum(quorum: local_quorum.LocalQuorum, client: SyncControllerClient) -> None:
    assert create(client, "seen-by-top").error_code == errors_pb2.NONE
    runner = CliRunner()
    # On a loaded machine a follower may be between fetches and briefly prospective: look again.
    deadline = time.monotonic() + 20
    while True:
        result = runner.invoke(cli, ["quorum", "top", "--data-dir", quorum.data_dir, "--output", "json"])
        assert result.exit_code == 0, result.output
        document = json.loads(result.output)
        roles = sorted(v["role"] for v in document["voters"])
        if roles == ["follower", "follower", "leader"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert document["leader_id"] in {n.id for n in quorum.nodes}
    assert roles == ["follower", "follower", "leader"]
    assert all(v["metrics"] == "up" for v in document["voters"])
    assert document["brokers"] == {"active": 6, "fenced": 0}
    assert document["partitions"]["topics"] == 1 and document["partitions"]["offline"] == 0
    leader = next(v for v in document["voters"] if v["role"] == "leader")
    assert leader["commit_latency_p50_ms"] is not None

    once = runner.invoke(cli, ["quorum", "top", "--data-dir", quorum.data_dir, "--once"])
    assert once.exit_code == 0, once.output
    assert "leader" in once.output and "UNDER-REPLICATED" in once.output
    # The live view, for two refreshes, given the endpoints by hand.
    endpoints = ",".join(f"{n.id}@{n.metrics_address}" for n in quorum.nodes)
    live = runner.invoke(
        cli,
        ["quorum", "top", "--bootstrap-server", quorum.bootstrap_server, "--metrics-server", endpoints,
         "--interval", "0.2", "--iterations", "2"],
    )  # fmt: skip
    assert live.exit_code == 0, live.output
    assert "FETCH AGO ms" in live.output
    assert Path(quorum.data_dir).exists()


def test_a_failed_refresh_keeps_the_last_view_with_a_note() -> None:
    document = {**top_document(describe_quorum(), None, {}), "error": "no leader answers"}
    console = Console(width=160, record=True)
    console.print(render(document))
    assert "no answer, showing the last view: no leader answers" in console.export_text()
