"""Real Apache Kafka brokers of the pinned release on a raftmeta quorum, from the launcher:
``raftmeta quorum up --kafka-brokers 3 --racks 3`` starts three voters and three brokers
(``process.roles=broker``) on the voters' Kafka listeners; data flows through the brokers while
raftmeta commits their metadata.

One quorum for the module (three JVMs): the launcher's JSON, the brokers as raftmeta sees them,
then a topic created through raftmeta's gRPC client (the striped placer) and one through Kafka's
AdminClient at the brokers (which forward its CreateTopics in an Envelope), an idempotent producer
(acks=all: its producer id block comes from AllocateProducerIds) and a consumer group (its
``__consumer_offsets`` auto-created through an Envelope): every message arrives exactly once.
Then a broker killed while a producer runs: fenced, out of the ISRs, restarted, back in them,
nothing acknowledged lost; then raftmeta's leader killed, then paused: the brokers follow the
new one. A
broker stopped gets its controlled shutdown; ``quorum down`` stops the rest with the nodes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from raftmeta.api.ids import uuid_to_str
from raftmeta.client import ClientError, RetryPolicy, SyncControllerClient
from raftmeta.kraft.cluster import KraftCluster
from raftmeta.local import quorum as local_quorum
from raftmeta.local.python_command import raftmeta_command
from raftmeta.v1 import controller_pb2
from tests.kraft.directories import committed_directories, directory_ids, refused_assignments

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(600)]
BROKERS = 3
PARTITIONS = 6
# Three JVMs and a quorum on a loaded two-core machine: the launcher's own ready timeout (180 s)
# bounds the brokers; this bounds the command around it.
UP_TIMEOUT_S = 420.0
CLIENT_TIMEOUT_S = 120.0
# raftmeta's broker session (the node's --session-timeout-ms default) and the launcher's ready
# timeout bound the waits of the broker failure; each wait ends on the state it waits for.
SESSION_TIMEOUT_S = 9.0
FAILURE_WAIT_S = 180.0
KILLED = 101
# The controller's automatic preferred-leader election (Kafka's default is 300 s): soon enough
# that a restarted broker gets its leaderships back within the test.
IMBALANCE_CHECK_S = 5


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("raftmeta-kafka-brokers")
    up = subprocess.run(
        raftmeta_command(
            "quorum", "up", "--data-dir", str(data_dir), "--nodes", "3",
            "--kafka-brokers", str(BROKERS), "--racks", "3", "--detach", "--output", "json",
            "--leader-imbalance-check-interval-seconds", str(IMBALANCE_CHECK_S),
        ),
        capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False,
    )  # fmt: skip
    try:
        assert up.returncode == 0, f"quorum up failed ({up.returncode}):\n{up.stdout}\n{up.stderr[-6000:]}"
        document: dict[str, Any] = json.loads(up.stdout)
        document["data_dir"] = str(data_dir)
        yield document
    finally:
        running = [b.pid for b in _brokers(data_dir).brokers if local_quorum.alive(b.pid)] if up.returncode == 0 else []
        down = subprocess.run(
            raftmeta_command("quorum", "down", "--data-dir", str(data_dir), "--output", "json"),
            capture_output=True, text=True, timeout=UP_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert down.returncode == 0, down.stderr[-4000:]
        assert set(running) <= set(json.loads(down.stdout)["stopped_pids"]), "quorum down stops the Kafka brokers"


def _brokers(data_dir: Path) -> KraftCluster:
    """The quorum's Kafka brokers as their launcher keeps them (current pids: one may restart)."""
    return KraftCluster.load(data_dir / local_quorum.KAFKA_BROKERS_DIR)


def test_quorum_up_lists_the_kafka_brokers_and_raftmeta_registers_them_unfenced(plane: dict[str, Any]) -> None:
    brokers = plane["kafka_brokers"]
    assert [(b["id"], b["rack"]) for b in brokers] == [(100, "rack-a"), (101, "rack-b"), (102, "rack-c")]
    assert all(local_quorum.alive(b["pid"]) for b in brokers)
    assert plane["kafka_brokers_bootstrap"] == ",".join(b["address"] for b in brokers)
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:
        registered = {b.broker_id: (b.rack, b.fenced) for b in client.describe_cluster().brokers}
    assert registered == {100: ("rack-a", False), 101: ("rack-b", False), 102: ("rack-c", False)}


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})


