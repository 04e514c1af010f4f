"""The voter-change checks of a chaos run (KIP-853), from the ``VotersRecord`` control records of
the committed log.

The committed voter history is read from the tape (every committed batch copied during the run,
:mod:`raftmeta.chaos.tape`) and from every node's files below its high watermark; it starts from
the bootstrap voters. Checked:

- ``voter-changes-one-at-a-time``: each committed voter set differs from the one before it (the
  bootstrap set for the first) by exactly one voter. The leader appends a change only once the
  previous one committed, so two consecutive sets in the log -- committed or not -- always differ
  by one; the committed history is where every leader's changes end up. A pair whose records have
  a tape gap between them (intermediate records unseen) is counted, not judged.
- ``acknowledged-voter-changes-committed``: every AddRaftVoter / RemoveRaftVoter answered ``NONE``
  is a change of the history, in the order they were acknowledged (the nemesis makes one at a
  time), below every node's high watermark; a missing one is a lost acknowledged operation. Past
  a tape gap (records nobody kept, a snapshot compacted them between two reads of the tape) the
  changes cannot be told apart -- three changes can net to one -- so an acknowledged change that
  is found only past a gap, or not found with a gap ahead, is counted as unverifiable. Every
  change in the history was requested by an attempt that was not refused (acknowledged, or with
  no answer).
- ``voter-sets-agree``: every node's own files say the same: its retained ``VotersRecord`` s below
  its high watermark are the history's at those offsets, its newest snapshot carries the set in
  force at the snapshot's end, and its committed set at the end is the history's last set.
- ``final-voters-match-log``: the voters the leader's DescribeQuorum names after convergence are
  the last committed set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftmeta.chaos.membership import VoterRequest
from raftmeta.chaos.tape import LOG_DIR_NAME
from raftmeta.jobs.checks import Check, listed
from raftmeta.raft.voters import voters_in_batch, voters_in_data
from raftmeta.records import codec
from raftmeta.storage.errors import StorageError
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.storage.snapshot import SNAPSHOT_SUFFIX, parse_snapshot_name

Voters = tuple[int, ...]


@dataclass
class NodeVoters:
    """What one stopped node's files say about the voter sets below its high watermark."""

    node_id: int
    high_watermark: int
    snapshot_end: int = 0  # 0: no snapshot
    snapshot_voters: Voters | None = None  # the set the newest snapshot carries (None: none there)
    log_start: int = 0
    records: dict[int, Voters] = field(default_factory=dict)  # batch base offset -> set, below the HW


def read_node_voters(node_id: int, node_dir: Path) -> NodeVoters:
    try:
        high_watermark = read_high_watermark(node_dir)
    except (StorageError, OSError):
        high_watermark = 0
    found = NodeVoters(node_id, high_watermark)
    log_dir = node_dir / LOG_DIR_NAME
    snapshots = sorted(
        (snapshot_id, path)
        for path in log_dir.glob(f"*{SNAPSHOT_SUFFIX}")
        if (snapshot_id := parse_snapshot_name(path.name)) is not None
    )
    if snapshots:
        snapshot_id, path = snapshots[-1]
        found.snapshot_end = snapshot_id.offset
        carried = voters_in_data(path.read_bytes())
        found.snapshot_voters = carried.ids if carried is not None else None
    segments = sorted(log_dir.glob("*.log"))
    found.log_start = int(segments[0].name.removesuffix(".log")) if segments else found.snapshot_end
    for segment in segments:
        data = segment.read_bytes()
        headers, _, _ = codec.scan_valid_prefix(data)  # a torn tail is above the HW anyway
        position = 0
        for header in headers:
            if header.next_offset <= high_watermark:
                voters = voters_in_batch(data[position : position + header.size_bytes])
                if voters is not None:
                    found.records[header.base_offset] = voters.ids
            position += header.size_bytes
    return found


def committed_voter_records(batches: dict[int, bytes]) -> dict[int, Voters]:
    """The sets the tape's committed batches carry, by batch base offset."""
    out = {}
    for base, data in batches.items():
        voters = voters_in_batch(data)
        if voters is not None:
            out[base] = voters.ids
    return out


