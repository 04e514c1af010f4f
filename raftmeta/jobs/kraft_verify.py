"""``raftmeta verify`` of a real KRaft quorum's metadata logs, in Kafka's format and unchanged.

Every ``__cluster_metadata-0`` directory under the data dir is one node's log (its node id from
``meta.properties`` beside it; the controllers are the voters its ``VotersRecord`` names). The
checks are DESIGN.md §9's, with the rules the Spark job uses where there is one:

- ``batch-integrity``: every batch passes CRC32C and its records decode (a last segment ending
  inside a batch is a torn tail: reported, not failed);
- ``offsets-contiguous``: each node's batches follow each other without gap or overlap, across
  segment files too, and its log starts at 0 or at one of its snapshots;
- ``epochs-non-decreasing``: the partition leader epoch along every node's log;
- ``logs-agree``: at every offset two nodes both hold, they hold the same batch, byte for byte
  (followers and observers store the leader's batches as they are: compared by a hash of the
  whole batch, leader epoch included, which its CRC leaves out); a node whose log covers an
  offset where the others have a batch but holds none there has lost it;
- ``partition-states-valid``: every partition state along the longest log, replayed as Kafka
  replays it (a PartitionChangeRecord raises the partition epoch by one, and the leader epoch by
  one when it names a leader), passes :func:`raftmeta.jobs.partition_rules.broken_rules`
  (invariant 7) -- but for an empty ISR while the partition's eligible leader replicas are not
  empty: Kafka's ELR (KIP-966, on in the pinned release) empties the ISR when its last member
  shuts down and keeps in the ELR the replicas that may lead again;
- ``snapshots-match-log``: each node's newest ``.checkpoint`` holds the partitions that log gives
  at its end offset, their epochs included (a check of the replay's epochs against Kafka's).

This runs in the driver without Spark: a KRaft quorum's log is small (Kafka snapshots and
deletes its segments), and the batch-for-batch comparison reads every node's bytes anyway.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftmeta.api.health import DEFAULT_MIN_INSYNC_REPLICAS, classify
from raftmeta.jobs.checks import Check, listed
from raftmeta.jobs.health import FIGURES, FLAGS, plain_config_int
from raftmeta.jobs.partition_rules import (
    ISR_EMPTY,
    PartitionState,
    advance,
    broken_rules,
    entries,
    rack_spread_short,
    rack_view,
)
from raftmeta.jobs.state import HEALTH, Brokers, balance_of, isr_sizes_of
from raftmeta.jobs.unhealthy import Unhealthy, health_verdict, needs_listing, ranked, reasons_of
from raftmeta.records.kafka.frames import ControlRecord, LogRecord, MetadataRecord
from raftmeta.records.kafka.message import Struct
from raftmeta.records.kafka.schemas import KRAFT_VOTERS, LEADER_CHANGE
from raftmeta.records.log_format import LogFormat, UnknownLogFormatError
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.errors import StorageError
from raftmeta.storage.kafka_inspect import KafkaBatchEntry, KafkaDamage, file_format, walk_kafka_file
from raftmeta.storage.meta_properties import read_meta_properties
from raftmeta.storage.segment import parse_log_file_name
from raftmeta.storage.snapshot import parse_snapshot_name

SEARCH_DEPTH = 4  # a cluster dir / node dir / log.dirs dir / __cluster_metadata-0
NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader's default: the leader did not change
FENCING = {"FenceBrokerRecord": True, "UnfenceBrokerRecord": False, "BrokerRegistrationChangeRecord": None}
MIN_INSYNC_REPLICAS = "min.insync.replicas"
TOPIC_RESOURCE = 2  # ConfigRecord.ResourceType, as Kafka's ConfigResource.Type numbers them
BROKER_RESOURCE = 4


@dataclass
class NodeLog:
    """One node's metadata log, walked: its batches in offset order and the damage found."""

    node_id: int | None
    log_dir: Path
    batches: list[KafkaBatchEntry] = field(default_factory=list)
    damage: list[KafkaDamage] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)  # between segment files, or at the log start
    torn_tail: KafkaDamage | None = None
    name: str = ""

    @property
    def first_offset(self) -> int:
        return self.batches[0].found.batch.base_offset if self.batches else -1

    @property
    def next_offset(self) -> int:
        return self.batches[-1].next_offset if self.batches else -1


