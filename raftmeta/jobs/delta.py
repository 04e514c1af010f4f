"""The state checks of ``verify --incremental`` from the stored state (:mod:`raftmeta.jobs.state_store`):
only the records after the verified point are decoded and checked, in the driver.

1. :func:`refusal` says why the stored state cannot stand for the log below the point (then the
   caller replays in full): another cluster, the replayed node's unsealed log below the point
   changed, a snapshot that is new or changed, too many layers.
2. :func:`decode` reads the replayed node's committed records from the point on, with the data
   source's own decoder (the same rows a Spark task gives), starting at the point's batch.
3. :func:`unprovable` refuses the records the delta cannot fold in: records of a topic removed
   before the point, a broker re-registered out of a pool some stored topic uses (the full replay
   checks every *earlier* state against the final pools, and the store keeps last states only),
   a fencing of a broker unregistered before the point (its registration is not stored), and a
   ``min.insync.replicas`` value that is not a plain integer.
4. :func:`replay` folds the new broker and ``min.insync.replicas`` records into the stored ones
   (:func:`fold_brokers`, :func:`fold_min_isr`), then walks the new partition records in offset
   order, each state validated against its predecessor (the stored state of its partition, or the
   previous new one) by :mod:`raftmeta.jobs.partition_rules`, with the broker facts of the end of
   the log as the full replay uses them. The counts are the stored ones, less what the touched
   partitions gave, plus what they give now; "touched" covers the topics of the new records and
   the stored partitions whose health or rack spread a broker or ``min.insync.replicas`` change
   alters. A Spark job would cost more to start than a 1% delta costs to check, so none runs here
   (only the history checks, with ``--history``, run in Spark over the stored and the new history
   rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from raftmeta.api.health import MIN_INSYNC_REPLICAS
from raftmeta.jobs import layout
from raftmeta.jobs.checks import EXAMPLES_MAX, Check, listed
from raftmeta.jobs.columns import projected_schema, record_rows
from raftmeta.jobs.health import CHECK_NAME as HEALTH_CHECK
from raftmeta.jobs.health import FLAGS, HealthResult, describe_stuck, health_ok_detail, plain_config_int
from raftmeta.jobs.partition_rules import PartitionState, advance, broken_rules, entries, rack_view, stuck
from raftmeta.jobs.state import (
    BROKEN,
    BROKER_TYPES,
    HEALTH,
    HISTORY_COLUMNS,
    HISTORY_TYPES,
    LIGHT_COLUMNS,
    ORPHAN,
    ORPHANS_CHECK,
    ORPHANS_OK,
    PARTITION_TYPES,
    STATE_COLUMNS,
    STATES_CHECK,
    STATES_OK,
    STORED_COLUMNS,
    TOPIC,
    Brokers,
    ClusterState,
    balance_of,
    describe_broken,
    describe_orphan,
    isr_sizes_of,
)
from raftmeta.jobs.state_store import (
    MAX_GENERATIONS,
    StoredState,
    TopicInfo,
    read_partitions,
    read_partitions_involving,
    snapshot_identities,
    tail_digest,
)
from raftmeta.jobs.voters import COLUMNS as VOTER_COLUMNS
from raftmeta.jobs.voters import KINDS as VOTER_KINDS
from raftmeta.records.walk import position_of

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

COLUMNS = tuple(dict.fromkeys((*STATE_COLUMNS, *LIGHT_COLUMNS, *VOTER_COLUMNS, *HISTORY_COLUMNS)))


def refusal(stored: StoredState, node: layout.NodeFiles, nodes: list[layout.NodeFiles]) -> str | None:
    """Why the stored state cannot stand for ``node``'s log below its point, or None."""
    if stored.cluster_id != node.cluster_id:
        return f"the stored state is of cluster {stored.cluster_id}"
    if stored.generations >= MAX_GENERATIONS:
        return f"the stored state has {stored.generations} layers"
    if node.high_watermark < stored.point:
        return f"node {node.node_id} has committed less than the stored point {stored.point}"
    tail = stored.tails.get(node.node_id)
    if tail is None:
        return f"node {node.node_id} had not committed the stored point {stored.point} when it was stored"
    if snapshot_identities(nodes) != stored.snapshots:
        return "a node's newest snapshot is new or changed since the state was stored"
    if tail_digest(node, tail[0], stored.point) != tail[1]:
        return f"node {node.node_id}'s batches between offsets {tail[0]} and {stored.point} changed"
    return None


