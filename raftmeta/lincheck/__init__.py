"""Linearizability checking of client histories of topic metadata (Wing & Gong's search with
Lowe's memoization, as Porcupine does), per topic name. Pure: no IO, no clocks, no randomness.

See docs/consensus.md ("Linearizability of client histories").
"""

from raftmeta.lincheck.checker import CheckResult, TopicFailure, check_history, check_topic
from raftmeta.lincheck.model import (
    ABSENT,
    KINDS,
    LISTED,
    RESULTS,
    HistoryError,
    Operation,
    describe_operation,
    describe_state,
    step,
)

__all__ = [
    "ABSENT",
    "KINDS",
    "LISTED",
    "RESULTS",
    "CheckResult",
    "HistoryError",
    "Operation",
    "TopicFailure",
    "check_history",
    "check_topic",
    "describe_operation",
    "describe_state",
    "step",
]
