"""One chaos run, start to verdict: a fault phase (workload + nemesis), then a liveness phase
(heal everything, require convergence within a bound), then the checks on the stopped cluster's
files (consistency, history, and optionally the Spark verify job over every node's log).

Every process the run starts is stopped in a ``finally``, whatever happens.
"""

from __future__ import annotations

import asyncio
import random
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftmeta.api.health import classify
from raftmeta.api.ids import uuid_to_str
from raftmeta.chaos.broker_metadata import Topics, committed_topics, wait_converged
from raftmeta.chaos.checker import availability, check_history, outcome_counts, spark_history
from raftmeta.chaos.cluster import ChaosCluster, ClusterConfig
from raftmeta.chaos.committed import read_committed
from raftmeta.chaos.disk_damage import REPAIRED_EVENT, DiskDamage, judge_repairs
from raftmeta.chaos.events import Timeline, wall_ms
from raftmeta.chaos.history import HistoryWriter, Op, write_history
from raftmeta.chaos.kafka_data import DATA_PARTITIONS, DATA_TOPIC, KafkaDataWorkload
from raftmeta.chaos.linearizable import TIMELINE, check_linearizable
from raftmeta.chaos.metrics import MetricsRecorder
from raftmeta.chaos.monitor import QuorumMonitor
from raftmeta.chaos.moves import COUNTS, check_reassignments
from raftmeta.chaos.nemesis import (
    DEFAULT_FAMILIES,
    FAMILIES,
    FaultStep,
    Nemesis,
    check_broker_families,
    plan_faults,
)
from raftmeta.chaos.rules import check_rules
from raftmeta.chaos.snapshot_damage import SnapshotDamage, unnoticed_snapshots
from raftmeta.chaos.state_damage import StateFileDamage, double_votes, unnoticed, votes_recorded
from raftmeta.chaos.tape import CommittedTape
from raftmeta.chaos.voter_log import check_voters, committed_voter_records, read_node_voters
from raftmeta.chaos.workload import Workload, WorkloadConfig
from raftmeta.client import ClientError, ControllerClient, RetryPolicy
from raftmeta.jobs.checks import Check
from raftmeta.jobs.consistency import facts_to_checks, local_facts
from raftmeta.v1 import controller_pb2

TAPE_INTERVAL_S = 0.2
WATCH_INTERVAL_S = 0.5
# Moves in flight at the heal complete within a catch-up delay and a few heartbeats.
SETTLE_MOVES_S = 10.0
SETTLE_ISRS_S = 15.0
# The real brokers' clients (``--kafka-brokers``): a produce's delivery timeout and the bound of
# the drain and the final read. A broker's outage in the fault phase lasts a session and a JVM's
# start; its partitions' leaders move within the session, so a batch waits far less than this.
KAFKA_CLIENT_TIMEOUT_S = 60.0
KAFKA_HISTORY = "kafka-history.jsonl"


@dataclass(frozen=True)
class ChaosConfig:
    seed: int
    report_dir: Path
    duration_s: float = 60.0
    families: tuple[str, ...] = DEFAULT_FAMILIES
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    clients: int = 8
    think_ms_max: int = 400
    convergence_timeout_s: float = 30.0
    spark: bool = True  # run `raftmeta verify` (Spark) over the logs with the history
    # A fixed fault schedule instead of one drawn from the seed (tests that need a given sequence).
    plan: tuple[FaultStep, ...] | None = None

    def reproduce(self) -> str:
        args = [
            "raftmeta", "chaos", "--nodes", str(self.cluster.nodes), "--duration", f"{self.duration_s:g}",
            "--faults", ",".join(self.families), "--clients", str(self.clients), "--seed", str(self.seed),
            "--report-dir", str(self.report_dir),
        ]  # fmt: skip
        if self.cluster.observers != default_observers(self.families):
            args += ["--observers", str(self.cluster.observers)]
        if self.cluster.kafka_brokers:
            args += ["--kafka-brokers", str(self.cluster.kafka_brokers)]
        if self.cluster.unsafe_ack_before_commit:
            args.append("--unsafe-ack-before-commit")
        if self.cluster.unsafe_skip_fsync:
            args.append("--unsafe-skip-fsync")
        if not self.spark:
            args.append("--no-spark")
        return shlex.join(args)