def decode(node: layout.NodeFiles, point: int) -> pa.Table:
    """``node``'s committed records from ``point`` on (COLUMNS), as the data source decodes them."""
    import pyarrow as pa

    batches: list[pa.RecordBatch] = []
    segments = node.segments
    for index, segment in enumerate(segments):
        following = segments[index + 1].base_offset if index + 1 < len(segments) else None
        if following is not None and following <= point:
            continue
        if segment.base_offset >= node.high_watermark:
            break
        data = layout.read_bytes(segment.uri)
        start = position_of(data, point) if segment.base_offset < point else 0
        name = segment.uri.rsplit("/", 1)[-1]
        batches.extend(record_rows(node.node_id, name, data, columns=COLUMNS, start=start, below=node.high_watermark))
    return pa.Table.from_batches(batches, schema=projected_schema(COLUMNS))


class Unprovable(Exception):
    """A new record whose effect the stored state does not hold enough to derive."""


def fold_brokers(brokers: Brokers, rows: list[dict[str, Any]]) -> Brokers:
    """The broker facts after the new records (``rows``, in offset order), as the full replay's
    ``state._brokers`` derives them from the whole log: the first registration; the pool of the
    latest registration that names one; for a broker whose latest record is not an unregistration,
    its latest registration's rack and pool, fenced as its latest record says. Unprovable when a
    broker unregistered before the point is fenced or unfenced: the full replay takes its rack and
    pool from a registration the store does not keep."""
    registered_at = dict(brokers.registered_at)
    pool_of = dict(brokers.pool_of)
    live = dict(brokers.live)
    for r in rows:
        kind = r["record_type"]
        if kind not in BROKER_TYPES:
            continue
        broker = r["broker_id"]
        if kind == "register_broker":
            registered_at.setdefault(broker, r["offset"])
            if r["pool"] is not None:
                pool_of[broker] = r["pool"]
            live[broker] = (r["rack"], r["pool"], bool(r["fenced"]))
        elif kind == "unregister_broker":
            live.pop(broker, None)
        elif broker in live:
            rack, pool, _ = live[broker]
            live[broker] = (rack, pool, kind == "fence_broker")
        elif broker in registered_at:
            raise Unprovable(f"a {kind} record at offset {r['offset']} of broker {broker}, unregistered before it")
        # A broker never registered stays unknown, as in the full replay (no registration, not live).
    return Brokers(registered_at, pool_of, live)


def fold_min_isr(min_isr: dict[str, int], rows: list[dict[str, Any]], names: set[str]) -> dict[str, int]:
    """Each topic name's ``min.insync.replicas`` after the new records, as the full replay's
    ``health.topic_min_isr`` gives it: the newest config of the name written at or after the newest
    TopicRecord of that name (a TopicRecord resets it), a deleted one meaning the default; a config
    of a name no TopicRecord has had yet counts for nothing. ``names``: the stored topics' names."""
    out = dict(min_isr)
    known = set(names)
    for r in rows:
        kind = r["record_type"]
        if kind == "topic":
            known.add(r["topic_name"])
            out.pop(r["topic_name"], None)
        elif kind == "config" and r["config_name"] == MIN_INSYNC_REPLICAS and r["config_resource"] in known:
            name, value = r["config_resource"], r["config_value"]
            if value is None:
                out.pop(name, None)
            elif (number := plain_config_int(value)) is not None:
                # Other spellings are left to the full replay rather than to two parsers' corner cases.
                out[name] = number
            else:
                raise Unprovable(f"a {MIN_INSYNC_REPLICAS} config at offset {r['offset']} of value {value!r}")
    return out