@dataclass
class VoterVerdict:
    checks: list[Check] = field(default_factory=list)
    lost_acknowledged: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Transition:
    offset: int
    kind: str  # add, remove, or "other" (not a one-voter change)
    node: int  # the voter added or removed (-1 for "other")
    voters: Voters


def _transitions(
    bootstrap: Voters, records: Mapping[int, Voters], gaps: Sequence[tuple[int, int]]
) -> list[_Transition]:
    out = []
    before = set(bootstrap)
    previous = -1
    for offset in sorted(records):
        after = set(records[offset])
        added, removed = after - before, before - after
        if _gap_between(gaps, previous, offset):
            # Records the tape never saw lie between: any number of changes, whatever the two sets
            # look like (three changes can net to one).
            out.append(_Transition(offset, "gap", -1, records[offset]))
        elif len(added) == 1 and not removed:
            out.append(_Transition(offset, "add", next(iter(added)), records[offset]))
        elif len(removed) == 1 and not added:
            out.append(_Transition(offset, "remove", next(iter(removed)), records[offset]))
        else:
            out.append(_Transition(offset, "other", -1, records[offset]))
        before = after
        previous = offset
    return out


def _gap_between(gaps: Sequence[tuple[int, int]], low: int, high: int) -> bool:
    """Whether a tape gap overlaps the offsets strictly between ``low`` and ``high``."""
    return any(start < high and end > low + 1 for start, end in gaps)