@dataclass(frozen=True, slots=True)
class KraftVerifyResult:
    checks: list[Check]
    figures: dict[str, Any]
    # The health verdict of the cluster at the end of the log and its unhealthy partitions named
    # (raftmeta.jobs.unhealthy), beside the checks' verdict, as raftmeta's own verify gives it.
    health: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_json(self, data_dir: str) -> dict[str, Any]:
        return {
            "data_dir": data_dir,
            "format": LogFormat.KAFKA.value,
            "passed": self.passed,
            "checks": [c.to_json() for c in self.checks],
            "figures": self.figures,
            "health": self.health,
        }


def _log_dirs(root: Path, depth: int = SEARCH_DEPTH) -> Iterator[Path]:
    if root.name == LOG_DIR_NAME:
        yield root
        return
    if depth == 0:
        return
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.is_symlink():
            yield from _log_dirs(child, depth - 1)


def find_kraft_logs(data_dir: Path) -> list[Path]:
    """The metadata log directories under ``data_dir`` whose files are in Kafka's format (empty
    when there is none: the data dir is raftmeta's, or no quorum's). A raftmeta quorum's real
    Kafka brokers (``quorum up --kafka-brokers``: DIR/kafka-brokers) keep observers' copies of
    its log, in Kafka's format: they are not the quorum's logs and are left out."""
    from raftmeta.local.quorum import KAFKA_BROKERS_DIR, QUORUM_FILE  # names only: no process is started

    if not data_dir.is_dir():
        return []
    observers = data_dir / KAFKA_BROKERS_DIR if (data_dir / QUORUM_FILE).is_file() else None
    return [
        log_dir
        for log_dir in _log_dirs(data_dir)
        if (observers is None or not log_dir.is_relative_to(observers)) and _holds_kafka_format(log_dir)
    ]


def _holds_kafka_format(log_dir: Path) -> bool:
    """Whether any segment or snapshot of ``log_dir`` is in Kafka's format (a damaged file in
    neither does not decide: the walk reports its damage)."""
    for path in sorted(log_dir.glob("*.log")) + sorted(log_dir.glob("*.checkpoint")):
        try:
            if file_format(path) is LogFormat.KAFKA:
                return True
        except UnknownLogFormatError:
            continue
    return False


def _node_id(log_dir: Path) -> int | None:
    try:
        meta = read_meta_properties(log_dir.parent)
    except StorageError:
        return None
    return None if meta is None else meta.node_id


def read_node_log(log_dir: Path) -> NodeLog:
    """One node's segments walked in offset order, each from the offset its file name says."""
    node = NodeLog(_node_id(log_dir), log_dir)
    segments = sorted((base, p) for p in log_dir.glob("*.log") if (base := parse_log_file_name(p.name)) is not None)
    snapshot_offsets = {sid.offset for p in log_dir.glob("*.checkpoint") if (sid := parse_snapshot_name(p.name))}
    if segments and segments[0][0] != 0 and segments[0][0] not in snapshot_offsets:
        node.gaps.append(
            f"the log starts at offset {segments[0][0]} ({segments[0][1].name}) and no snapshot ends there"
        )
    previous_end = -1
    for index, (base, path) in enumerate(segments):
        if previous_end >= 0 and base != previous_end:
            node.gaps.append(f"{path.name} starts at offset {base}, the segment before it ends at {previous_end}")
        for entry in walk_kafka_file(path, first_offset=base):
            if isinstance(entry, KafkaDamage) and entry.damage.truncated and index == len(segments) - 1:
                node.torn_tail = entry  # the last segment ends inside a batch: a write in progress
            elif isinstance(entry, KafkaDamage):
                node.damage.append(entry)
            else:
                node.batches.append(entry)
        previous_end = node.next_offset
    return node