def unprovable(rows: list[dict[str, Any]], stored: StoredState, topics: dict[str, TopicInfo]) -> str | None:
    """Why these new records cannot be folded into the stored state, or None."""
    for r in rows:
        kind = r["record_type"]
        if kind in (*PARTITION_TYPES, "remove_topic"):
            known = topics.get(r["topic_id"])
            if known is not None and known.removed:
                return f"a record at offset {r['offset']} of topic id {r['topic_id']}, removed before the point"
    try:
        brokers = fold_brokers(stored.brokers, rows)
        fold_min_isr(stored.min_isr, rows, _names(topics))
    except Unprovable as exc:
        return str(exc)
    # The full replay checks every state along the log against the *final* pools. A stored state
    # passed, so a broker's earlier states can only have sat in topics of its old pool; once it
    # leaves that pool they break, but the store keeps no earlier state to count them by.
    pools = {info.pool for info in topics.values() if info.pool is not None}
    for broker, pool in sorted(brokers.pool_of.items()):
        old = stored.brokers.pool_of.get(broker)
        if old is not None and old != pool and old in pools:
            return (
                f"broker {broker} re-registered in pool {pool!r}, leaving pool {old!r} of stored topics "
                "(their earlier states would need the log)"
            )
    return None


def _names(topics: dict[str, TopicInfo]) -> set[str]:
    return {info.name for info in topics.values() if info.name is not None}


@dataclass(frozen=True)
class _Folded:
    brokers: Brokers
    records: int
    counts: dict[tuple[int, int, int], int]
    health: HealthResult
    min_isr: dict[str, int]

    def with_final(self, final: DataFrame) -> ClusterState:
        """The final state, its rows being ``final`` (the store's layers: :func:`final_rows`)."""
        return ClusterState(
            self.brokers.live, self.records, balance_of(self.counts), final, self.health, self.counts, self.brokers,
            self.min_isr,
        )  # fmt: skip


@dataclass(frozen=True)
class Delta:
    """What the records after the point give: the checks, the final state, and the store's next layer."""

    checks: list[Check]
    state: _Folded
    voter_rows: list[dict[str, Any]]
    history: pa.Table
    layer: dict[str, pa.Table]
    records: int