def default_observers(families: tuple[str, ...]) -> int:
    """Observer nodes a run starts unless told otherwise: one for the membership faults to add."""
    return 1 if "membership" in families else 0


@dataclass
class ChaosResult:
    config: ChaosConfig
    ops: list[Op]
    timeline: Timeline
    checks: list[Check]
    faults: dict[str, int]
    lost_acknowledged: int
    converged_ms: int | None
    figures: dict[str, Any]
    started_ms: int
    ended_ms: int

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def violations(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.passed]

    @property
    def reassignments(self) -> dict[str, int]:
        """Partition moves seen in the committed log: started, completed, cancelled, ..."""
        counts: dict[str, int] = self.figures.get("reassignments", {}).get("counts", dict.fromkeys(COUNTS, 0))
        return counts

    @property
    def voter_changes(self) -> dict[str, Any]:
        """The membership faults' requests and the committed voter sets (empty without them)."""
        figures: dict[str, Any] = self.figures.get("voters", {})
        return {k: figures[k] for k in ("bootstrap", "final", "requests", "acknowledged") if k in figures}

    def to_json(self) -> dict[str, Any]:
        availability_figures = self.figures.get("availability", {})
        return {
            "passed": self.passed,
            "seed": self.config.seed,
            "ops": outcome_counts(self.ops),
            "faults": self.faults,
            "reassignments": self.reassignments,
            "voter_changes": self.voter_changes,
            "lost_acknowledged": self.lost_acknowledged,
            "violations": self.violations,
            "longest_unavailable_ms": availability_figures.get("longest_unavailable_ms"),
            "converged_ms": self.converged_ms,
            "nodes": self.config.cluster.nodes,
            "observers": self.config.cluster.observers,
            # With real Kafka brokers: each one's metadata verdict and the data's figures; else None.
            "kafka": self.figures.get("kafka"),
            "duration_s": self.config.duration_s,
            "reproduce": self.config.reproduce(),
            "checks": [c.to_json() for c in self.checks],
            "figures": self.figures,
            "events": [e.to_json() for e in self.timeline.events],
        }


def run_chaos(config: ChaosConfig, echo: Callable[[str], None] | None = None) -> ChaosResult:
    """Run it; ``echo`` receives one line per fault, heal, leader change and phase as they happen."""
    return asyncio.run(_run(config, echo))


