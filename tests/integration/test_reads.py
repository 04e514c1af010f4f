"""Reads as users make them: linearizable by default from any node, stale on request from the node
called even when no leader can answer (docs/controller.md, "Reads")."""

from __future__ import annotations

import signal

import pytest

from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import controller_pb2, errors_pb2

from .test_node import create, leader_of

pytestmark = pytest.mark.integration


def names(response: controller_pb2.DescribeTopicsResponse) -> set[str]:
    return {t.name for t in response.topics}


def test_a_follower_reads_the_leaders_writes_and_answers_stale_reads_alone(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    assert create(client, "before").error_code == errors_pb2.NONE
    leader = leader_of(client)
    follower = next(n for n in quorum.nodes if n.id != leader)
    with SyncControllerClient(follower.address, retry=RetryPolicy(deadline_s=20)) as via_follower:
        assert "before" in names(via_follower.describe_topics()), "a linearizable read through a follower"
        others = [n.id for n in quorum.nodes if n.id != follower.id]
        for node in others:
            local_quorum.signal_node(quorum, node, signal.SIGSTOP)
        try:
            # No leader can be elected (one voter of three): only a stale read can be answered.
            stale = via_follower.describe_topics(stale=True)
            assert "before" in names(stale)
            assert via_follower.describe_cluster(stale=True).brokers, "brokers from the follower's image"
        finally:
            for node in others:
                local_quorum.signal_node(quorum, node, signal.SIGCONT)
        assert create(client, "after").error_code == errors_pb2.NONE
        assert {"before", "after"} <= names(via_follower.describe_topics())
        # Paged: pages of two partitions through the follower, joined back into the same answer.
        whole = client.describe_topics()
        assert via_follower.describe_topics(partition_limit=2) == whole
        assert via_follower.describe_topics(["after", "before"], stale=True, partition_limit=2) == whole
