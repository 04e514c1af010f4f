"""The incremental verify's Python copy of the state rules (raftmeta.jobs.partition_rules) gives
what the Spark job's column expressions (raftmeta.jobs.state) give, on the same random states:
the carried-forward fields, the names of the rules each state breaks, and every count entry."""

from __future__ import annotations

import random
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from raftmeta.jobs.partition_rules import PartitionState, advance, broken_rules, entries
from raftmeta.jobs.state import Brokers, _broken_rules, _counts, partition_states

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

SEEDS = 400
CONTIGUOUS = Brokers(
    registered_at={b: (b * 7) % 40 for b in range(8)},
    pool_of={6: "gold", 7: "gold", 5: "silver"},
    live={
        0: ("rack-0", None, False), 1: ("rack-1", None, False), 2: (None, None, False), 3: ("rack-0", None, True),
        4: ("rack-2", None, False), 5: ("rack-1", "silver", False), 6: ("rack-2", "gold", False),
        7: ("rack-0", "gold", True),
    },
)  # fmt: skip
# Registered ids with a hole (the Spark rule then takes its set-difference branch).
SPARSE = Brokers(
    registered_at={0: 3, 1: 0, 2: 50, 4: 1, 5: 2, 9: 4},
    pool_of={9: "gold"},
    live={0: ("a", None, False), 1: ("b", None, False), 4: ("a", None, False), 9: (None, "gold", False)},
)


def some_ids(rng: random.Random, most: int = 4) -> list[int]:
    return [rng.randint(-1, 10) for _ in range(rng.randint(0, most))]


def random_state(rng: random.Random, index: int) -> tuple[PartitionState, PartitionState | None, dict[str, Any]]:
    replicas = some_ids(rng)
    pick = rng.random()
    isr = (
        list(replicas)
        if pick < 0.5
        else rng.sample(replicas, rng.randint(0, len(replicas)))
        if pick < 0.8
        else some_ids(rng)
    )
    leader = rng.choice([None, -1, *replicas, *isr, 3])
    state = PartitionState(
        "t", index, replicas if rng.random() > 0.05 else None, isr if rng.random() > 0.05 else None,
        rng.choice([None, [], replicas[:1]]), leader, rng.randint(0, 4), rng.randint(0, 4),
        rng.choice([None, len(replicas), 3, 2]),
    )  # fmt: skip
    previous = None
    if rng.random() < 0.7:
        previous = PartitionState(
            "t", index, None, None, None, rng.choice([None, -1, 1, 2, 3]), rng.randint(0, 4), rng.randint(0, 4), None
        )
    extra = {"offset": rng.randint(0, 60), "topic_pool": rng.choice([None, None, "gold", "silver"])}
    return state, previous, extra


@pytest.mark.parametrize("brokers", [CONTIGUOUS, SPARSE], ids=["contiguous-ids", "sparse-ids"])
def test_rule_names_equal_sparks(spark: SparkSession, brokers: Brokers) -> None:
    rng = random.Random(7)
    cases = [random_state(rng, i) for i in range(SEEDS)]
    rows = [
        {
            "id": i, "offset": extra["offset"], "topic_pool": extra["topic_pool"], "replicas": s.replicas,
            "isr": s.isr, "adding_replicas": s.adding_replicas, "leader": s.leader, "leader_epoch": s.leader_epoch,
            "partition_epoch": s.partition_epoch, "created_replication_factor": s.created_replication_factor,
            "prev_leader_epoch": p.leader_epoch if p else None,
            "prev_partition_epoch": p.partition_epoch if p else None, "prev_leader": p.leader if p else None,
        }
        for i, (s, p, extra) in enumerate(cases)
    ]  # fmt: skip
    schema = (
        "id int, offset long, topic_pool string, replicas array<int>, isr array<int>, adding_replicas array<int>, "
        "leader int, leader_epoch int, partition_epoch int, created_replication_factor int, prev_leader_epoch int, "
        "prev_partition_epoch int, prev_leader int"
    )
    from_spark = {
        r["id"]: list(r["rules"]) for r in _broken_rules(spark.createDataFrame(rows, schema), brokers).collect()
    }
    from_python = {
        i: broken_rules(s, p, extra["offset"], extra["topic_pool"], brokers) for i, (s, p, extra) in enumerate(cases)
    }
    assert from_python == from_spark
    assert sum(1 for rules in from_python.values() if rules) > SEEDS // 4, "the states break rules often enough"
    assert len({r for rules in from_python.values() for r in rules}) == 11, "every rule fires somewhere"