async def _run(config: ChaosConfig, echo: Callable[[str], None] | None) -> ChaosResult:
    data_dir = config.report_dir / "data"
    history_path = config.report_dir / "history.jsonl"
    check_broker_families(config.families, config.cluster.kafka_brokers)
    if data_dir.exists() and any(data_dir.iterdir()):
        # Nodes would refuse another cluster's data dirs (or, worse, resume an old run's logs).
        raise FileExistsError(f"{data_dir} holds an earlier run: choose another --report-dir or delete it")
    config.report_dir.mkdir(parents=True, exist_ok=True)
    cluster = ChaosCluster(config.cluster, data_dir)
    timeline = Timeline(echo)
    history = HistoryWriter(history_path)
    checks: list[Check] = []
    figures: dict[str, Any] = {}
    converged_ms: int | None = None
    final_topics: dict[str, str] | None = None
    final_voters: list[int] | None = None
    nemesis: Nemesis | None = None
    started_ms = ended_ms = wall_ms()
    tape = CommittedTape({i: cluster.node_dir(i) for i in cluster.node_ids})
    crashes: list[str] = []
    background: list[asyncio.Task[None]] = []
    recorder = MetricsRecorder({})
    outcomes: list[BaseException | None] = []
    data: KafkaDataWorkload | None = None
    try:
        await cluster.start()
        if cluster.kafka is not None:
            await _create_data_topic(cluster.bootstrap)
            data = KafkaDataWorkload(
                cluster.kafka.bootstrap_servers,
                config.report_dir / KAFKA_HISTORY,
                client_timeout_s=KAFKA_CLIENT_TIMEOUT_S,
                client_log=data_dir / "logs" / "kafka-clients.log",
            )
            data.start()

        def hint(leader_id: int, high_watermark: int) -> None:
            tape.leader_hint = (leader_id, high_watermark)

        monitor = QuorumMonitor(cluster.bootstrap, timeline, on_answer=hint)
        recorder.endpoints = dict(cluster.metrics_addresses)
        background = [
            asyncio.create_task(_record_tape(tape)),
            asyncio.create_task(_watch_processes(cluster, timeline, crashes)),
            asyncio.create_task(recorder.run()),
        ]
        try:
            monitor.start()
            steps = (
                list(config.plan)
                if config.plan is not None
                else plan_faults(
                    config.seed,
                    config.families,
                    config.duration_s,
                    fetch_timeout_s=config.cluster.fetch_timeout_ms / 1000,
                    session_timeout_s=config.cluster.session_timeout_ms / 1000,
                )
            )
            nemesis = Nemesis(cluster, monitor, timeline, config.seed, steps)
            workload = Workload(
                cluster.bootstrap.split(","),
                WorkloadConfig(
                    clients=config.clients,
                    brokers=config.cluster.broker_count,
                    first_broker_id=config.cluster.first_broker_id,
                    think_ms_max=config.think_ms_max,
                ),
                config.seed,
                history,
            )
            stop = asyncio.Event()
            started_ms = wall_ms()
            timeline.add("phase", "", f"fault phase: {len(steps)} faults planned over {config.duration_s:g} s")
            tasks = [asyncio.create_task(workload.run(stop)), asyncio.create_task(nemesis.run(stop))]
            await asyncio.sleep(config.duration_s)
            stop.set()
            await asyncio.gather(*tasks)
            if data is not None:
                await asyncio.to_thread(data.stop_producing)
            ended_ms = wall_ms()
            timeline.add("phase", "", "liveness phase: heal everything")
            converged_ms, final_topics, final_voters = await _liveness_phase(config, cluster, monitor, checks)
            if data is not None:
                figures["kafka"] = await _kafka_checks(config, cluster, data, checks, timeline)
        finally:
            await monitor.stop()
    finally:
        if data is not None:
            data.abandon()
        for task in background:
            task.cancel()
        outcomes = await asyncio.gather(*background, return_exceptions=True)
        history.close()
        await cluster.close()
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome  # the tape or the watchdog broke: the checks would be incomplete
    await asyncio.to_thread(tape.poll)  # the last commits, now that every node has stopped
    checks.append(
        Check(
            "no-process-crashed",
            not crashes,
            "; ".join(crashes) if crashes else "every node and the broker fleet ran whenever the nemesis let them",
        )
    )
    gaps = tape.gaps()
    checks.append(
        Check(
            "committed-batches-never-change",
            not tape.conflicts,
            "; ".join(tape.conflicts[:10])
            if tape.conflicts
            else f"{len(tape.batches)} committed batches copied during the run stayed identical on every node",
        )
    )
    figures["tape"] = {
        "batches": len(tape.batches),
        "end_offset": tape.end_offset(),
        "reads": tape.reads,
        "gaps": [list(g) for g in gaps[:20]],
    }
    if nemesis is not None and "storage" in config.families:
        node_logs = _node_logs(data_dir / "logs", cluster.node_ids)
        checks.append(_storage_check(nemesis.disk_damage, node_logs))
        checks.extend(_state_file_checks(nemesis.state_damage, node_logs))
        figures["storage_faults"] = [d.to_json() for d in nemesis.disk_damage]
        figures["state_file_faults"] = [d.to_json() for d in nemesis.state_damage]
        if nemesis.snapshot_damage:
            checks.append(_snapshot_check(nemesis.snapshot_damage, node_logs))
            figures["snapshot_faults"] = [d.to_json() for d in nemesis.snapshot_damage]
    figures["log_tracebacks"] = _tracebacks(data_dir / "logs")
    figures["exercised"] = _exercised(data_dir / "logs")
    ops = history.ops
    lost = await _check_files(config, data_dir, tape, ops, final_topics, checks, figures)
    if "membership" in config.families or config.cluster.observers:
        voter_verdict = check_voters(
            nemesis.voter_requests if nemesis is not None else [],
            cluster.bootstrap_voters,
            committed_voter_records(tape.batches),
            gaps,
            [await asyncio.to_thread(read_node_voters, i, cluster.node_dir(i)) for i in cluster.node_ids],
            final_voters,
        )
        checks.extend(voter_verdict.checks)
        lost += len(voter_verdict.lost_acknowledged)
        figures["voters"] = voter_verdict.figures
        if nemesis is not None:
            figures["voters"]["attempts"] = [r.to_json() for r in nemesis.voter_requests]
    figures["availability"] = availability(ops, timeline.fault_windows(), started_ms, ended_ms)
    figures["node_metrics"] = recorder.figures()
    figures["proxy_bytes_dropped"] = cluster.mesh.bytes_dropped() if cluster.mesh is not None else 0
    figures["proxy_bytes_by_node"] = cluster.mesh.bytes_by_node() if cluster.mesh is not None else {}
    faults = nemesis.counts if nemesis is not None else dict.fromkeys(FAMILIES, 0)
    return ChaosResult(config, ops, timeline, checks, faults, lost, converged_ms, figures, started_ms, ended_ms)