def controller_ids(nodes: Sequence[NodeLog]) -> set[int]:
    """The voter ids of the newest VotersRecord in any node's log (KIP-853's dynamic quorum);
    of the newest LeaderChange's voters when the log holds none (a static quorum, kraft.version 0)."""
    newest: dict[int, tuple[int, set[int]]] = {KRAFT_VOTERS: (-1, set()), LEADER_CHANGE: (-1, set())}
    for node in nodes:
        for entry in node.batches:
            for offset, record in entry.found.records or ():
                if not isinstance(record, ControlRecord) or record.type not in newest:
                    continue
                if isinstance(record.data, Struct) and offset > newest[record.type][0]:
                    voters = record.data["Voters"]
                    assert isinstance(voters, tuple)
                    newest[record.type] = (offset, {int(v["VoterId"]) for v in voters})
    return newest[KRAFT_VOTERS][1] or newest[LEADER_CHANGE][1]


def _name(node: NodeLog, voters: set[int]) -> str:
    if node.node_id is None:
        return str(node.log_dir)
    return f"{'controller' if node.node_id in voters else 'broker'} {node.node_id}"


def _batch_integrity(nodes: Sequence[NodeLog]) -> Check:
    problems = [
        f"{n.name}: {d.path.name} at byte {d.damage.position} (offset {d.damage.offset}): {d.damage.reason}"
        for n in nodes
        for d in n.damage
        if d.damage.kind != "offset"
    ]
    total = sum(len(n.batches) for n in nodes)
    # A last segment that ends inside a batch is what a live node's write in progress looks like,
    # and what Kafka's recovery truncates after a crash (that node never acknowledged the batch):
    # reported, not failed, as raftmeta log dump reports it.
    torn = [
        f"{n.name}: {n.torn_tail.path.name} ends inside the batch at byte {n.torn_tail.damage.position} (torn tail)"
        for n in nodes
        if n.torn_tail is not None
    ]
    detail = listed(problems + torn) if problems else "; ".join([f"{total} batches intact", *torn])
    return Check("batch-integrity", not problems, detail)


def _offsets_contiguous(nodes: Sequence[NodeLog]) -> Check:
    problems = [f"{n.name}: {gap}" for n in nodes for gap in n.gaps]
    problems += [
        f"{n.name}: {d.path.name} at byte {d.damage.position}: {d.damage.reason}"
        for n in nodes
        for d in n.damage
        if d.damage.kind == "offset"
    ]
    ranges = ", ".join(f"{n.name} {n.first_offset}..{n.next_offset - 1}" for n in nodes)
    return Check("offsets-contiguous", not problems, listed(problems) if problems else ranges)


def _epochs_non_decreasing(nodes: Sequence[NodeLog]) -> Check:
    problems = []
    for n in nodes:
        previous = -1
        for entry in n.batches:
            epoch = entry.found.batch.partition_leader_epoch
            if epoch < previous:
                problems.append(
                    f"{n.name}: offset {entry.found.batch.base_offset} has epoch {epoch} after epoch {previous}"
                )
            previous = max(previous, epoch)
    return Check("epochs-non-decreasing", not problems, listed(problems) if problems else "every node")


def _logs_agree(nodes: Sequence[NodeLog]) -> Check:
    held: dict[int, dict[str, bytes]] = defaultdict(dict)  # base offset -> node name -> digest
    for n in nodes:
        files: dict[Path, bytes] = {}
        for entry in n.batches:
            found = entry.found
            data = files.get(entry.path)
            if data is None:
                data = files[entry.path] = entry.path.read_bytes()
            # The whole batch's bytes: its CRC leaves out the leader epoch, the one field in which
            # a deposed leader's batch at the same offset may differ.
            batch = data[found.position : found.position + found.size]
            held[found.batch.base_offset][n.name] = hashlib.blake2b(batch, digest_size=16).digest()
    problems = []
    compared = 0
    for offset in sorted(held):
        holders = held[offset]
        missing = [n.name for n in nodes if n.name not in holders and n.first_offset <= offset < n.next_offset]
        if missing:
            problems.append(f"offset {offset}: {', '.join(missing)} hold no batch there, {', '.join(holders)} do")
        if len(holders) < 2:
            continue
        compared += 1
        groups: dict[bytes, list[str]] = defaultdict(list)
        for name, digest in holders.items():
            groups[digest].append(name)
        if len(groups) > 1:
            ranked = sorted(groups.values(), key=len, reverse=True)
            odd = [name for group in ranked[1:] for name in group]
            problems.append(f"offset {offset}: {', '.join(odd)} hold another batch than {', '.join(ranked[0])}")
    detail = listed(problems) if problems else f"{compared} batches held by two or more nodes, all identical"
    return Check("logs-agree", not problems, detail)