def _produce(bootstrap: str, topics: list[str], count: int) -> set[str]:
    """``count`` messages per topic from an idempotent producer with acks=all; the acknowledged ids."""
    acknowledged: set[str] = set()
    failures: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            acknowledged.add(message.value().decode())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for topic in topics:
        for index in range(count):
            value = f"{topic}:{index}"
            while True:
                try:
                    producer.produce(topic, key=str(index).encode(), value=value.encode(), on_delivery=delivered)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    assert remaining == 0 and not failures, f"{remaining} messages undelivered; failures: {failures[:5]}"
    return acknowledged


def _consume(bootstrap: str, topics: list[str], expected: int) -> Counter[str]:
    """Read with a consumer group from the start until ``expected`` messages arrived (each
    counted, so a duplicate shows), bounded by the client timeout."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raftmeta-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
        }
    )
    seen: Counter[str] = Counter()
    try:
        consumer.subscribe(topics)
        idle_polls = 0
        while sum(seen.values()) < expected and idle_polls < CLIENT_TIMEOUT_S:
            batch = consumer.consume(num_messages=1000, timeout=1.0)
            idle_polls = 0 if batch else idle_polls + 1
            for message in batch:
                value = message.value()
                if message.error() is not None or value is None:
                    raise KafkaException(message.error())
                seen[value.decode()] += 1
        # Nothing read leaves nothing to commit (librdkafka raises _NO_OFFSET), which would hide
        # the real failure: the caller's count names the messages that never arrived.
        assert seen, f"the consumer group read nothing from {topics} in {CLIENT_TIMEOUT_S:.0f} s without a message"
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def _create_striped(plane: dict[str, Any], name: str) -> None:
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:
        created = client.create_topics(
            controller_pb2.CreateTopicsRequest(
                topics=[
                    controller_pb2.CreatableTopic(
                        name=name, num_partitions=PARTITIONS, replication_factor=3, placer="striped"
                    )
                ]
            )
        )
        assert [t.error_code for t in created.topics] == [0], created


def _data_flows(plane: dict[str, Any], count: int, suffix: str) -> None:
    bootstrap = plane["kafka_brokers_bootstrap"]
    striped, admin_made = f"striped-{suffix}", f"admin-{suffix}"
    _create_striped(plane, striped)
    # Kafka's AdminClient at the brokers: they forward the CreateTopics to raftmeta in an Envelope.
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures fail once it is collected
    futures = admin.create_topics(
        [NewTopic(admin_made, num_partitions=PARTITIONS, replication_factor=3)], operation_timeout=30
    )
    futures[admin_made].result(timeout=CLIENT_TIMEOUT_S)
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:
        described = client.describe_topics([striped, admin_made])
    for topic in described.topics:
        assert topic.error_code == 0 and len(topic.partitions) == PARTITIONS, topic
        assert all(sorted(p.replicas) == [100, 101, 102] for p in topic.partitions), topic

    acknowledged = _produce(bootstrap, [striped, admin_made], count)
    assert len(acknowledged) == 2 * count
    seen = _consume(bootstrap, [striped, admin_made], 2 * count)
    duplicated = sorted(m for m, n in seen.items() if n > 1)
    missing = sorted(acknowledged - set(seen))
    assert not duplicated and not missing, f"duplicated {duplicated[:5]}, missing {missing[:5]} of {2 * count}"
    assert set(seen) == acknowledged


def _broker_directories(data_dir: Path) -> dict[int, str]:
    """Each broker's log directory id, in Kafka's form (the launcher gives each broker one)."""
    found = {}
    for broker in _brokers(data_dir).brokers:
        (directory,) = directory_ids(broker)
        found[broker.node_id] = directory
    return found


def test_every_replica_is_committed_in_its_brokers_log_directory(plane: dict[str, Any]) -> None:
    """KIP-858: each broker registered its log directory (one each, as the launcher gives them),
    and a new replica starts in its broker's directory, as Kafka's controller places it
    (``defaultDir``): the committed log names the broker's real directory id for every replica,
    of topics created through raftmeta's client and Kafka's AdminClient and of the brokers' own
    ``__consumer_offsets`` -- none left in Kafka's MIGRATING state."""
    _data_flows(plane, 10, "directories")
    by_broker = _broker_directories(Path(plane["data_dir"]))
    assert len(set(by_broker.values())) == BROKERS
    names = ["striped-directories", "admin-directories", "__consumer_offsets"]
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:
        described = client.describe_topics(names)
        high_watermark = client.describe_quorum().high_watermark
    committed = committed_directories(plane["nodes"][0]["data_dir"], high_watermark)
    checked = 0
    for topic in described.topics:
        assert topic.error_code == 0, topic
        for partition in topic.partitions:
            expected = [by_broker[b] for b in partition.replicas]
            assert committed.get((uuid_to_str(topic.topic_id), partition.partition)) == expected, (
                f"{topic.name}-{partition.partition}: replicas {list(partition.replicas)}"
            )
            checked += 1
    assert checked == 2 * PARTITIONS + len(next(t for t in described.topics if t.name == names[2]).partitions)