async def _liveness_phase(
    config: ChaosConfig, cluster: ChaosCluster, monitor: QuorumMonitor, checks: list[Check]
) -> tuple[int | None, dict[str, str] | None, list[int] | None]:
    """Heal everything, require convergence within the bound, read the final topics and voters.

    Returns (milliseconds to converge or None, the leader's topics or None, its voters or None)."""
    await cluster.heal()
    ok, waited_ms, state = await monitor.wait_converged(cluster.node_ids, config.convergence_timeout_s)
    checks.append(
        Check(
            "converged",
            ok,
            f"every voter's log end equals the leader's high watermark {waited_ms} ms after the heal ({state})"
            if ok
            else f"no convergence within {config.convergence_timeout_s:g} s after the heal; last: {state}",
        )
    )
    if not ok:
        return None, None, None
    described = await _settle_and_describe(cluster.bootstrap, monitor, cluster.node_ids)
    checks.append(
        Check(
            "final-state-readable",
            described is not None,
            "the converged quorum committed a marker write and described its topics"
            if described is not None
            else "the converged quorum did not commit a marker write or describe its topics within 10 s",
        )
    )
    # The voters of the last converged answer: after the marker write when it went through.
    return waited_ms, described, list(monitor.final_voters)


async def _create_data_topic(bootstrap: str) -> None:
    """The real brokers' data topic, through raftmeta's gRPC client with KRaft's striped placer."""
    topic = controller_pb2.CreatableTopic(
        name=DATA_TOPIC, num_partitions=DATA_PARTITIONS, replication_factor=3, placer="striped"
    )
    async with ControllerClient(bootstrap, retry=RetryPolicy(deadline_s=30)) as client:
        created = await client.create_topics(controller_pb2.CreateTopicsRequest(topics=[topic]))
    if created.topics[0].error_code != 0:
        raise RuntimeError(f"the data topic {DATA_TOPIC} was not created: {created.topics[0].error_message}")