def _record_row(record: MetadataRecord, previous: PartitionState | None) -> dict[str, Any] | None:
    """A PartitionRecord or PartitionChangeRecord as the rules' ``advance`` takes it: the fields
    it sets (None: carried over) and the epochs Kafka's replay gives the partition after it."""
    data = record.data
    if not isinstance(data, Struct):
        return None
    row: dict[str, Any] = {"topic_id": str(data["TopicId"]), "partition_id": data["PartitionId"]}
    if record.name == "PartitionRecord":
        row.update(
            replicas=list(data["Replicas"]),  # type: ignore[call-overload]
            isr=list(data["Isr"]),  # type: ignore[call-overload]
            adding_replicas=list(data["AddingReplicas"]),  # type: ignore[call-overload]
            leader=data["Leader"],
            leader_epoch=data["LeaderEpoch"],
            partition_epoch=data["PartitionEpoch"],
        )
        return row
    if previous is None:
        return None  # a change of a partition the log does not hold: the caller reports it
    for name, key in (("Replicas", "replicas"), ("Isr", "isr"), ("AddingReplicas", "adding_replicas")):
        value = data[name]
        row[key] = None if value is None else list(value)  # type: ignore[call-overload]
    leader = data["Leader"]
    new_leader = leader != NO_LEADER_CHANGE
    row["leader"] = leader if new_leader else None
    row["leader_epoch"] = None if previous.leader_epoch is None else previous.leader_epoch + int(new_leader)
    row["partition_epoch"] = None if previous.partition_epoch is None else previous.partition_epoch + 1
    return row


