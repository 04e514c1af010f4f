"""The node as users run it: real processes, sockets and files on loopback (DESIGN.md §6-§9)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from raftmeta.client import ClientError, ControllerClient, RetryPolicy, SyncControllerClient
from raftmeta.jobs import layout
from raftmeta.jobs.consistency import facts_to_checks, local_facts
from raftmeta.local import quorum as local_quorum
from raftmeta.records import codec
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

pytestmark = pytest.mark.integration


def create(
    client: SyncControllerClient, name: str, partitions: int = 3, rf: int = 3, **extra: object
) -> controller_pb2.CreatableTopicResult:
    topic = controller_pb2.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, **extra)  # type: ignore[arg-type]
    response = client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic]))
    return response.topics[0]


def leader_of(client: SyncControllerClient) -> int:
    return client.describe_quorum().leader_id


def wait_until(predicate, timeout_s: float = 20.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except ClientError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout_s} s")


def test_create_through_one_node_describe_through_another(quorum: local_quorum.LocalQuorum) -> None:
    first, second = quorum.nodes[0].address, quorum.nodes[1].address
    with SyncControllerClient(first) as a, SyncControllerClient(second) as b:
        result = create(a, "orders", partitions=6)
        assert result.error_code == errors_pb2.NONE, result.error_message
        described = b.describe_topics(["orders"]).topics[0]
    assert described.topic_id == result.topic_id
    assert len(described.partitions) == 6
    for p in described.partitions:
        assert len(set(p.replicas)) == 3
        assert p.leader == p.replicas[0]
        assert list(p.isr) == list(p.replicas)
    status = SyncControllerClient(quorum.bootstrap_server).describe_quorum()
    assert status.leader_id in (1, 2, 3)
    assert {v.replica_id for v in status.voters} == {1, 2, 3}


def test_every_validation_rule_is_answered_and_writes_nothing(client: SyncControllerClient) -> None:
    create(client, "existing")
    before = client.describe_quorum().high_watermark
    cases = [
        (
            controller_pb2.CreatableTopic(name="existing", num_partitions=1, replication_factor=1),
            errors_pb2.TOPIC_ALREADY_EXISTS,
        ),
        (
            controller_pb2.CreatableTopic(name="bad/name", num_partitions=1, replication_factor=1),
            errors_pb2.INVALID_TOPIC_EXCEPTION,
        ),
        (
            controller_pb2.CreatableTopic(name="..", num_partitions=1, replication_factor=1),
            errors_pb2.INVALID_TOPIC_EXCEPTION,
        ),
        (
            controller_pb2.CreatableTopic(name="zero", num_partitions=0, replication_factor=1),
            errors_pb2.INVALID_PARTITIONS,
        ),
        (
            controller_pb2.CreatableTopic(name="rf", num_partitions=1, replication_factor=7),
            errors_pb2.INVALID_REPLICATION_FACTOR,
        ),
        (
            controller_pb2.CreatableTopic(
                name="dup", assignments=[controller_pb2.ReplicaAssignment(partition_index=0, broker_ids=[1, 1])]
            ),
            errors_pb2.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            controller_pb2.CreatableTopic(
                name="cfg", num_partitions=1, replication_factor=1, configs={"cleanup.policy": "nope"}
            ),
            errors_pb2.INVALID_CONFIG,
        ),
    ]
    response = client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic for topic, _ in cases]))
    got = {r.name: r.error_code for r in response.topics}
    for topic, code in cases:
        assert got[topic.name] == code, (topic.name, errors_pb2.ErrorCode.Name(got[topic.name]))
    time.sleep(0.5)
    # A RequestRecord for idempotent retries is the only thing a wholly rejected request may write.
    after = client.describe_quorum().high_watermark
    assert after - before <= 1


def test_leader_killed_during_creates_then_restarted_catches_up(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    created: list[bytes] = []
    for i in range(5):
        created.append(create(client, f"before-{i}").topic_id)
    old_leader = leader_of(client)
    local_quorum.signal_node(quorum, old_leader, signal.SIGKILL)
    for i in range(10):
        result = create(client, f"after-{i}")
        assert result.error_code == errors_pb2.NONE, result.error_message
        created.append(result.topic_id)
    new_leader = leader_of(client)
    assert new_leader != old_leader
    local_quorum.restart(quorum, old_leader)
    target = client.describe_quorum().high_watermark

    def caught_up() -> bool:
        status = client.describe_quorum()
        return any(v.replica_id == old_leader and v.log_end_offset >= target for v in status.voters)

    wait_until(caught_up, what=f"node {old_leader} catching up to {target}")
    ids = {t.topic_id for t in client.describe_topics().topics}
    assert set(created) <= ids, "every acknowledged create survived the failover"
    local_quorum.down(quorum)
    verdict = facts_to_checks(local_facts(quorum.data_dir))
    assert all(c.passed for c in verdict), verdict


def test_paused_leader_is_replaced_and_steps_down_when_resumed(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    create(client, "t0")
    old_leader = leader_of(client)
    local_quorum.signal_node(quorum, old_leader, signal.SIGSTOP)
    try:
        others = ",".join(n.address for n in quorum.nodes if n.id != old_leader)
        with SyncControllerClient(others, retry=RetryPolicy(deadline_s=20)) as survivors:
            assert create(survivors, "t1").error_code == errors_pb2.NONE
            new_leader = survivors.describe_quorum().leader_id
            assert new_leader != old_leader
    finally:
        local_quorum.signal_node(quorum, old_leader, signal.SIGCONT)
    resumed = quorum.node(old_leader).address
    with SyncControllerClient(resumed, retry=RetryPolicy(deadline_s=20)) as via_old:
        wait_until(
            lambda: via_old.describe_quorum().leader_id == new_leader, what="the old leader following the new one"
        )
        assert create(via_old, "t2").error_code == errors_pb2.NONE


def test_a_call_forwarded_to_a_leader_that_hangs_follows_the_new_leader(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    """One attempt through one follower, no client retries: the follower forwards to the leader,
    the leader hangs, and the follower sends the call to the next leader once it learns that the
    old one lost its leadership -- not after the call's deadline (the client's watch would
    otherwise have to find this out and retry elsewhere)."""
    from raftmeta.v1 import controller_pb2_grpc

    create(client, "t0")
    old_leader = leader_of(client)
    follower = next(n for n in quorum.nodes if n.id != old_leader)
    topic = controller_pb2.CreatableTopic(name="t1", num_partitions=1, replication_factor=3)
    request = controller_pb2.CreateTopicsRequest(topics=[topic], request_id="forwarded-through-a-failover")
    local_quorum.signal_node(quorum, old_leader, signal.SIGSTOP)
    try:
        with grpc.insecure_channel(follower.address) as channel:
            stub = controller_pb2_grpc.ControllerServiceStub(channel)
            response = stub.CreateTopics(request, timeout=60)
            assert response.topics[0].error_code == errors_pb2.NONE, response.topics[0].error_message
            # Asked while the old leader is still paused (once resumed, it may answer for a moment
            # as the leader it no longer is).
            assert stub.DescribeQuorum(controller_pb2.DescribeQuorumRequest(), timeout=30).leader_id != old_leader
    finally:
        local_quorum.signal_node(quorum, old_leader, signal.SIGCONT)


def test_fenced_broker_moves_leadership(quorum: local_quorum.LocalQuorum, client: SyncControllerClient) -> None:
    create(client, "moves", partitions=6)
    before = {p.partition: p for p in client.describe_topics(["moves"]).topics[0].partitions}
    victim = before[0].leader
    from raftmeta.cli.brokers import _fleet_call

    _fleet_call(quorum.bootstrap_server, 10.0, "FailBrokers", (victim,))

    def moved() -> bool:
        parts = client.describe_topics(["moves"]).topics[0].partitions
        return all(p.leader != victim and victim not in p.isr for p in parts)

    wait_until(moved, what=f"leadership leaving fenced broker {victim}")
    after = {p.partition: p for p in client.describe_topics(["moves"]).topics[0].partitions}
    for pid, p in before.items():
        if p.leader == victim:
            assert after[pid].leader == next(b for b in p.replicas if b != victim), (
                "the next ISR member in replica order"
            )
            assert after[pid].leader_epoch == p.leader_epoch + 1


def test_oversized_request_is_refused(quorum: local_quorum.LocalQuorum, client: SyncControllerClient) -> None:
    from raftmeta.api.limits import GRPC_MESSAGE_BYTES_MAX
    from raftmeta.v1 import controller_pb2_grpc

    topic = controller_pb2.CreatableTopic(
        name="big", num_partitions=1, replication_factor=1, configs={"x": "y" * (17 << 20)}
    )
    request = controller_pb2.CreateTopicsRequest(topics=[topic])
    # Our client refuses to send it, at once and without retrying.
    with pytest.raises(ClientError) as info:
        client.create_topics(request)
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in str(info.value)
    # A client without that limit reaches the server, which refuses it and writes nothing.
    before = client.describe_quorum().high_watermark
    options = [("grpc.max_send_message_length", 4 * GRPC_MESSAGE_BYTES_MAX)]
    with (
        grpc.insecure_channel(quorum.nodes[0].address, options=options) as channel,
        pytest.raises(grpc.RpcError) as raw,
    ):
        controller_pb2_grpc.ControllerServiceStub(channel).CreateTopics(request, timeout=10)
    assert raw.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert client.describe_quorum().high_watermark == before


def test_node_refuses_another_clusters_data_dir(quorum: local_quorum.LocalQuorum, tmp_path: Path) -> None:
    node = quorum.nodes[0]
    local_quorum.signal_node(quorum, node.id, signal.SIGKILL)
    result = subprocess.run(
        [sys.executable, "-m", "raftmeta", "node", "--node-id", str(node.id), "--listen", "127.0.0.1:0",
         "--voters", f"{node.id}@127.0.0.1:1", "--data-dir", node.data_dir, "--cluster-id", "another-cluster"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "belongs to cluster" in result.stderr
    assert "another-cluster" in result.stderr


def committed_batches(data_dir: str, node_id: int) -> list[list[records_pb2.MetadataRecord]]:
    """The records of every batch in a stopped node's log, batch by batch."""
    (node,) = [n for n in layout.discover(data_dir) if n.node_id == node_id]
    batches: list[list[records_pb2.MetadataRecord]] = []
    for segment in node.segments:
        for batch in codec.iter_batches(layout.read_bytes(segment.uri)):
            batches.append([records_pb2.MetadataRecord.FromString(r) for r in batch.records()])
    return batches