def replay(
    stored: StoredState,
    rows: list[dict[str, Any]],
    topics: dict[str, TopicInfo],
) -> Delta:
    """Check and fold the new records (``rows``: :func:`decode`'s with a good CRC, in offset
    order) into the stored state.
    The final state's rows are in the store once the caller has written the layer: see
    ``Delta.state.with_final`` and :func:`final_rows`."""
    import pyarrow as pa

    # The stored counts were made with the stored facts; the new ones are the facts at the end of
    # the log, which the full replay applies to every state (rules) and to the final state (counts).
    old_brokers, old_min_isr = stored.brokers, stored.min_isr
    brokers = fold_brokers(old_brokers, rows)
    min_isr = fold_min_isr(old_min_isr, rows, _names(topics))
    old_live = old_brokers.unfenced()
    live_brokers = brokers.unfenced()
    new_topics: dict[str, TopicInfo] = {}
    removed: set[str] = set()
    touched: set[str] = set()
    for r in rows:
        kind, topic_id = r["record_type"], r["topic_id"]
        if kind == "topic" and topic_id not in topics and topic_id not in new_topics:
            new_topics[topic_id] = TopicInfo(r["topic_name"], r["pool"], r["offset"], False)
        elif kind == "remove_topic":
            removed.add(topic_id)
        elif kind in PARTITION_TYPES:
            touched.add(topic_id)

    def topic(topic_id: str) -> TopicInfo | None:
        return topics.get(topic_id) or new_topics.get(topic_id)

    before = read_partitions(stored, [t for t in touched | removed if t in topics])
    # Stored partitions no new record touches whose count entries the new facts change: those with a
    # replica or leader whose liveness, fencing or rack changed (health, rack spread), every one
    # whose rack spread the number of racks decides if that number changed, and the partitions of
    # the names whose min.insync.replicas changed.
    changed_brokers = {
        b for b in old_brokers.live.keys() | brokers.live.keys() if old_brokers.live.get(b) != brokers.live.get(b)
    }
    old_rack_view, new_rack_view = rack_view(old_brokers), rack_view(brokers)
    old_racks, racks = old_rack_view[1], new_rack_view[1]
    if changed_brokers or old_racks != racks:
        involved = read_partitions_involving(
            stored, changed_brokers, None if old_racks == racks else min(old_racks, racks)
        )
        before.update(
            (k, v) for k, v in involved.items() if k not in before and not (k[0] in topics and topics[k[0]].removed)
        )
    changed_names = {n for n in old_min_isr.keys() | min_isr.keys() if old_min_isr.get(n) != min_isr.get(n)}
    if changed_names:
        named = [t for t, info in topics.items() if info.name in changed_names and not info.removed]
        before.update((k, v) for k, v in read_partitions(stored, named).items() if k not in before)
    current: dict[tuple[str, int], PartitionState] = {}
    orphans: list[dict[str, Any]] = []
    broken: list[dict[str, Any]] = []
    for r in rows:
        if r["record_type"] not in PARTITION_TYPES:
            continue
        key = (r["topic_id"], r["partition_id"])
        previous = current.get(key) or before.get(key)
        state = advance(previous, r)
        current[key] = state
        info = topic(r["topic_id"])
        if r["record_type"] == "partition" and (
            info is None or info.created_at is None or info.created_at > r["offset"]
        ):
            orphans.append(r)
        rules = broken_rules(state, previous, r["offset"], info.pool if info else None, brokers)
        if rules:
            broken.append(
                {
                    "topic_name": info.name if info else None, "topic_id": r["topic_id"],
                    "partition_id": r["partition_id"], "offset": r["offset"], "rules": rules,
                    "replicas": state.replicas, "isr": state.isr, "leader": state.leader,
                }
            )  # fmt: skip

    counts = dict(stored.counts)

    def add(key: tuple[int, int, int], n: int) -> None:
        counts[key] = counts.get(key, 0) + n

    def name_of(topic_id: str) -> str | None:
        info = topic(topic_id)
        return info.name if info else None

    for (topic_id, _), state in before.items():
        for e in entries(state, name_of(topic_id), old_brokers, old_min_isr, old_live, old_rack_view):
            add(e, -1)
    after = {**before, **current}
    stuck_rows: list[dict[str, Any]] = []
    for (topic_id, partition_id), state in after.items():
        if topic_id in removed:
            continue
        name = name_of(topic_id)
        for e in entries(state, name, brokers, min_isr, live_brokers, new_rack_view):
            add(e, 1)
        # Every partition left out of ``after`` is as it was stored, and a stored state was not stuck.
        if stuck(state, name, min_isr, live_brokers):
            stuck_rows.append(
                {
                    "topic_name": name, "partition_id": partition_id, "replicas": state.replicas,
                    "isr": state.isr, "leader": -1 if state.leader is None else state.leader,
                }
            )  # fmt: skip
    # A topic counts once while it has a partition and is not removed.
    had = {t for t, _ in before}
    has = {t for t, _ in after if t not in removed}
    add((TOPIC, -1, -1), len(has - had) - len(had - has))
    add((ORPHAN, -1, -1), len(orphans))
    add((BROKEN, -1, -1), len(broken))
    counts = {k: n for k, n in counts.items() if n}

    checks = [
        _check(ORPHANS_CHECK, [describe_orphan(r) for r in orphans[:EXAMPLES_MAX]], len(orphans), ORPHANS_OK),
        _check(STATES_CHECK, [describe_broken(r) for r in broken[:EXAMPLES_MAX]], len(broken), STATES_OK),
    ]
    flag_counts = {flag: counts.get((HEALTH + i, -1, -1), 0) for i, flag in enumerate(FLAGS)}
    stuck_total = flag_counts["stuck_under_replicated"]
    stuck_rows.sort(key=lambda r: (r["topic_name"] is not None, r["topic_name"] or "", r["partition_id"]))
    health_check = (
        Check(HEALTH_CHECK, True, health_ok_detail())
        if stuck_total == 0
        else Check(HEALTH_CHECK, False, listed([describe_stuck(r) for r in stuck_rows[:EXAMPLES_MAX]], stuck_total))
    )
    health = HealthResult(flag_counts, health_check, isr_sizes_of(counts))
    folded = _Folded(brokers, stored.records + len(rows), counts, health, min_isr)
    voter_rows = [
        {k: r[k] for k in ("offset", "record_type", "leader", "leader_epoch", "voters")}
        for r in rows
        if r["record_type"] in VOTER_KINDS
    ]
    history = pa.Table.from_pylist(
        [{k: r[k] for k in HISTORY_COLUMNS} for r in rows if r["record_type"] in HISTORY_TYPES],
        schema=projected_schema(HISTORY_COLUMNS),
    )
    changed = [
        {**_stored_row(state), "topic_name": name_of(t)}
        for (t, _), state in sorted(current.items())
        if t not in removed
    ]
    layer_topics = [
        {"topic_id": t, "topic_name": i.name, "pool": i.pool, "created_at": i.created_at, "removed": t in removed}
        for t, i in sorted(new_topics.items())
    ] + [
        {"topic_id": t, "topic_name": topics[t].name, "pool": topics[t].pool, "created_at": topics[t].created_at,
         "removed": True}
        for t in sorted(removed) if t in topics
    ]  # fmt: skip
    layer = {
        "partitions": pa.Table.from_pylist(changed, schema=stored_schema()),
        "topics": pa.Table.from_pylist(layer_topics, schema=topics_schema()),
        "history": history,
    }
    return Delta(checks, folded, voter_rows, history, layer, len(rows))