class KafkaReplay:
    """Kafka's metadata records applied in offset order: each partition's state after each of
    its records (checked with the rules as it is made), the topics' names, the brokers."""

    def __init__(self) -> None:
        self.brokers = Brokers(registered_at={}, pool_of={}, live={})
        self.names: dict[str, str] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.elr: dict[tuple[str, int], tuple[int, ...]] = {}  # eligible leader replicas, carried forward
        self.topic_min_isr: dict[str, int] = {}
        self.default_min_isr = DEFAULT_MIN_INSYNC_REPLICAS
        self.replayed = 0

    def apply(self, offset: int, record: LogRecord) -> list[str]:
        """Apply one record; the rules its partition state breaks, each naming the partition."""
        if not isinstance(record, MetadataRecord) or not isinstance(record.data, Struct):
            return []
        data = record.data
        if record.name == "RegisterBrokerRecord":
            broker = int(data["BrokerId"])  # type: ignore[call-overload]
            self.brokers.registered_at.setdefault(broker, offset)
            self.brokers.live[broker] = (data["Rack"], None, bool(data["Fenced"]))  # type: ignore[assignment]
        elif record.name == "UnregisterBrokerRecord":
            self.brokers.live.pop(int(data["BrokerId"]), None)  # type: ignore[call-overload]
        elif record.name in FENCING:
            self._fence(data, record.name)
        elif record.name == "ConfigRecord" and data["Name"] == MIN_INSYNC_REPLICAS:
            self._min_isr(data)
        elif record.name == "TopicRecord":
            self.names[str(data["TopicId"])] = str(data["Name"])
            # A config counts from its topic's newest TopicRecord on (health.topic_min_isr's rule;
            # Kafka drops a topic's configs with the topic, and writes a new one's after its record).
            self.topic_min_isr.pop(str(data["Name"]), None)
        elif record.name == "RemoveTopicRecord":
            removed = str(data["TopicId"])
            self.states = {key: state for key, state in self.states.items() if key[0] != removed}
            self.elr = {key: replicas for key, replicas in self.elr.items() if key[0] != removed}
        elif record.name in ("PartitionRecord", "PartitionChangeRecord"):
            return self._partition(offset, record, data)
        return []

    def _fence(self, data: Struct, kind: str) -> None:
        """A broker fenced or unfenced: FenceBrokerRecord, UnfenceBrokerRecord, or a
        BrokerRegistrationChangeRecord whose Fenced is 1 (fenced) or -1 (unfenced; 0: no change)."""
        if kind == "BrokerRegistrationChangeRecord":
            broker, fenced = data["BrokerId"], {1: True, -1: False}.get(data["Fenced"])  # type: ignore[call-overload]
        else:
            broker, fenced = data["Id"], FENCING[kind]
        known = self.brokers.live.get(broker)  # type: ignore[call-overload]
        if known is not None and fenced is not None:
            self.brokers.live[broker] = (known[0], known[1], fenced)  # type: ignore[index]

    def _min_isr(self, data: Struct) -> None:
        """min.insync.replicas of a topic (resource type 2) or the cluster's default (type 4, no
        name): the newest record's value; a deleted one -- or one no plain integer, which Kafka's
        ConfigDef never lets through (:func:`raftmeta.jobs.health.plain_config_int`) -- means the
        next level's: the cluster's default for a topic, Kafka's default for the cluster."""
        value = plain_config_int(None if data["Value"] is None else str(data["Value"]))
        if data["ResourceType"] == TOPIC_RESOURCE:
            if value is None:
                self.topic_min_isr.pop(str(data["ResourceName"]), None)
            else:
                self.topic_min_isr[str(data["ResourceName"])] = value
        elif data["ResourceType"] == BROKER_RESOURCE and data["ResourceName"] == "":
            self.default_min_isr = DEFAULT_MIN_INSYNC_REPLICAS if value is None else value

    def min_isr_of(self, topic_name: str | None) -> int:
        """The ``min.insync.replicas`` a topic of this name has at this point of the log."""
        if topic_name is None:
            return self.default_min_isr
        return self.topic_min_isr.get(topic_name, self.default_min_isr)

    def balance(self) -> dict[str, Any]:
        """Placement balance of the live partitions at the end: the entries of
        :func:`raftmeta.jobs.partition_rules.entries`, summed as the Spark job sums them, turned
        into figures by :func:`balance_figures`."""
        counts: dict[tuple[int, int, int], int] = defaultdict(int)
        min_isr = {name: self.min_isr_of(name) for name in self.names.values()}
        racks = rack_view(self.brokers)
        unfenced = self.brokers.unfenced()
        for (topic, _), state in self.states.items():
            for entry in entries(state, self.names.get(topic), self.brokers, min_isr, unfenced, racks):
                counts[entry] += 1
        return balance_figures(counts, self.brokers)

    def unhealthy(self) -> Unhealthy:
        """The live partitions at the end that are offline, led by a broker that is not live,
        under min ISR, under-replicated or short of rack spread, named and ranked as
        :func:`raftmeta.jobs.unhealthy.unhealthy_partitions` ranks them in Spark."""
        live = self.brokers.unfenced()
        racks = rack_view(self.brokers)
        found = []
        for (topic, partition), state in self.states.items():
            name = self.names.get(topic)
            replicas, isr = state.replicas or [], state.isr or []
            leader = -1 if state.leader is None else state.leader
            minimum = self.min_isr_of(name)
            health = classify(replicas, isr, leader, live, minimum, state.adding_replicas or ())
            why = reasons_of(
                {
                    "offline": health.offline,
                    "leader_not_live": health.unavailable and not health.offline,
                    "under_min_isr": health.under_min_isr,
                    "under_replicated": health.under_replicated,
                    "rack_spread_short": rack_spread_short(replicas, racks),
                }
            )
            if why:
                found.append(
                    {
                        "topic": name, "partition": partition, "leader": leader, "replicas": list(replicas),
                        "isr": list(isr), "min_isr": minimum, "why": why,
                    }
                )  # fmt: skip
        return ranked(found)

    def where(self, key: tuple[str, int]) -> str:
        return f"{self.names.get(key[0], key[0])}-{key[1]}"

    def _partition(self, offset: int, record: MetadataRecord, data: Struct) -> list[str]:
        key = (str(data["TopicId"]), int(data["PartitionId"]))  # type: ignore[call-overload]
        previous = self.states.get(key)
        row = _record_row(record, previous)
        where = f"{self.where(key)} at offset {offset}"
        if row is None:
            return [f"{where}: a PartitionChangeRecord of a partition the log never created"]
        state = advance(previous if record.name == "PartitionChangeRecord" else None, row)
        # Not in versions before 1: absent as Kafka's default, null.
        elr = data.values.get("EligibleLeaderReplicas")
        if elr is not None or record.name == "PartitionRecord":
            self.elr[key] = tuple(elr or ())  # type: ignore[arg-type]
        rules = broken_rules(state, previous, offset, None, self.brokers)
        self.states[key] = state
        self.replayed += 1
        return [f"{where}: {rule}" for rule in rules if not (rule == ISR_EMPTY and self.elr.get(key))]