async def _kafka_checks(
    config: ChaosConfig, cluster: ChaosCluster, data: KafkaDataWorkload, checks: list[Check], timeline: Timeline
) -> dict[str, Any]:
    """With the brokers healed: every broker's metadata against the committed image (bounded by
    the nodes' broker session timeout), then the data's verdict; adds the checks, returns the
    figures (per broker, and the data's)."""
    assert cluster.kafka is not None
    bound_s = config.cluster.session_timeout_ms / 1000

    async def committed() -> Topics | None:
        try:
            async with ControllerClient(cluster.bootstrap, retry=RetryPolicy(deadline_s=10)) as client:
                return committed_topics(await client.describe_topics())
        except ClientError:
            return None  # no answer this round: the quorum's own checks say why

    async def unfenced() -> set[int]:
        try:
            async with ControllerClient(cluster.bootstrap, retry=RetryPolicy(deadline_s=10)) as client:
                return {b.broker_id for b in (await client.describe_cluster()).brokers if not b.fenced}
        except ClientError:
            return set()

    missing = sorted(set(cluster.kafka.ids) - await unfenced())
    back = cluster.kafka_heal_error is None and not missing
    checks.append(
        Check(
            "kafka:brokers-back-after-heal",
            back,
            f"every Kafka broker {cluster.kafka.ids} registered and unfenced after the heal"
            if back
            else f"not registered and unfenced after the heal: {missing}; {cluster.kafka_heal_error or ''}"[:4000],
        )
    )
    timeline.add("phase", "", "every Kafka broker's metadata against the committed image")
    verdicts = await wait_converged(cluster.kafka.addresses, committed, bound_s)
    checks.extend(v.check(bound_s) for v in verdicts)
    timeline.add("phase", "", "the data through the Kafka brokers: flush, drain the consumer group, read the log")
    try:
        data_checks, data_figures = await asyncio.to_thread(data.finish)
    except (TimeoutError, RuntimeError, OSError) as exc:
        data_checks = [Check("kafka:data-read", False, f"the data could not be read back: {exc!r}")]
        data_figures = {}
    checks.extend(data_checks)
    return {
        "brokers": [v.to_json() for v in verdicts],
        "metadata_bound_s": bound_s,
        "data": data_figures,
        "history": KAFKA_HISTORY,
    }


async def _check_files(
    config: ChaosConfig,
    data_dir: Path,
    tape: CommittedTape,
    ops: list[Op],
    final_topics: dict[str, str] | None,
    checks: list[Check],
    figures: dict[str, Any],
) -> int:
    """The checks on the stopped cluster's files; adds to ``checks`` and ``figures``, returns the
    number of lost acknowledged operations."""
    checks.extend(facts_to_checks(await asyncio.to_thread(local_facts, str(data_dir))))
    log = await asyncio.to_thread(read_committed, str(data_dir), tape)
    verdict = check_history(ops, log, final_topics)
    checks.extend(verdict.checks)
    linearizability = check_linearizable(ops)
    checks.append(linearizability.check)
    page = linearizability.timeline(config.reproduce())
    if page is not None:
        (config.report_dir / TIMELINE).write_text(page, encoding="utf-8")
    figures["linearizability"] = {
        "operations": len(linearizability.operations),
        "verdict": None if linearizability.result is None else linearizability.result.verdict,
        "timeline": TIMELINE if page is not None else None,
    }
    moves = await asyncio.to_thread(check_reassignments, ops, tape.batches, tape.snapshots, log.requests)
    checks.extend(moves.checks)
    checks.append(await asyncio.to_thread(check_rules, tape.batches, tape.snapshots))
    figures["reassignments"] = {"counts": moves.counts, **moves.figures}
    figures["history"] = {
        "replayed_node": log.node_id,
        "replay_base_offset": log.base_offset,
        "high_watermark": log.high_watermark,
        "unverifiable_creates": len(verdict.unverifiable),
        "unknown_creates_applied": verdict.unknown_creates_applied,
        "final_topics": None if final_topics is None else len(final_topics),
    }
    if config.spark:
        kept, left_out = spark_history(ops, log)
        spark_path = config.report_dir / "history-spark.jsonl"
        write_history(spark_path, kept)
        figures["spark"] = await asyncio.to_thread(_spark_verify, str(data_dir), str(spark_path), checks)
        figures["spark"]["history_ops_compacted"] = left_out
    return len(verdict.lost_acknowledged) + len(moves.lost_acknowledged)


