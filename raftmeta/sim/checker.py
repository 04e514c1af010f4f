"""The invariants of DESIGN.md §9 that concern consensus, checked as the simulation runs.

Per event (only for the node the event touched, so the check is O(1) amortized):
1. at most one leader per epoch;
2. log matching: a batch with a given (base offset, epoch) has the same bytes and the same
   predecessor everywhere (by induction: equal (offset, epoch) implies equal prefixes); within
   a log, offsets are contiguous and epochs non-decreasing;
3. a node never truncates below its high watermark, and a new leader holds every committed batch;
4. every node commits the same batch at each offset;
5. the high watermark never decreases on a running node;
voters: a leader appends a voter change only when the one before it is committed, and each
change adds or removes exactly one voter (KIP-853's one change at a time); the high watermark
is on a majority of the voter set in force (3-majority-persisted).
At the end (:meth:`check_final`): 3 and 4 over every node's whole log, and 6 (acknowledged
proposals committed exactly once, rejected ones absent).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftmeta.raft import Entry, RaftCore
from raftmeta.raft.voters import voters_in_batch
from raftmeta.records.codec import iter_batches, split_records

INVARIANTS = (
    "1-single-leader",
    "2-log-matching",
    "3-committed-never-truncated",
    "3-leader-completeness",
    "3-majority-persisted",
    "4-committed-prefixes-identical",
    "5-hw-monotonic",
    "6-exactly-once",
    "voters-one-change-at-a-time",
)


class InvariantViolation(Exception):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


@dataclass(slots=True)
class CommittedBatch:
    epoch: int
    next_offset: int
    data: bytes


Key = tuple[int, int]


class Checker:
    def __init__(self) -> None:
        # How many times each invariant was checked (``raftmeta sim`` prints them: a check that
        # never runs cannot fail).
        self.checks: dict[str, int] = dict.fromkeys(INVARIANTS, 0)
        self.leaders: dict[int, int] = {}
        # (base offset, epoch) -> (bytes, predecessor key): log matching (invariant 2).
        self.batches: dict[Key, tuple[bytes, Key | None]] = {}
        # base offset -> the committed batch there (invariants 3, 4).
        self.committed: dict[int, CommittedBatch] = {}
        self.committed_end = 0
        # epoch -> (the highest HW a leader of that epoch reached, the batch just below it)
        self.commits_by_epoch: dict[int, tuple[int, Key]] = {}

    # -- invariant 1 -----------------------------------------------------------------------------
    def on_leader(self, node_id: int, epoch: int) -> None:
        self.checks["1-single-leader"] += 1
        other = self.leaders.setdefault(epoch, node_id)
        if other != node_id:
            raise InvariantViolation("1-single-leader", f"nodes {other} and {node_id} both lead epoch {epoch}")

    def on_leader_commit(self, epoch: int, high_watermark: int, last: Entry) -> None:
        """A leader of ``epoch`` moved its HW: ``last`` (the batch below it) is committed in ``epoch``."""
        known = self.commits_by_epoch.get(epoch)
        if known is None or last.next_offset > known[0]:
            self.commits_by_epoch[epoch] = (high_watermark, (last.base_offset, last.epoch))

    def check_leader_has_committed(self, node_id: int, core: RaftCore) -> None:
        """Raft's Leader Completeness: a batch committed in epoch E is in the log of every leader
        of an epoch > E (a leader of an older epoch may still be around, unaware)."""
        self.checks["3-leader-completeness"] += 1
        best: tuple[int, Key] | None = None
        for epoch, commit in self.commits_by_epoch.items():
            if epoch < core.epoch and (best is None or commit[0] > best[0]):
                best = commit
        if best is None:
            return
        key = best[1]
        if key[0] < core.log.start_offset:
            return  # inside its snapshot, which only ever holds committed batches
        held = core.log.entry_covering(key[0])
        # At its base, or inside a damaged range of its epoch (several batches whose bytes this
        # leader repairs before it serves them).
        found = (
            held.epoch
            if held is not None and (held.base_offset == key[0] or held.base_offset in core.damaged)
            else None
        )
        if found != key[1]:
            raise InvariantViolation(
                "3-leader-completeness",
                f"node {node_id} leads epoch {core.epoch} without committed batch {key} (has epoch {found})",
            )

    def check_majority_persisted(self, leader_id: int, entry: Entry, holders: int, voters: int) -> None:
        """Kafka's MajorityReachedHighWatermark: the batch just below a leader's new HW is on the
        disks (flushed) of a majority of voters -- otherwise a crash could lose it."""
        self.checks["3-majority-persisted"] += 1
        if holders < voters // 2 + 1:
            raise InvariantViolation(
                "3-majority-persisted",
                f"leader {leader_id} commits ({entry.base_offset}, {entry.epoch}), "
                f"flushed on only {holders} of {voters} voters",
            )

    def check_voter_change(self, leader_id: int, core: RaftCore, entry: Entry) -> None:
        """A leader appended ``entry``, a voter change: the change before it in its log is
        committed, and the two sets differ by exactly one voter."""
        self.checks["voters-one-change-at-a-time"] += 1
        new = voters_in_batch(entry.data)
        assert new is not None
        history = core.voter_history
        previous = history.change_before(entry.base_offset)
        if previous >= core.high_watermark:
            raise InvariantViolation(
                "voters-one-change-at-a-time",
                f"leader {leader_id} appends a voter change at {entry.base_offset} while the one at {previous} "
                f"is uncommitted (HW {core.high_watermark})",
            )
        old = set(history.at(entry.base_offset).ids)
        # One voter added or removed, or none: the same voters, one with new listeners (UpdateRaftVoter).
        if len(old ^ set(new.ids)) > 1:
            raise InvariantViolation(
                "voters-one-change-at-a-time",
                f"leader {leader_id} changes the voters from {sorted(old)} to {list(new.ids)} at {entry.base_offset}",
            )

    # -- invariant 2 -----------------------------------------------------------------------------
    def on_append(self, node_id: int, previous: Entry | None, entry: Entry) -> None:
        self.checks["2-log-matching"] += 1
        prev_key: Key | None = None
        if previous is not None:
            if previous.next_offset != entry.base_offset:
                raise InvariantViolation(
                    "2-log-matching",
                    f"node {node_id}: batch at {entry.base_offset} after one ending {previous.next_offset}",
                )
            if entry.epoch < previous.epoch:
                raise InvariantViolation(
                    "2-log-matching",
                    f"node {node_id}: epoch {entry.epoch} after {previous.epoch} at {entry.base_offset}",
                )
            prev_key = (previous.base_offset, previous.epoch)
        key = (entry.base_offset, entry.epoch)
        seen = self.batches.get(key)
        if seen is None:
            self.batches[key] = (entry.data, prev_key)
            return
        data, seen_prev = seen
        if data != entry.data:
            raise InvariantViolation("2-log-matching", f"node {node_id}: batch {key} differs from another node's")
        if previous is not None and seen_prev is not None and seen_prev != prev_key:
            raise InvariantViolation(
                "2-log-matching", f"node {node_id}: batch {key} follows {prev_key}, elsewhere {seen_prev}"
            )

    def on_repair(self, node_id: int, entry: Entry) -> None:
        """A node put ``entry`` in place of a damaged batch: it must be the batch every node
        appended in that slot (a repair from a damaged copy is not)."""
        self.checks["2-log-matching"] += 1
        seen = self.batches.get((entry.base_offset, entry.epoch))
        if seen is None or seen[0] != entry.data:
            raise InvariantViolation(
                "2-log-matching",
                f"node {node_id} repairs batch ({entry.base_offset}, {entry.epoch}) with bytes no node appended",
            )

    # -- invariants 3 and 4 ----------------------------------------------------------------------
    def on_truncate(self, node_id: int, offset: int, high_watermark: int) -> None:
        self.checks["3-committed-never-truncated"] += 1
        if offset < high_watermark:
            raise InvariantViolation(
                "3-committed-never-truncated", f"node {node_id} truncates to {offset} below its HW {high_watermark}"
            )

    def on_commit(self, node_id: int, entry: Entry) -> None:
        self.checks["4-committed-prefixes-identical"] += 1
        known = self.committed.get(entry.base_offset)
        if known is None:
            self.committed[entry.base_offset] = CommittedBatch(entry.epoch, entry.next_offset, entry.data)
            self.committed_end = max(self.committed_end, entry.next_offset)
            return
        if known.epoch != entry.epoch or known.data != entry.data:
            raise InvariantViolation(
                "4-committed-prefixes-identical",
                f"node {node_id} commits epoch {entry.epoch} at {entry.base_offset}, another node epoch {known.epoch}",
            )

    def on_commit_snapshot(self, node_id: int, data: bytes) -> list[Entry]:
        entries = [Entry.from_batch(b) for b in iter_batches(data)]
        for entry in entries:
            self.on_commit(node_id, entry)
        return entries

    # -- end of run ------------------------------------------------------------------------------
    def check_final(
        self,
        cores: dict[int, RaftCore],
        acknowledged: set[int],
        rejected: set[int],
    ) -> None:
        # 4: every node's log agrees with the committed log below its high watermark.
        for node_id, core in cores.items():
            for entry in core.log.slice(core.log.start_offset, min(core.high_watermark, core.log.end_offset)):
                if entry.base_offset in core.damaged:
                    continue  # known damaged, never applied (an observer need not have repaired yet)
                known = self.committed.get(entry.base_offset)
                if known is None or known.epoch != entry.epoch or known.data != entry.data:
                    raise InvariantViolation(
                        "4-committed-prefixes-identical",
                        f"node {node_id} has batch ({entry.base_offset}, {entry.epoch}) below its HW, not committed",
                    )
        # 3: the committed log is contiguous from 0.
        offset = 0
        ids: dict[int, int] = {}
        while offset < self.committed_end:
            batch = self.committed.get(offset)
            if batch is None:
                raise InvariantViolation("3-committed-never-truncated", f"committed log has a hole at {offset}")
            header = next(iter_batches(batch.data)).header
            for record in split_records(batch.data, header):
                if record[:1] == b"c":
                    pid = int.from_bytes(record[1:9], "big")
                    ids[pid] = ids.get(pid, 0) + 1
            offset = batch.next_offset
        # 6: acknowledged exactly once, rejected never, nothing twice.
        self.checks["6-exactly-once"] += len(ids) + len(acknowledged - ids.keys())
        for pid, count in ids.items():
            if count > 1:
                raise InvariantViolation("6-exactly-once", f"proposal {pid} committed {count} times")
            if pid in rejected:
                raise InvariantViolation("6-exactly-once", f"rejected proposal {pid} is committed")
        missing = sorted(acknowledged - ids.keys())
        if missing:
            raise InvariantViolation(
                "6-exactly-once", f"{len(missing)} acknowledged proposals not committed, e.g. {missing[:5]}"
            )