def balance_figures(counts: Mapping[tuple[int, int, int], int], brokers: Brokers) -> dict[str, Any]:
    """The balance figures of a KRaft log from the state job's counts (:func:`raftmeta.jobs.state._counts`
    in Spark, :meth:`KafkaReplay.balance` in the driver): replicas, preferred and current leaders per
    broker and their skews by placement's own ``Spread`` over every registered broker (and every
    broker a partition names), leaderless partitions, rack spread violations, ISR sizes,
    fenced brokers, and the health flags' counts (:data:`raftmeta.jobs.health.FIGURES`)."""
    from placement.metrics import Spread

    balance = balance_of(dict(counts))
    isr_sizes = isr_sizes_of(dict(counts))

    def per_broker(found: dict[int, int]) -> dict[int, int]:
        return {b: found.get(b, 0) for b in sorted(set(brokers.live) | set(found))}

    replicas, preferred, leaders = (
        per_broker(balance.replicas),
        per_broker(balance.preferred_leaders),
        per_broker(balance.leaders),
    )
    return {
        "replica_skew": round(Spread.of(replicas).skew, 6) if replicas else 0.0,
        "leader_skew": round(Spread.of(preferred).skew, 6) if preferred else 0.0,
        "current_leader_skew": round(Spread.of(leaders).skew, 6) if leaders else 0.0,
        "leaderless_partitions": balance.leaderless,
        "rack_spread_violations": balance.rack_spread_violations,
        "replicas_per_broker": {str(b): n for b, n in replicas.items()},
        "preferred_leaders_per_broker": {str(b): n for b, n in preferred.items()},
        "leaders_per_broker": {str(b): n for b, n in leaders.items()},
        "isr_size_counts": {f"{isr}/{rf}": n for (isr, rf), n in sorted(isr_sizes.items())},
        "fenced_brokers": sum(1 for _, _, fenced in brokers.live.values() if fenced),
        # Kafka's health rules (raftmeta.api.health), each topic at its min.insync.replicas, as
        # raftmeta's own verify counts them: under_replicated_partitions leaves replicas being added
        # by a reassignment out of the factor, as kafka-topics.sh does.
        **{FIGURES[flag]: counts.get((HEALTH + i, -1, -1), 0) for i, flag in enumerate(FLAGS)},
    }


def replay_partition_states(
    records: Sequence[tuple[int, LogRecord]],
) -> tuple[list[str], dict[str, Any], KafkaReplay]:
    """Every partition state along ``records`` (offset, record) checked with the rules; the
    violations (naming topic, partition and offset), the figures of what was replayed: counts,
    and the balance of the live partitions at the end (:meth:`KafkaReplay.balance`), and the
    replay at the end."""
    replay = KafkaReplay()
    problems = [problem for offset, record in records for problem in replay.apply(offset, record)]
    figures: dict[str, Any] = {
        "states": replay.replayed,
        "topics": len({topic for topic, _ in replay.states}),
        "partitions": len(replay.states),
        "brokers": len(replay.brokers.live),
        **replay.balance(),
    }
    return problems, figures, replay