def _check(name: str, examples: list[str], total: int, ok_detail: str) -> Check:
    return Check(name, True, ok_detail) if total == 0 else Check(name, False, listed(examples, total))


def _stored_row(state: PartitionState) -> dict[str, Any]:
    return {
        "topic_id": state.topic_id, "partition_id": state.partition_id, "replicas": state.replicas,
        "isr": state.isr, "adding_replicas": state.adding_replicas, "leader": state.leader,
        "leader_epoch": state.leader_epoch, "partition_epoch": state.partition_epoch,
        "created_replication_factor": state.created_replication_factor,
    }  # fmt: skip


def stored_schema() -> pa.Schema:
    """The partitions layer's columns (STORED_COLUMNS), typed as the full replay writes them."""
    import pyarrow as pa

    types = {"topic_id": pa.string(), "topic_name": pa.string(), "created_replication_factor": pa.int32()}
    record = projected_schema(None)
    return pa.schema([(c, types[c] if c in types else record.field(c).type) for c in STORED_COLUMNS])


def topics_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [("topic_id", pa.string()), ("topic_name", pa.string()), ("pool", pa.string()),
         ("created_at", pa.int64()), ("removed", pa.bool_())]
    )  # fmt: skip


def final_rows(spark: SparkSession, stored: StoredState, generations: int) -> DataFrame:
    """The live partitions of the first ``generations`` layers (a newer row replacing an older
    one, removed topics left out), as ``ClusterState.final`` gives them."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    partitions_schema = from_arrow_schema(stored_schema())
    topic_schema = from_arrow_schema(topics_schema())
    layers = None
    removed = None
    for generation, (p, t) in enumerate(
        zip(stored.paths("partitions", generations), stored.paths("topics", generations), strict=True)
    ):
        rows = spark.read.schema(partitions_schema).parquet(p).withColumn("gen", F.lit(generation))
        gone = spark.read.schema(topic_schema).parquet(t).where("removed").select("topic_id")
        layers = rows if layers is None else layers.unionByName(rows)
        removed = gone if removed is None else removed.unionByName(gone)
    assert layers is not None and removed is not None
    newest = (
        layers.groupBy("topic_id", "partition_id")
        .agg(
            F.max_by(F.struct(*[c for c in STORED_COLUMNS if c not in ("topic_id", "partition_id")]), "gen").alias("s")
        )
        .select("topic_id", "partition_id", "s.*")
        .join(removed, "topic_id", "left_anti")
    )
    return newest.select(
        "topic_name", "topic_id", "partition_id", "replicas", "isr",
        F.coalesce("leader", F.lit(-1)).alias("leader"), "adding_replicas",
    )  # fmt: skip