def check_voters(
    requests: Sequence[VoterRequest],
    bootstrap: Sequence[int],
    tape_records: Mapping[int, Voters],
    tape_gaps: Sequence[tuple[int, int]],
    nodes: Sequence[NodeVoters],
    final_voters: Sequence[int] | None,
) -> VoterVerdict:
    """``final_voters``: DescribeQuorum's voters after convergence (None: the run did not converge)."""
    verdict = VoterVerdict()
    base = tuple(sorted(bootstrap))
    history = dict(tape_records)
    disagreements: list[str] = []
    for node in nodes:
        for offset, voters in node.records.items():
            known = history.setdefault(offset, voters)
            if known != voters:
                disagreements.append(
                    f"node {node.node_id} has voters {list(voters)} at {offset}, the tape {list(known)}"
                )
    transitions = _transitions(base, history, tape_gaps)
    last = transitions[-1].voters if transitions else base

    # One change at a time.
    wide: list[str] = []
    across_gaps = 0
    for step in transitions:
        if step.kind == "gap":
            across_gaps += 1
        elif step.kind == "other":
            wide.append(f"the voter set at offset {step.offset} is {list(step.voters)}: more than one change")
    verdict.checks.append(
        Check(
            "voter-changes-one-at-a-time",
            not wide,
            listed(wide)
            if wide
            else f"{len(transitions)} committed voter changes from {list(base)} to {list(last)}, each adding or "
            f"removing one voter ({across_gaps} across a tape gap, not judged)",
        )
    )

    # Acknowledged changes in the history, in order, below every node's high watermark.
    acknowledged = sorted((r for r in requests if r.outcome == "ok"), key=lambda r: r.complete_ms)
    problems: list[str] = []
    unverifiable = 0
    position = 0
    matched: set[int] = set()
    for request in acknowledged:
        found = next(
            (i for i in range(position, len(transitions)) if (transitions[i].kind, transitions[i].node)
             == (request.kind, request.node)),
            None,
        )  # fmt: skip
        if any(t.kind == "gap" for t in transitions[position : len(transitions) if found is None else found]):
            # It may be one of the changes in offsets the tape never saw -- and a match past them
            # may be a later change of the same voter.
            unverifiable += 1
            continue
        if found is None:
            after = transitions[position - 1].offset if position else -1
            if any(end > after + 1 for _, end in tape_gaps):
                unverifiable += 1  # its record may sit in offsets neither the tape nor a node kept
                continue
            verdict.lost_acknowledged.append(f"{request.kind} node {request.node}")
            problems.append(
                f"{request.kind} node {request.node} acknowledged at {request.complete_ms} (fault "
                f"{request.fault_id}) is not a committed voter change after offset "
                f"{transitions[position - 1].offset if position else -1}"
            )
            continue
        matched.add(found)
        position = found + 1
        offset = transitions[found].offset
        behind = [n.node_id for n in nodes if n.high_watermark <= offset]
        if behind:
            problems.append(f"{request.kind} node {request.node} at offset {offset} is above the high watermark of "
                            f"nodes {behind}")  # fmt: skip
    for i, step in enumerate(transitions):
        if i in matched or step.kind in ("other", "gap"):
            continue
        if not any(r.kind == step.kind and r.node == step.node and r.outcome != "fail" for r in requests):
            problems.append(f"{step.kind} node {step.node} at offset {step.offset}: no request that was not refused "
                            "asked for it")  # fmt: skip
    verdict.checks.append(
        Check(
            "acknowledged-voter-changes-committed",
            not problems,
            listed(problems)
            if problems
            else f"all {len(acknowledged) - unverifiable} verifiable acknowledged voter changes are committed in "
            f"order on every node ({unverifiable} fell in tape gaps); every committed change was requested",
        )
    )

    # Every node's files agree with the history.
    for node in nodes:
        in_range = {o: v for o, v in history.items() if node.log_start <= o and _next_after(o) <= node.high_watermark}
        missing = sorted(set(in_range) - set(node.records))
        if missing:
            disagreements.append(f"node {node.node_id} lacks the voter records at {missing} below its high watermark")
        complete_below_snapshot = not any(start < node.snapshot_end for start, _ in tape_gaps)
        if node.snapshot_end and complete_below_snapshot:
            expected = _set_at(base, history, node.snapshot_end)
            if node.snapshot_voters is not None and node.snapshot_voters != expected:
                disagreements.append(
                    f"node {node.node_id}'s snapshot at {node.snapshot_end} carries voters "
                    f"{list(node.snapshot_voters)}, the log {list(expected)}"
                )
        own = [node.records[o] for o in sorted(node.records)]
        final = own[-1] if own else (node.snapshot_voters if node.snapshot_voters is not None else base)
        if final != _set_at(base, history, node.high_watermark):
            disagreements.append(
                f"node {node.node_id}'s committed voters are {list(final)} at its high watermark "
                f"{node.high_watermark}, the history's {list(_set_at(base, history, node.high_watermark))}"
            )
    verdict.checks.append(
        Check(
            "voter-sets-agree",
            not disagreements,
            listed(disagreements)
            if disagreements
            else f"every node's voter records, snapshot and committed set agree with the history ({len(nodes)} nodes)",
        )
    )

    if final_voters is not None:
        described = tuple(sorted(final_voters))
        verdict.checks.append(
            Check(
                "final-voters-match-log",
                described == last,
                f"DescribeQuorum's voters {list(described)} are the last committed set"
                if described == last
                else f"DescribeQuorum names voters {list(described)}, the last committed set is {list(last)}",
            )
        )
    verdict.figures = {
        "bootstrap": list(base),
        "final": list(last),
        "history": [[t.offset, list(t.voters)] for t in transitions],
        "requests": len(requests),
        "acknowledged": len(acknowledged),
        "refused": _count_errors(requests),
        "unknown": sum(1 for r in requests if r.outcome == "unknown"),
        "unverifiable": unverifiable,
    }
    return verdict


def _next_after(offset: int) -> int:
    # A VotersRecord is alone in its control batch: the batch ends one past its base offset.
    return offset + 1


def _set_at(base: Voters, history: Mapping[int, Voters], end: int) -> Voters:
    """The committed set in force for a log that ends at ``end``."""
    below = [o for o in history if o < end]
    return history[max(below)] if below else base


def _count_errors(requests: Sequence[VoterRequest]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for request in requests:
        if request.outcome == "fail":
            counts[request.error] = counts.get(request.error, 0) + 1
    return counts