def test_carried_states_equal_sparks(spark: SparkSession) -> None:
    rng = random.Random(11)
    records: list[dict[str, Any]] = []
    for offset in range(300):
        first = rng.random() < 0.2
        replicas = some_ids(rng, 3) if first or rng.random() < 0.3 else None
        records.append(
            {
                "offset": offset, "record_type": "partition" if first else "partition_change", "topic_id": "t",
                "partition_id": rng.randint(0, 5), "replicas": replicas,
                "isr": some_ids(rng, 3) if first or rng.random() < 0.4 else None,
                "adding_replicas": rng.choice([None, [], [1]]) if not first else [],
                "leader": rng.choice([None, -1, 1, 2, 4]), "leader_epoch": rng.randint(0, 3),
                "partition_epoch": rng.randint(0, 3),
            }
        )  # fmt: skip
    schema = (
        "offset long, record_type string, topic_id string, partition_id int, replicas array<int>, isr array<int>, "
        "adding_replicas array<int>, leader int, leader_epoch int, partition_epoch int"
    )
    columns = ("replicas", "isr", "adding_replicas", "leader", "created_replication_factor")
    spark_rows = partition_states(spark.createDataFrame(records, schema)).collect()
    from_spark = {
        r["offset"]: (
            *[r[c] for c in columns],
            r["prev_leader_epoch"], r["prev_partition_epoch"], r["prev_leader"],
        )
        for r in spark_rows
    }  # fmt: skip
    current: dict[int, PartitionState] = {}
    from_python = {}
    for record in records:
        previous = current.get(record["partition_id"])
        state = current[record["partition_id"]] = advance(previous, record)
        from_python[record["offset"]] = (
            *[getattr(state, c) for c in columns],
            previous.leader_epoch if previous else None,
            previous.partition_epoch if previous else None,
            previous.leader if previous else None,
        )
    assert from_python == from_spark


def test_count_entries_equal_sparks(spark: SparkSession) -> None:
    rng = random.Random(5)
    cases = [random_state(rng, i)[0] for i in range(SEEDS)]
    names = ["a", "b", "c", None]
    min_isr = {"a": 2, "b": 3}
    rows = [
        {
            "live": True, "orphan": False, "broken": False, "first_live_of_topic": False, "topic_name": names[i % 4],
            "replicas": s.replicas, "isr": s.isr, "adding_replicas": s.adding_replicas, "leader": s.leader,
        }
        for i, s in enumerate(cases)
    ]  # fmt: skip
    schema = (
        "live boolean, orphan boolean, broken boolean, first_live_of_topic boolean, topic_name string, "
        "replicas array<int>, isr array<int>, adding_replicas array<int>, leader int"
    )
    min_isr_df = spark.createDataFrame(list(min_isr.items()), "topic_name string, min_isr int")
    counted = _counts(spark.createDataFrame(rows, schema), CONTIGUOUS, min_isr_df).collect()
    from_spark = {(r["kind"], r["broker"], r["extra"]): r["count"] for r in counted if r["count"]}
    from_python: Counter[tuple[int, int, int]] = Counter()
    for i, s in enumerate(cases):
        from_python.update(entries(s, names[i % 4], CONTIGUOUS, min_isr))
    assert dict(from_python) == from_spark