# What a snapshot's partition must equal the log's partition in (its creation's replication
# factor is the log's knowledge, not the snapshot's).
_COMPARED = ("replicas", "isr", "adding_replicas", "leader", "leader_epoch", "partition_epoch")


def _snapshots_match_log(nodes: Sequence[NodeLog], log: NodeLog, records: Sequence[tuple[int, LogRecord]]) -> Check:
    """Each node's newest snapshot holds the partitions the log gives at its end offset --
    including the epochs the replay computes as Kafka does, which a snapshot's records state."""
    problems: list[str] = []
    compared = 0
    for node in nodes:
        snapshots = sorted(
            (sid.offset, path) for path in node.log_dir.glob("*.checkpoint") if (sid := parse_snapshot_name(path.name))
        )
        if not snapshots:
            continue
        end, path = snapshots[-1]
        if end > log.next_offset:
            problems.append(f"{node.name}: {path.name} ends at offset {end}, past {log.name}'s log ({log.next_offset})")
            continue
        in_snapshot = KafkaReplay()
        for entry in walk_kafka_file(path, first_offset=0):
            if isinstance(entry, KafkaDamage):
                d = entry.damage
                problems.append(f"{node.name}: {path.name} at byte {d.position} (offset {d.offset}): {d.reason}")
                continue
            for offset, record in entry.found.records or ():
                in_snapshot.apply(offset, record)
        in_log = KafkaReplay()
        for offset, record in records:
            if offset >= end:
                break
            in_log.apply(offset, record)
        compared += 1
        for key in sorted(set(in_snapshot.states) | set(in_log.states)):
            mine, logs = in_snapshot.states.get(key), in_log.states.get(key)
            at = f"{node.name}: {path.name}: {in_log.where(key)}"
            if mine is None or logs is None:
                problems.append(f"{at} is {'missing from the snapshot' if mine is None else 'not in the log'}")
                continue
            differ = [f"{name} {getattr(mine, name)} (log {getattr(logs, name)})" for name in _COMPARED
                      if getattr(mine, name) != getattr(logs, name)]  # fmt: skip
            if differ:
                problems.append(f"{at}: {', '.join(differ)}")
    detail = listed(problems) if problems else f"{compared} nodes' newest snapshots equal {log.name}'s log"
    return Check("snapshots-match-log", not problems, detail)


def verify_kraft(data_dir: Path) -> KraftVerifyResult:
    """Every check on the KRaft metadata logs under ``data_dir`` (:func:`find_kraft_logs`)."""
    nodes = [read_node_log(log_dir) for log_dir in find_kraft_logs(data_dir)]
    if not nodes:
        raise ValueError(f"{data_dir} holds no metadata log directory ({LOG_DIR_NAME}) in Kafka's format")
    voters = controller_ids(nodes)
    for node in nodes:
        node.name = _name(node, voters)
    checks = [_batch_integrity(nodes), _offsets_contiguous(nodes), _epochs_non_decreasing(nodes), _logs_agree(nodes)]
    # The partition states along the log that starts at 0 and reaches furthest (a controller's:
    # Kafka keeps the whole log until it snapshots and cleans it).
    complete = [n for n in nodes if n.first_offset == 0] or nodes
    longest = max(complete, key=lambda n: n.next_offset)
    records = [pair for entry in longest.batches if entry.found.crc_ok for pair in entry.found.records or ()]
    problems, counts, replay = replay_partition_states(records)
    detail = (
        listed(problems)
        if problems
        else f"{counts['states']} partition states along {longest.name}'s log, offsets "
        f"{longest.first_offset}..{longest.next_offset - 1}"
    )
    checks.append(Check("partition-states-valid", not problems, detail))
    checks.append(_snapshots_match_log(nodes, longest, records))
    figures = {
        "nodes": len(nodes),
        "controllers": sorted(voters),
        "batches": sum(len(n.batches) for n in nodes),
        "records": len(records),
        **counts,
    }
    unhealthy = replay.unhealthy() if needs_listing(figures) else Unhealthy(0, [])
    return KraftVerifyResult(checks, figures, {**health_verdict(figures), "unhealthy_partitions": unhealthy.to_json()})