async def _settle_and_describe(bootstrap: str, monitor: QuorumMonitor, nodes: list[int]) -> dict[str, str] | None:
    """Make every node's high-watermark checkpoint cover the whole log, then read the topics.

    Nodes checkpoint their high watermark at most once a second, on a commit: after a quiet
    second, one more committed write (a marker topic, not part of the history) makes every node
    write a checkpoint that covers everything before it. Moves still in flight after the heal
    commit records of their own (catch-up, completion) a second or two later, so the quiet second
    starts once none is left."""
    async with ControllerClient(bootstrap, retry=RetryPolicy(deadline_s=10)) as client:
        await _wait_moves_done(client, SETTLE_MOVES_S)
        await _wait_isrs_full(client, SETTLE_ISRS_S)
        await asyncio.sleep(1.2)
        marker = controller_pb2.CreatableTopic(
            name=f"chaos-end-{random.randrange(1 << 30)}", num_partitions=1, replication_factor=1
        )
        try:
            await client.create_topics(controller_pb2.CreateTopicsRequest(topics=[marker]))
            await monitor.wait_converged(nodes, 10.0)
            await asyncio.sleep(0.5)
            described = await client.describe_topics()
        except ClientError:
            return None  # a converged quorum that cannot answer: reported as a failed check
    return {t.name: uuid_to_str(t.topic_id) for t in described.topics}


async def _wait_isrs_full(client: ControllerClient, timeout_s: float) -> None:
    """Until no partition is under-replicated while all its replicas' brokers are live (a
    recovered broker rejoins its ISRs through its partition leaders' AlterPartition a catch-up
    delay or two after the heal), or ``timeout_s``: those ISR changes are commits too, and the
    quiet second before the marker must come after them; one still missing is left to the
    checks (spark:isr-full-when-replicas-live)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            cluster = await client.describe_cluster()
            live = {b.broker_id for b in cluster.brokers if not b.fenced}
            described = await client.describe_topics()
            if not any(
                classify(p.replicas, p.isr, p.leader, live, adding_replicas=p.adding_replicas).stuck_under_replicated
                for t in described.topics
                for p in t.partitions
            ):
                return
        except ClientError:
            pass  # the next poll will tell
        await asyncio.sleep(0.25)


async def _wait_moves_done(client: ControllerClient, timeout_s: float) -> None:
    """Until ListPartitionReassignments is empty, or ``timeout_s``: a move that never completes is
    then left to the checks (it shows in the counts as in flight at the end)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not (await client.list_partition_reassignments()).topics:
                return
        except ClientError:
            pass  # the next poll will tell
        await asyncio.sleep(0.25)


async def _record_tape(tape: CommittedTape) -> None:
    while True:
        await asyncio.to_thread(tape.poll)
        await asyncio.sleep(TAPE_INTERVAL_S)


async def _watch_processes(cluster: ChaosCluster, timeline: Timeline, crashes: list[str]) -> None:
    while True:
        await asyncio.sleep(WATCH_INTERVAL_S)
        for what in cluster.unexpected_exits():
            if what not in crashes:
                crashes.append(what)
                timeline.add("fault", "crash", f"{what} exited on its own")


