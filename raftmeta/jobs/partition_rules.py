"""One partition state at a time, in Python: the rules of ``partition-states-valid`` and the entries
a live partition adds to the balance and health counts.

``verify --incremental`` (:mod:`raftmeta.jobs.delta`) applies them in the driver to the few states
its new records make: a Spark job costs more to start on a 1% delta than the delta costs to check.
The full replay evaluates the same rules as Spark column expressions over every state
(:mod:`raftmeta.jobs.state`, ``_violation_rules`` and ``_counts``): a second copy, kept equal by
``tests/jobs/test_partition_rules.py``, which runs both on the same states and requires the same
rule names and the same entries. The health flags are ``raftmeta.api.health.classify`` itself, the
rule the Spark health columns are tested against.

Null handling follows Spark's: a rule whose inputs are missing (no previous state, no leader) does
not fire, and a missing list is empty.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raftmeta.api.health import DEFAULT_MIN_INSYNC_REPLICAS, classify
from raftmeta.jobs.health import FLAGS
from raftmeta.jobs.state import (
    HEALTH,
    ISR_SIZE,
    LEADER,
    LEADERLESS,
    PARTITION,
    PREFERRED,
    RACK_SPREAD,
    REPLICA,
    Brokers,
)

if TYPE_CHECKING:
    import pyarrow as pa

Entry = tuple[int, int, int]  # (kind, broker, extra), as the Spark job's counts are keyed
# The rule a KRaft log's partition may break by design: under Kafka's eligible leader replicas
# (KIP-966) the ISR empties when its last member goes, and the ELR keeps who may lead again
# (raftmeta/jobs/kraft_verify.py).
ISR_EMPTY = "ISR empty: the partition lost its last in-sync replica"


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A partition after one of its records: the fields carried forward (a PartitionChangeRecord
    sets some), the record's own epochs, and the replication factor it was created with."""

    topic_id: str
    partition_id: int
    replicas: list[int] | None
    isr: list[int] | None
    adding_replicas: list[int] | None
    leader: int | None
    leader_epoch: int | None
    partition_epoch: int | None
    created_replication_factor: int | None

    @classmethod
    def from_table(cls, table: pa.Table) -> list[PartitionState]:
        """A state per row of ``table`` (the stored ``partitions`` columns), built column by column
        rather than through a dict per row: a broker change can select ~10% of the image's rows."""
        c = table.to_pydict()
        return [
            cls(*fields)
            for fields in zip(
                c["topic_id"], c["partition_id"], c["replicas"], c["isr"], c["adding_replicas"], c["leader"],
                c["leader_epoch"], c["partition_epoch"], c["created_replication_factor"], strict=True,
            )
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PartitionState:
        return cls(
            row["topic_id"], row["partition_id"], row["replicas"], row["isr"], row["adding_replicas"],
            row["leader"], row["leader_epoch"], row["partition_epoch"], row["created_replication_factor"],
        )  # fmt: skip


def advance(previous: PartitionState | None, record: Mapping[str, Any]) -> PartitionState:
    """The state after ``record`` (a partition or partition_change row of the data source)."""

    def carried(name: str) -> Any:
        value = record[name]
        if value is None and previous is not None:
            return getattr(previous, name)
        return value

    if previous is None:
        replicas = record["replicas"]
        # The first record's replicas less the ones being added (a snapshot taken mid-move).
        created = None if replicas is None else len(replicas) - len(record["adding_replicas"] or [])
    else:
        created = previous.created_replication_factor
    return PartitionState(
        record["topic_id"], record["partition_id"], carried("replicas"), carried("isr"), carried("adding_replicas"),
        carried("leader"), record["leader_epoch"], record["partition_epoch"], created,
    )  # fmt: skip


def broken_rules(
    state: PartitionState, previous: PartitionState | None, offset: int, topic_pool: str | None, brokers: Brokers
) -> list[str]:
    """The names of the rules ``state`` (at ``offset``, after ``previous``) breaks, in the order
    of the Spark job's ``_violation_rules``."""
    replicas = state.replicas or []
    isr = state.isr or []
    adding = state.adding_replicas or []
    leader = state.leader
    prev_leader_epoch = previous.leader_epoch if previous is not None else None
    prev_partition_epoch = previous.partition_epoch if previous is not None else None
    prev_leader = previous.leader if previous is not None else None
    rules: list[tuple[str, bool]] = [
        ("no replicas", not replicas),
        ("duplicate replica", len(set(replicas)) != len(replicas)),
        (
            "replica count differs from the replication factor",
            state.created_replication_factor is not None
            and len(replicas) - len(adding) != state.created_replication_factor,
        ),
        ("ISR not a subset of the replicas", bool(set(isr) - set(replicas))),
        (ISR_EMPTY, not isr),
        ("leader outside the ISR", leader is not None and leader != -1 and leader not in isr),
        (
            "partition epoch did not rise by one",
            prev_partition_epoch is not None
            and state.partition_epoch is not None
            and state.partition_epoch != prev_partition_epoch + 1,
        ),
        (
            "leader epoch went backwards",
            prev_leader_epoch is not None and state.leader_epoch is not None and state.leader_epoch < prev_leader_epoch,
        ),
        (
            "leader changed without a new leader epoch",
            prev_leader is not None
            and leader is not None
            and leader != prev_leader
            and prev_leader_epoch is not None
            and state.leader_epoch is not None
            and state.leader_epoch <= prev_leader_epoch,
        ),
        (
            "replica outside the topic's broker pool",
            topic_pool is not None and any(brokers.pool_of.get(b) != topic_pool for b in replicas),
        ),
        (
            "replica not a registered broker",
            not all(brokers.registered_at.get(b, offset + 1) <= offset for b in replicas),
        ),
    ]
    return [name for name, broken in rules if broken]


RackView = tuple[Mapping[int, str | None], int]  # each registered broker's rack, the number of racks


def rack_view(brokers: Brokers) -> RackView:
    """The racks of the brokers not unregistered, and how many there are (no rack counting as one)."""
    return {b: rack for b, (rack, _, _) in brokers.live.items()}, len({rack for rack, _, _ in brokers.live.values()})


def rack_spread_short(replicas: Sequence[int], racks: RackView) -> bool:
    """Whether ``replicas`` span fewer racks than they could (``state.rack_spread_short``'s rule).
    An unknown broker and a broker without a rack both count as the one "no rack" value, as
    Spark's array_distinct over the rack map's nulls does."""
    rack_of, rack_count = racks
    return len({rack_of.get(b) for b in replicas}) < min(len(replicas), rack_count)


def entries(
    state: PartitionState,
    topic_name: str | None,
    brokers: Brokers,
    min_isr: Mapping[str, int],
    live_brokers: Collection[int] | None = None,
    racks: RackView | None = None,
) -> list[Entry]:
    """The entries one live partition adds to the counts (each counts 1), as the Spark job's
    ``_counts`` emits them: partitions, leaderless, rack spread, preferred and current leader,
    ISR size, every health flag, and one per replica. ``live_brokers`` and ``racks`` are what
    ``brokers`` gives (:func:`rack_view`): a caller with many partitions passes them once made."""
    replicas = state.replicas or []
    isr = state.isr or []
    leader = -1 if state.leader is None else state.leader
    if live_brokers is None:
        live_brokers = brokers.unfenced()
    out: list[Entry] = [(PARTITION, -1, -1)]
    if leader < 0:
        out.append((LEADERLESS, -1, -1))
    if rack_spread_short(replicas, racks if racks is not None else rack_view(brokers)):
        out.append((RACK_SPREAD, -1, -1))
    if replicas:
        out.append((PREFERRED, replicas[0], -1))
    if leader >= 0:
        out.append((LEADER, leader, -1))
    out.append((ISR_SIZE, len(isr), len(replicas)))
    minimum = (
        min_isr.get(topic_name, DEFAULT_MIN_INSYNC_REPLICAS) if topic_name is not None else DEFAULT_MIN_INSYNC_REPLICAS
    )
    health = classify(replicas, isr, leader, live_brokers, minimum, state.adding_replicas or ())
    out.extend((HEALTH + i, -1, -1) for i, flag in enumerate(FLAGS) if getattr(health, flag))
    out.extend((REPLICA, b, -1) for b in replicas)
    return out


def stuck(
    state: PartitionState, topic_name: str | None, min_isr: Mapping[str, int], live_brokers: Collection[int]
) -> bool:
    """Whether the live partition fails ``isr-full-when-replicas-live``."""
    minimum = (
        min_isr.get(topic_name, DEFAULT_MIN_INSYNC_REPLICAS) if topic_name is not None else DEFAULT_MIN_INSYNC_REPLICAS
    )
    leader = -1 if state.leader is None else state.leader
    health = classify(state.replicas or [], state.isr or [], leader, live_brokers, minimum, state.adding_replicas or ())
    return health.stuck_under_replicated


__all__ = [
    "ISR_EMPTY",
    "Entry",
    "PartitionState",
    "RackView",
    "advance",
    "broken_rules",
    "entries",
    "rack_spread_short",
    "rack_view",
    "stuck",
]
