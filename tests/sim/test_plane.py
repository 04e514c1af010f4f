"""The whole metadata plane under simulation (raftmeta.sim.plane): QuorumControllers, a broker fleet
and clients under the seeded faults, with the client history, partition states and reads checked."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.controller.quorum import QuorumController, SnapshotDue
from raftmeta.raft import SnapshotImage
from raftmeta.sim import FAULT_KINDS, Simulation, draw_params, run_seeds
from raftmeta.sim.oracle import RuleOracle
from raftmeta.sim.plane import PlaneSimulation
from raftmeta.sim.runner import Summary
from raftmeta.storage.snapshot import SnapshotId, decode_snapshot

ALL = frozenset(FAULT_KINDS)
PLANE_SEEDS = 100
STEPS = 3000
# The seeds that catch a leader accepting a Fetch of an older epoch: the first does so past the
# CI budget (test_a_fetch_of_an_older_epoch_accepted_is_caught).
ACCEPT_STALE_FETCH_SEEDS = 110


def planted(bug: str, kinds: frozenset[str] = ALL, *, proof: bool = True, seeds: int = PLANE_SEEDS) -> Summary:
    """The CI seed budget (or ``seeds``) with one planted bug of the whole plane, up to its first
    violation (``proof=False``: without the read-index proof check, to show what the histories
    catch)."""
    if not proof:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Simulation, "_check_read_index_proof", lambda *args: None)
            return planted(bug, kinds, seeds=seeds)
    return run_seeds(range(seeds), steps=STEPS, voters=3, kinds=kinds, bug=bug, plane=True, stop_on_violation=True)


@pytest.mark.sim
@pytest.mark.parametrize("voters", [3, 5])
def test_plane_seed_budget_finds_no_violation(voters: int) -> None:
    summary = run_seeds(range(PLANE_SEEDS), steps=STEPS, voters=voters, kinds=ALL, plane=True)
    assert summary.runs == PLANE_SEEDS
    assert summary.violations == [], summary.violations[:3]
    # Real work: creates acknowledged, partition states replayed, reads checked, on every seed.
    assert summary.acknowledged > 20 * PLANE_SEEDS
    for check in ("6-client-history", "7-partition-states", "9-linearizable-reads", "10-linearizable-history"):
        assert summary.checks.get(check, 0) > PLANE_SEEDS, (check, summary.checks)
    # Brokers leave and return in several turns (the simulator's small turn budget), under faults.
    assert summary.checks.get("controller-work-finished", 0) > PLANE_SEEDS, summary.checks
    assert summary.faults.get("kill", 0) > 0 and summary.faults.get("pause", 0) > 0


@pytest.mark.sim
@pytest.mark.parametrize(
    "seed", [5542, 100494, 100023, 100915, 130294, 100942, 140280, 143518, 143766, 148767, 148266, 148820]
)
def test_seeds_that_once_found_a_violation_stay_clean(seed: int) -> None:
    """Seed 5542 (of a 600-seed run): a leader deposed without knowing it refused a
    CreatePartitions from its stale image, after the topic was created elsewhere. Refusals now
    wait for a read-index round, as reads do. Seed 100494 (of the first plane soak): the
    read-index proof check judged a read by the voter set after an AddRaftVoter that the same
    leader appended just after releasing it (a single voter, whose own count was a majority):
    the check now judges a read also by the voter sets in force since the core last handed out
    a Ready. Seed 100023 (of a plane soak with storage faults): all five brokers restarted
    during the faults and could register again only once their old sessions ran out after the
    heal; fencing and unfencing them in turns of 8 partitions and 3 changes over 883 partitions
    took ~1,200 commits, past the liveness budget. The plane's turn budget now grows with the
    image (``TURNS_PER_PASS``). Seed 100915 (of the soak after damaged ranges): a voter
    acknowledged a batch, crashed, and its disk rotted a run of batches into one damaged range;
    the majority-persisted check counted its copy only at the batch's own base offset and found
    2 of 4 holders. A voter's copy inside a damaged range of the batch's epoch counts, as a
    damaged single batch's always did (``SimDisk.durably_holds``). Seed 130294 (of the soak from
    130000): of two voters, the leader's damaged batch was in the other's snapshot only; the leader
    resigned before that voter had its log's end, refused it every vote and won again, 34 epochs
    without a commit. It now resigns once such a voter can win the election
    (``RaftCore._hand_over_to_a_snapshot_holder``). Seed 100942 (of 2 voters): the leader removed
    itself (RemoveRaftVoter), the other voter took the change and, alone a majority of the set it
    made, elected itself when the leader was cut off with a slow clock; the removed leader, still
    leading in its own mind, confirmed reads by its own echo and missed a create acknowledged by the
    new one (``9-linearizable-reads``). A leader that removed itself no longer counts itself toward
    a read (``RaftCore._maybe_release_reads``), and the read-index proof check no longer counts it
    either (it reports that seed's first such read, before the fix). Seed 140280 (of a 10,000-seed
    soak, 5 voters): the leader confirmed a read by its own echo and those of two voters (3 of 5),
    released it, and in the same drive appended its own removal (a RemoveRaftVoter it held); the
    proof check judged the read by the set of 4 without the leader and found 2 echoes. The check
    now judges a read by each voter set the leader was seen to have while it waited, and passes
    it if the echoes are a majority of any of them (the leader counted only in a set it is in).
    Seeds 143518 and 143766 (the same soak, the fault model's): the operator removed the only other
    voter while flush_race had the leader cut off; alone a majority, the leader committed its tail,
    and flush_race then lost its write, the only copy of committed batches (a liveness stall, and
    a leader elected without the batch). Removals down to one voter now wait whenever a fault kind
    damages disks, flush_race's lost write included (``Simulation._may_remove_voter``). Seed
    148767 (the same soak, one voter and an observer): the leader counted the observer's first Fetch
    of its epoch, 7,763 offsets behind, as caught up, so AddRaftVoter took it in; the two-voter
    quorum then committed nothing while it caught up (``liveness``). As in Kafka, a first Fetch is
    caught up only at the leader's log end (``RaftCore._handle_fetch_request``). Seeds 148266 and
    148820 (the same soak, ``3-leader-completeness``): batches committed by voters {1, 2, 3} on two
    of them; then one of those two took a change removing the other holder (uncommitted), lost its
    high-watermark checkpoint and had the batches damaged; leading the set of two its log ended
    in, it asked only the other member, which lacked them, and dropped them as uncommitted. A
    damaged batch is now judged by every voter set that can have committed it, the set in force
    when it was written included, and its members are asked (``RaftCore._repair_impossible``)."""
    summary = run_seeds([seed], steps=STEPS, voters=None, kinds=ALL, plane=True)  # the seed picks, as it did
    assert summary.violations == [], summary.violations
    assert summary.checks.get("10-linearizable-history", 0) > 0, summary.checks


@pytest.mark.sim
def test_answering_a_write_before_it_commits_is_caught() -> None:
    """The planted bug (QuorumControllerConfig.unsafe_ack_before_commit): a create answered when
    proposed is lost with its leader, or missed by a read -- within the first seeds."""
    summary = planted("ack_before_commit")
    assert summary.violations, "unsafe_ack_before_commit went unnoticed"
    violation = summary.violations[0]
    assert violation["seed"] < 20
    assert violation["invariant"] in ("9-linearizable-reads", "6-acknowledged-creates")
    assert "--plane" in violation["command"]


def test_snapshots_are_the_nodes_own_taken_by_its_policy_and_installed_by_followers() -> None:
    """The plane's nodes snapshot when the QuorumController's policy says, through the node's
    encoder: the bytes are a snapshot file the node's storage accepts, and a follower that fell
    behind installs one (FetchSnapshot) and carries on from its image."""
    taken: list[SnapshotImage] = []
    write = PlaneSimulation._write_snapshot

    def recorded(self: PlaneSimulation, qc: QuorumController, due: SnapshotDue) -> None:
        write(self, qc, due)
        snapshot = qc.core.snapshot
        assert snapshot is not None and snapshot.end_offset == due.end_offset
        taken.append(snapshot)

    installed = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PlaneSimulation, "_write_snapshot", recorded)
        for seed in range(20):
            result = PlaneSimulation(draw_params(seed, voters=3, allowed_faults=ALL)).run(STEPS)
            assert result.violation is None, (seed, result.violation)
            installed += result.snapshots_installed
            if installed and taken:
                break
    assert taken and installed, (len(taken), installed)
    for image in taken[:5]:
        snapshot = decode_snapshot(Path("sim"), image.data, SnapshotId(image.end_offset, image.epoch))
        assert snapshot.records, "a snapshot of an image with brokers and topics holds records"


def test_the_whole_plane_is_the_default_and_the_cores_alone_a_flag() -> None:
    args = ["sim", "--seed", "7", "--steps", "300", "--voters", "3", "--output", "json"]
    plane = json.loads(CliRunner().invoke(cli, args).output)
    cores = json.loads(CliRunner().invoke(cli, [*args, "--cores"]).output)
    assert plane["checks"].get("7-partition-states", 0) > 0, plane["checks"]
    assert "7-partition-states" not in cores["checks"], cores["checks"]


def test_a_plane_bug_needs_the_plane() -> None:
    outcome = CliRunner().invoke(cli, ["sim", "--cores", "--seed", "1", "--bug", "ack_before_commit"])
    assert outcome.exit_code == 2 and "--plane is the default" in outcome.output


@pytest.mark.sim
@pytest.mark.parametrize("bug", ["no_isr_expansion", "no_auto_rebalance"])
def test_a_cluster_that_does_not_heal_is_caught(bug: str) -> None:
    """L2: after the faults heal, every partition's ISR is its full replica set and its leader the
    preferred replica. A broker that failed and recovered stays out of its ISRs when partition
    leaders never ask for it back; it stays a follower when the controller never rebalances."""
    summary = planted(bug)
    assert summary.violations, f"{bug} went unnoticed"
    violation = summary.violations[0]
    assert violation["seed"] < 20
    assert violation["invariant"] == "liveness"
    assert "unhealthy partitions" in violation["detail"]


@pytest.mark.sim
def test_a_controller_fencing_brokers_on_stale_heartbeat_times_is_caught() -> None:
    """broker-sessions: a broker fenced for a missed session had no heartbeat handled by that
    controller for a whole session since its activation. The planted bug (the node's heartbeat
    times survive from an earlier leadership) fenced every broker on a real quorum once."""
    summary = planted("stale_broker_sessions")
    assert summary.violations, "stale broker sessions went unnoticed"
    assert summary.violations[0]["invariant"] == "broker-sessions"


@pytest.mark.sim
def test_a_partition_change_without_a_new_partition_epoch_is_caught() -> None:
    """Every partition change carries the next partition epoch (what AlterPartition's stale-epoch
    refusal rests on). The planted bug writes the old one: the oracle's epochs rule refuses the
    committed record before any node's replay (invariant 7) does."""
    summary = planted("stale_partition_epoch")
    assert summary.violations, "a partition change without a new partition epoch went unnoticed"
    violation = summary.violations[0]
    assert violation["seed"] < 20
    assert violation["invariant"] == "rule-epochs"
    assert "expected leader epoch" in violation["detail"]


@pytest.mark.sim
def test_a_read_served_without_the_read_index_round_is_caught() -> None:
    """Faults.stale_reads: a leader answers a read from its image without asking a majority. A
    leader whose machine was suspended wakes with its clock behind (its check quorum has not run
    out) and answers a read that waited in its inbox, missing the writes the next leader
    acknowledged meanwhile. In the all-faults mix suspend is one kind of many, so the budget runs
    the fault the rule is about. The read-index proof check, which catches it at once, is off: this
    is what the oracle and the clients' reads see. The oracle's read-index rule sees such a read
    even when it missed nothing a client had been told of; rule 9 when it did."""
    summary = planted("stale_reads", kinds=frozenset({"suspend"}), proof=False)
    assert summary.violations, "a read served without the read-index round went unnoticed"
    violation = summary.violations[0]
    assert violation["seed"] < 20
    assert violation["invariant"] in ("rule-read-index", "9-linearizable-reads")


@pytest.mark.sim
def test_a_stale_read_is_caught_in_the_all_faults_mix() -> None:
    """The same switch among every fault. The read-index proof is checked from the network's side
    (a read released only once a majority echoed its barrier in Fetches of the leader's epoch): the
    switch breaks it on the first read. Before that check and clock_skew no seed of the budget
    caught it once a quarter of the work contended on three names."""
    summary = planted("stale_reads")
    assert summary.violations, "a read served without the read-index round went unnoticed"
    violation = summary.violations[0]
    assert violation["seed"] < 5
    assert violation["invariant"] == "read-index-proof"


@pytest.mark.sim
def test_a_stale_read_is_caught_by_the_history_alone_under_clock_skew() -> None:
    """Without the read-index proof, the histories catch the stale read too: a leader whose clock
    runs slow (clock_skew), cut off from its peers while its clients still reach it, leads in its
    own mind after the others elected a new leader (its check quorum runs out late) and answers
    reads from its image, missing what the new leader acknowledged."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RuleOracle, "arrived", lambda *args: None)  # the oracle's read-index rule off too
        summary = planted("stale_reads", kinds=frozenset({"clock_skew"}), proof=False)
    assert summary.violations, "a read served without the read-index round went unnoticed"
    violation = summary.violations[0]
    assert violation["seed"] < 30
    assert violation["invariant"] in ("9-linearizable-reads", "10-linearizable-history")


@pytest.mark.sim
def test_a_fetch_of_an_older_epoch_accepted_is_caught() -> None:
    """Faults.accept_stale_fetch: a leader accepts a Fetch of an older epoch, and its read-barrier
    echo (from this node's earlier leadership) confirms a read of this one. epoch_delay holds a
    Fetch until the node it is for leads a later epoch; the read-index proof sees the read
    released without a majority's echo in this epoch."""
    # Seed 106 since the plane takes the node's leader-loss path (a crashed leader's followers
    # elect at once: the mix's draws changed), seed 44 before, 8 before the figure8 fault kind.
    summary = planted("accept_stale_fetch", seeds=ACCEPT_STALE_FETCH_SEEDS)
    assert summary.violations, "a Fetch of an older epoch accepted went unnoticed"
    violation = summary.violations[0]
    assert violation["seed"] < ACCEPT_STALE_FETCH_SEEDS
    assert violation["invariant"] == "read-index-proof"


@pytest.mark.sim
def test_figure_8_commit_by_count_is_caught_by_the_plane() -> None:
    """Raft's figure 8 by its leader half alone (Faults.commit_old_epoch_by_count), which the plane
    first caught at seed 190 before the figure8 fault kind: now in the first seeds of the budget,
    whose runs without the switch are clean."""
    summary = planted("commit_old_epoch_by_count")
    assert summary.violations, "a commit by count went unnoticed"
    violation = summary.violations[0]
    assert violation["seed"] < 10
    assert violation["invariant"] == "3-leader-completeness"
    clean = run_seeds(range(violation["seed"] + 1), steps=STEPS, voters=3, kinds=ALL, plane=True)
    assert clean.violations == [], clean.violations


@pytest.mark.sim
def test_a_stale_read_fails_the_history_check_with_its_timeline(tmp_path: Path) -> None:
    """Invariant 10: the linearizability checker refuses the same run's client history, and the
    command writes the failing window's timeline with the command that replays it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Simulation, "_check_read_index_proof", lambda *args: None)
        seed = next(
            seed
            for seed in range(PLANE_SEEDS)
            for violation in run_seeds(
                [seed], steps=STEPS, voters=3, kinds=frozenset({"suspend"}), bug="stale_reads", plane=True
            ).violations
            if violation["invariant"] in ("9-linearizable-reads", "10-linearizable-history")
        )  # the first seed whose stale read a client could see
    args = ["--seed", str(seed), "--steps", str(STEPS), "--plane", "--voters", "3", "--faults", "suspend"]
    outcome = CliRunner().invoke(cli, ["sim", *args, "--bug", "stale_reads", "--report-dir", str(tmp_path)])
    assert outcome.exit_code == 1, outcome.output
    page = (tmp_path / f"sim-seed-{seed}-timeline.html").read_text()
    assert f"timeline of the failing window: {tmp_path}" in outcome.output
    assert "is not linearizable" in page
    assert 'class="unplaceable blocked"' in page
    assert re.search(r'<tr class="unplaceable"><td>\d+</td><td>\d+</td><td>describe -&gt; ', page)  # the stale read
    assert f"raftmeta sim --seed {seed} --steps {STEPS} --plane --voters 3 --faults suspend --bug stale_reads" in page
    # Without the bug the same seed passes, and writes nothing.
    clean = CliRunner().invoke(cli, ["sim", *args, "--report-dir", str(tmp_path / "clean")])
    assert clean.exit_code == 0, clean.output
    assert not (tmp_path / "clean").exists()


@pytest.mark.sim
def test_a_reused_request_id_is_refused_in_every_seed_that_reuses_one() -> None:
    """The clients reuse the id of an answered write for new work of the same method: the
    controller refuses it, naming the id, and the run stays clean. (A controller that answers a
    reused id with the first request's outcome is the oracle's request_digest_* switches.)"""
    summary = run_seeds(range(5), steps=STEPS, voters=3, kinds=ALL, plane=True)
    assert summary.violations == [], summary.violations[:3]
    assert summary.checks.get("request-id-reuse-refused", 0) >= 5, summary.checks