def _node_logs(logs: Path, node_ids: Sequence[int]) -> dict[int, str]:
    """Each node's whole log (every incarnation appends to one file)."""
    texts = {}
    for node_id in node_ids:
        path = logs / f"node-{node_id}.log"
        texts[node_id] = path.read_text(errors="replace") if path.exists() else ""
    return texts


def _storage_check(damages: list[DiskDamage], texts: dict[int, str]) -> Check:
    """``storage-faults-repaired``: every committed batch a storage fault damaged was repaired from
    the quorum by its node (or replaced by a snapshot it installed), as its log says."""
    verdict = judge_repairs(damages, texts)
    return Check(
        "storage-faults-repaired",
        not verdict.missing,
        "not repaired: " + "; ".join(verdict.missing[:10])
        if verdict.missing
        else f"{len(damages)} damaged committed batches, with no operator: {verdict.repaired} repaired in place from "
        f"the quorum, {verdict.replaced} replaced by a snapshot installed from the leader",
    )


def _state_file_checks(damages: list[StateFileDamage], texts: dict[int, str]) -> list[Check]:
    """``state-files-recovered``: every damaged quorum-state or checkpoint was noticed and set
    aside by its node's next start (the run's other checks hold it to rejoining and losing
    nothing); ``one-vote-per-epoch``: no node recorded votes for two candidates in one epoch."""
    missing = unnoticed(damages, texts)
    doubled = double_votes(texts)
    return [
        Check(
            "state-files-recovered",
            not missing,
            "not noticed on start: " + "; ".join(missing[:10])
            if missing
            else f"{len(damages)} damaged state files, each set aside by its node's next start with no operator",
        ),
        Check(
            "one-vote-per-epoch",
            not doubled,
            "; ".join(doubled[:10])
            if doubled
            else f"{votes_recorded(texts)} votes recorded by the nodes, never two candidates in one epoch",
        ),
    ]


def _snapshot_check(damages: list[SnapshotDamage], texts: dict[int, str]) -> Check:
    """``snapshots-recovered``: every damaged snapshot was set aside by its node's next start (the
    run's other checks hold it to rejoining and losing nothing)."""
    missing = unnoticed_snapshots(damages, texts)
    return Check(
        "snapshots-recovered",
        not missing,
        "not noticed on start: " + "; ".join(missing[:10])
        if missing
        else f"{len(damages)} damaged snapshots, each set aside by its node's next start with no operator",
    )


def _tracebacks(logs: Path) -> dict[str, int]:
    """Tracebacks per process log: reported, not judged (a server may log an error it handled)."""
    return {path.name: path.read_text(errors="replace").count("Traceback") for path in sorted(logs.glob("*.log"))}


# Node log events that show a fault reached the code path it targets (counted, not judged).
EXERCISED_EVENTS = {
    "snapshots_taken": '"event": "snapshot taken"',
    "snapshots_installed_from_leader": '"event": "installed snapshot from the leader"',
    "torn_tails_truncated": '"event": "truncating a torn write at the log tail"',
    "damaged_batches_repaired": f'"event": "{REPAIRED_EVENT}"',
}


def _exercised(logs: Path) -> dict[str, int]:
    texts = [path.read_text(errors="replace") for path in sorted(logs.glob("node-*.log"))]
    return {name: sum(text.count(marker) for text in texts) for name, marker in EXERCISED_EVENTS.items()}


def _spark_verify(data_dir: str, history: str, checks: list[Check]) -> dict[str, Any]:
    from raftmeta.jobs.session import build_session
    from raftmeta.jobs.verify import run_verify

    began = time.monotonic()
    spark = build_session("local[2]", app_name="raftmeta-chaos", driver_memory="1g")
    try:
        result = run_verify(spark, data_dir, history=history)
    finally:
        spark.stop()
    checks.extend(Check(f"spark:{c.name}", c.passed, c.detail) for c in result.checks)
    return {"passed": result.passed, "seconds": round(time.monotonic() - began, 1), "figures": result.figures}
