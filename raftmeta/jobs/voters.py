"""The voter-set history check of ``raftmeta verify`` (KIP-853), on the replayed node's log.

The voter changes (VotersRecords) and elections (LeaderChangeRecords, which list the voter set the
leader was elected in) are a handful of rows, collected to the driver and checked in order:

- one change at a time: each VotersRecord differs from the voter set before it by exactly one
  voter (the set before the first change is the one the first election names);
- every leader was electable: a voter of the set in force at its LeaderChangeRecord, or of the set
  just before it (a voter removed by a change that was not committed yet still campaigns, the Raft
  thesis' rule; the log does not say when the change committed);
- every LeaderChangeRecord names the voter set in force where it stands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raftmeta.jobs.checks import Check, listed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

NAME = "voter-changes-one-at-a-time"
KINDS = ("voters", "leader_change")
COLUMNS = ("offset", "record_type", "leader", "leader_epoch", "voters", "crc_ok")


def voter_history_check(records: DataFrame) -> Check:
    return check_voter_history(voter_rows(records))


def voter_rows(records: DataFrame) -> list[dict[str, Any]]:
    """The voter and election rows (COLUMNS but crc_ok), in offset order: a handful per election."""
    rows = records.where("crc_ok").orderBy("offset").collect()
    return [{k: r[k] for k in COLUMNS if k != "crc_ok"} for r in rows]


def check_voter_history(rows: list[dict[str, Any]]) -> Check:
    """``rows``: offset, record_type, leader, leader_epoch, voters -- in offset order."""
    problems: list[str] = []
    current: tuple[int, ...] | None = None
    previous: tuple[int, ...] | None = None
    changes = elections = 0
    for row in rows:
        voters = tuple(sorted(row["voters"] or ()))
        offset = row["offset"]
        if row["record_type"] == "voters":
            changes += 1
            # One voter added or removed -- or none: the same voters, one with new listeners
            # (UpdateRaftVoter, which this check cannot see: it looks at ids).
            if current is not None and len(set(current) ^ set(voters)) > 1:
                problems.append(f"offset {offset}: voters {list(current)} -> {list(voters)}, not one change")
            previous, current = current, voters
            continue
        elections += 1
        leader, epoch = row["leader"], row["leader_epoch"]
        if not voters and current is None:
            continue  # an election record without its voter set says nothing to check against
        if current is None:
            current = voters  # the first election names the bootstrap set
        elif voters and voters != current:
            problems.append(
                f"offset {offset}: epoch {epoch}'s leader lists voters {list(voters)}, in force {list(current)}"
            )
        if leader not in current and (previous is None or leader not in previous):
            problems.append(f"offset {offset}: leader {leader} of epoch {epoch} is not a voter of {list(current)}")
    if problems:
        return Check(NAME, False, listed(problems))
    return Check(
        NAME,
        True,
        f"{changes} voter changes, each adding or removing one voter; {elections} elections, each won by a voter "
        f"of the set in force (final voters {list(current or ())})",
    )