def test_concurrent_creates_each_get_their_own_answer(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    """A burst of creates at once. The leader combines queued requests into shared log batches (one
    append, one fsync, one Fetch round); each request still gets its own answer: the duplicates of a
    name in the burst -- exactly one wins --, an invalid request, which fails alone, and a request id
    sent twice in the burst and again after it, which is answered the same each time and writes once."""
    leader = quorum.node(leader_of(client)).address

    def request(name: str, request_id: str, rf: int = 3) -> controller_pb2.CreateTopicsRequest:
        topic = controller_pb2.CreatableTopic(name=name, num_partitions=2, replication_factor=rf)
        return controller_pb2.CreateTopicsRequest(topics=[topic], request_id=request_id)

    burst = [request(f"burst-{i}", f"id-{i}") for i in range(30)]
    burst += [request("dup", f"dup-{i}") for i in range(3)]
    burst += [request("bad/name", "bad-name"), request("too-wide", "too-wide", rf=7)]
    burst += [request("retried", "same-id"), request("retried", "same-id")]

    async def send_all() -> list[controller_pb2.CreateTopicsResponse]:
        async with ControllerClient(leader, retry=RetryPolicy(deadline_s=20)) as burst_client:
            return list(await asyncio.gather(*(burst_client.create_topics(r) for r in burst)))

    answers = {r.request_id: a.topics[0] for r, a in zip(burst, asyncio.run(send_all()), strict=True)}
    assert len(answers) == len(burst) - 1  # "same-id" twice
    for i in range(30):
        assert answers[f"id-{i}"].error_code == errors_pb2.NONE, answers[f"id-{i}"].error_message
    dup_codes = sorted(answers[f"dup-{i}"].error_code for i in range(3))
    assert dup_codes == [errors_pb2.NONE, errors_pb2.TOPIC_ALREADY_EXISTS, errors_pb2.TOPIC_ALREADY_EXISTS]
    assert answers["bad-name"].error_code == errors_pb2.INVALID_TOPIC_EXCEPTION
    assert answers["too-wide"].error_code == errors_pb2.INVALID_REPLICATION_FACTOR
    assert answers["same-id"].error_code == errors_pb2.NONE
    # Retried after the burst (a new batch), the ids are answered from the request table.
    again = client.create_topics(request("burst-7", "id-7"))
    assert again.topics[0].topic_id == answers["id-7"].topic_id
    assert client.create_topics(request("retried", "same-id")).topics[0].topic_id == answers["same-id"].topic_id
    described = {t.name: t for t in client.describe_topics().topics}
    assert {f"burst-{i}" for i in range(30)} | {"dup", "retried"} <= set(described)
    assert "bad/name" not in described and "too-wide" not in described

    leader_id = leader_of(client)
    local_quorum.down(quorum)
    names: list[str] = []
    for batch in committed_batches(quorum.data_dir, leader_id):
        # Each request's records end with its RequestRecord, whose answer names its topics.
        pending: list[str] = []
        for record in batch:
            kind = record.WhichOneof("record")
            if kind == "topic":
                pending.append(record.topic.name)
            elif kind == "request":
                answer = controller_pb2.CreateTopicsResponse.FromString(record.request.response)
                assert sorted(pending) == sorted(t.name for t in answer.topics if t.error_code == errors_pb2.NONE)
                names.extend(pending)
                pending = []
        assert pending == [], "records after the last RequestRecord of a batch belong to no request"
    assert sorted(names) == sorted(set(names)), "every topic was written once"
    assert {f"burst-{i}" for i in range(30)} | {"dup", "retried"} <= set(names)
    verdict = facts_to_checks(local_facts(quorum.data_dir))
    assert all(c.passed for c in verdict), verdict


def test_batches_carry_the_leaders_wall_clock_time(
    quorum: local_quorum.LocalQuorum, client: SyncControllerClient
) -> None:
    """docs/log-format.md: append_timestamp is ms since the Unix epoch (log dump shows a date), not
    the monotonic clock the node's timers run on."""
    before_ms = int(time.time() * 1000) - 60_000  # the quorum started a few seconds ago
    assert create(client, "dated").error_code == errors_pb2.NONE
    after_ms = int(time.time() * 1000)
    local_quorum.down(quorum)
    stamps = [
        batch.header.append_timestamp_ms
        for segment in sorted((Path(quorum.nodes[0].data_dir) / "__cluster_metadata-0").glob("*.log"))
        for batch in codec.iter_batches(segment.read_bytes())
    ]
    assert stamps and all(before_ms <= stamp <= after_ms for stamp in stamps), stamps