def test_messages_flow_through_real_brokers_exactly_once(plane: dict[str, Any]) -> None:
    _data_flows(plane, 2_000, "ci")


@pytest.mark.slow
def test_100000_messages_flow_through_real_brokers_exactly_once(plane: dict[str, Any]) -> None:
    _data_flows(plane, 50_000, "slow")  # two topics: 100,000 messages


def _wait_until(what: str, condition: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {timeout_s:.0f} s"
        time.sleep(0.2)


class _Steady:
    """An idempotent producer (acks=all) sending to ``topic`` until stopped, one message per
    delivery poll; the acknowledged messages and the delivery errors it saw."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acknowledged: set[str] = set()
        self.errors: list[str] = []
        self.stop = threading.Event()
        self._producer = _producer(bootstrap)
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)
        self._thread.start()

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(str(error))
        else:
            self.acknowledged.add(message.value().decode())

    def _run(self) -> None:
        index = 0
        while not self.stop.is_set():
            try:
                self._producer.produce(self.topic, value=f"{self.topic}:{index}".encode(), on_delivery=self._delivered)
                index += 1
            except BufferError:
                pass
            self._producer.poll(0.01)

    def acknowledged_count(self) -> int:
        return len(self.acknowledged)

    def finish(self) -> set[str]:
        self.stop.set()
        self._thread.join(CLIENT_TIMEOUT_S)
        assert self._producer.flush(CLIENT_TIMEOUT_S) == 0
        return self.acknowledged


def test_a_broker_killed_mid_run_is_fenced_and_rejoins_the_isrs_with_nothing_lost(plane: dict[str, Any]) -> None:
    """Produce goes on while broker 101 is killed: raftmeta fences it once its session runs out
    and takes it out of every ISR; restarted, it registers again, is unfenced, the partition
    leaders put it back into the ISRs (AlterPartition) and the controller's next automatic
    election gives the preferred replicas their leaderships back. A consumer group then reads
    every acknowledged message exactly once."""
    topic = "steady"
    _create_striped(plane, topic)
    brokers = _brokers(Path(plane["data_dir"]))
    steady = _Steady(plane["kafka_brokers_bootstrap"], topic)
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:

        def fenced(broker_id: int) -> bool:
            return any(b.fenced for b in client.describe_cluster().brokers if b.broker_id == broker_id)

        def isrs() -> list[list[int]]:
            (described,) = client.describe_topics([topic]).topics
            return [sorted(p.isr) for p in described.partitions]

        _wait_until("producing", lambda: steady.acknowledged_count() > 200, CLIENT_TIMEOUT_S)
        brokers.kill(KILLED)
        _wait_until(f"broker {KILLED} fenced", lambda: fenced(KILLED), SESSION_TIMEOUT_S + FAILURE_WAIT_S)
        assert all(KILLED not in isr for isr in isrs()), "a fenced broker leaves every ISR"
        during = steady.acknowledged_count()
        _wait_until(
            "producing without the killed broker", lambda: steady.acknowledged_count() > during + 200, CLIENT_TIMEOUT_S
        )
        brokers.start_node(KILLED)
        brokers.wait_ready([KILLED])
        assert not fenced(KILLED)
        _wait_until(
            f"broker {KILLED} back in every ISR", lambda: all(isr == [100, 101, 102] for isr in isrs()), FAILURE_WAIT_S
        )

        def preferred_leaders() -> bool:
            (described,) = client.describe_topics([topic]).topics
            return all(p.leader == p.replicas[0] for p in described.partitions)

        _wait_until("the preferred leaders back", preferred_leaders, IMBALANCE_CHECK_S + FAILURE_WAIT_S)
        after = steady.acknowledged_count()
        _wait_until("producing after the restart", lambda: steady.acknowledged_count() > after + 200, CLIENT_TIMEOUT_S)
    acknowledged = steady.finish()
    seen = _consume(plane["kafka_brokers_bootstrap"], [topic], len(acknowledged))
    duplicated = sorted(m for m, n in seen.items() if n > 1)
    missing = sorted(acknowledged - set(seen))
    assert not duplicated and not missing, f"duplicated {duplicated[:5]}, missing {missing[:5]} of {len(acknowledged)}"


@pytest.mark.parametrize("failure", ["kill", "pause"])
def test_the_active_controller_killed_or_paused_mid_run_the_brokers_follow_the_new_one_with_nothing_lost(
    plane: dict[str, Any], failure: str
) -> None:
    """Produce goes on while raftmeta's leader is killed (SIGKILL) or paused (SIGSTOP, a long GC
    pause): the brokers' raft clients find the new leader (its NOT_LEADER_OR_FOLLOWER answers name
    it) and forward to it (a topic created through the brokers afterwards exists and takes
    messages), they stay unfenced, and the old leader is restarted or resumed; every acknowledged
    message is read exactly once."""
    topic = f"failover-{failure}"
    _create_striped(plane, topic)
    data_dir = Path(plane["data_dir"])
    steady = _Steady(plane["kafka_brokers_bootstrap"], topic)
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=60)) as client:
        _wait_until("producing", lambda: steady.acknowledged_count() > 200, CLIENT_TIMEOUT_S)
        old = client.describe_quorum().leader_id
        quorum = local_quorum.LocalQuorum.load(data_dir)
        local_quorum.signal_node(quorum, old, signal.SIGKILL if failure == "kill" else signal.SIGSTOP)

        def new_leader() -> bool:
            try:
                leader = client.describe_quorum().leader_id
            except ClientError:  # no leader to answer yet: the election is under way
                return False
            return leader not in (old, -1)

        _wait_until("a new leader", new_leader, FAILURE_WAIT_S)
        during = steady.acknowledged_count()
        _wait_until(
            "producing under the new leader", lambda: steady.acknowledged_count() > during + 200, CLIENT_TIMEOUT_S
        )
        # The brokers forward to the new controller and replicate its log: a topic created through
        # them now exists, and takes messages.
        after = f"{topic}-after"
        admin = AdminClient({"bootstrap.servers": plane["kafka_brokers_bootstrap"]})
        admin.create_topics([NewTopic(after, num_partitions=PARTITIONS, replication_factor=3)])[after].result(
            timeout=CLIENT_TIMEOUT_S
        )
        acknowledged_after = _produce(plane["kafka_brokers_bootstrap"], [after], 500)
        if failure == "kill":
            local_quorum.restart(quorum, old)
        else:
            local_quorum.signal_node(quorum, old, signal.SIGCONT)
        _wait_until(
            "every broker unfenced under the new leader",
            lambda: all(not b.fenced for b in client.describe_cluster().brokers),
            FAILURE_WAIT_S,
        )
    acknowledged = steady.finish() | acknowledged_after
    seen = _consume(plane["kafka_brokers_bootstrap"], [topic, after], len(acknowledged))
    duplicated = sorted(m for m, n in seen.items() if n > 1)
    missing = sorted(acknowledged - set(seen))
    assert not duplicated and not missing, f"duplicated {duplicated[:5]}, missing {missing[:5]} of {len(acknowledged)}"


def test_the_brokers_fetch_as_observers_and_a_stopped_one_gets_its_controlled_shutdown(plane: dict[str, Any]) -> None:
    """The brokers replicate the metadata log as observers from offset 0 (the quorum took no
    snapshot: metadata.version is the controller's own FeatureLevelRecord); SIGTERM, as
    kafka-server-stop sends it, makes a broker ask for its controlled shutdown, which raftmeta
    grants: the broker is fenced and exits cleanly."""
    stopped = 102
    brokers = _brokers(Path(plane["data_dir"]))
    assert not list(Path(plane["data_dir"]).rglob("node-*/**/*.checkpoint")), "no snapshot to start from"
    with SyncControllerClient(plane["bootstrap_server"], retry=RetryPolicy(deadline_s=30)) as client:
        assert {100, 101, 102} <= {o.replica_id for o in client.describe_quorum().observers}
        brokers.stop_node(stopped)
        assert any(b.fenced for b in client.describe_cluster().brokers if b.broker_id == stopped)
    log = brokers.node(stopped).log.read_text()
    assert "The controller has asked us to exit controlled shutdown" in log
    assert "shut down completed" in log


def test_no_broker_was_refused_a_directory_assignment(plane: dict[str, Any]) -> None:
    """Over the whole module -- topics created, brokers killed and restarted, controllers killed
    and paused -- no broker's AssignmentsManager was refused an assignment (an UnsupportedVersion
    of the api, or an error per partition): raftmeta serves AssignReplicasToDirs (73) and places
    new replicas in their brokers' directories. Last in the module, so its logs are the longest."""
    failures = [line for broker in _brokers(Path(plane["data_dir"])).brokers for line in refused_assignments(broker)]
    assert not failures, "\n".join(failures[:10])
