"""Normalize what Kafka's tools and Java Admin answered on two clusters, and tell the differences.

Each step's outcome becomes a flat view: field path -> value, with what legitimately differs
between two clusters replaced by placeholders (cluster and topic ids, timestamps, addresses,
offsets and epochs of the metadata log, voter ids). Two views are then
compared field by field. A difference is either known, named and explained (KnownDifference,
listed in docs/kafka-protocol.md), or the comparison fails with a readable diff.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raftmeta.kraft.tool_batch import ToolRun

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Kafka's Uuid.ZERO_UUID, base64
_UUID = r"[A-Za-z0-9_-]{22}"
_ADDRESS = re.compile(r"127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+)*")
_LOG_DIRS = re.compile(r'"log_dirs":\[[^\]]*\]')
_REPLICAS = re.compile(r'"replicas":\[([\d,]*)\]')
# kafka-reassign-partitions --generate prints this line, then its proposal: placed by the tool
# itself, with Kafka's StripedReplicaPlacer seeded by an unseeded java.util.Random, so two runs
# against the same cluster propose different replicas.
_PROPOSAL_HEADER = "Proposed partition reassignment configuration"
_QUORUM_NUMBER = re.compile(r"^(LeaderEpoch|HighWatermark|MaxFollowerLag|MaxFollowerLagTimeMs):(\s+)\d+$")
_FEATURE_EPOCH = re.compile(r"Epoch: \d+")
_ISR = re.compile(r"Isr: ([\d,]*)")
_STACK_LINE = re.compile(r"^\s+at |^\s*\.\.\. \d+ more|^Caused by: ")
# A log line of the tools' log4j config (raftmeta/kraft/tools-log4j2.properties): a diagnostic
# of the client's connections (timing-dependent), not the tool's answer.
_LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] (TRACE|DEBUG|INFO|WARN|ERROR) ")

Field = tuple[str, str]  # (step, field path)


@dataclass(frozen=True)
class Side:
    """What identifies one cluster in its outputs: normalized away before comparing."""

    cluster_id: str
    controller_ids: tuple[int, ...]  # the quorum's voters

    def controller(self, node_id: int) -> str:
        """A voter's id as ``<voter>``: which one leads is the luck of the election, and the roles
        (Leader, Follower) are compared beside it; other ids (observers) stay."""
        return "<voter>" if node_id in self.controller_ids else str(node_id)


@dataclass(frozen=True)
class Difference:
    step: str
    field: str
    kraft: Any
    raftmeta: Any

    def __str__(self) -> str:
        return f"{self.step} :: {self.field}\n    kraft:    {self.kraft!r}\n    raftmeta: {self.raftmeta!r}"


ABSENT = "<absent>"  # the value of a field one side's answer does not have


@dataclass(frozen=True)
class KnownDifference:
    """A difference raftmeta keeps on purpose: the steps and fields it shows in (patterns where
    ``*`` matches anything), optionally narrowed by ``when``, and why (docs/kafka-protocol.md lists them too)."""

    name: str
    reason: str
    step: str
    fields: tuple[str, ...] = ("*",)
    when: Callable[[Difference], bool] | None = None

    def covers(self, difference: Difference) -> bool:
        return (
            _matches(self.step, difference.step)
            and any(_matches(pattern, difference.field) for pattern in self.fields)
            and (self.when is None or self.when(difference))
        )


def _matches(pattern: str, text: str) -> bool:
    """``*`` matches anything; every other character only itself (field paths hold brackets)."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), text) is not None


def _flatten(value: Any, path: str, into: dict[str, Any]) -> None:
    """Nested answers as path -> value; a config entry (it has a ``source``) stays one value."""
    if isinstance(value, Mapping) and "source" not in value:
        if not value:
            into[path] = {}
        for key, item in value.items():
            _flatten(item, f"{path}.{key}" if path else str(key), into)
    elif isinstance(value, list) and value and any(isinstance(v, Mapping | list) for v in value):
        for index, item in enumerate(value):
            _flatten(item, f"{path}[{index}]", into)
    else:
        into[path] = value


def _quorum_json(line: str, side: Side) -> str:
    """CurrentVoters / CurrentObservers: voter ids, directory ids and endpoints' ports placeholders."""
    label, _, listing = line.partition(":")
    replicas = json.loads(listing)
    for replica in replicas:
        replica["id"] = side.controller(replica["id"])
        if "directoryId" in replica:
            replica["directoryId"] = "<zero-id>" if replica["directoryId"] == ZERO_UUID else "<dir-id>"
    return f"{label}: {json.dumps(replicas, sort_keys=True)}"


def _replication_row(line: str, side: Side) -> str:
    """describe --replication: node (voters as <voter>), directory id, status; offsets and times vary."""
    cells = [c.strip() for c in line.split("\t") if c.strip()]
    if not cells or not cells[0].isdigit():
        return line.rstrip()
    node, directory, status = int(cells[0]), cells[1], cells[-1]
    directory = "<zero-id>" if directory == ZERO_UUID else "<dir-id>"
    return f"{side.controller(node)} {directory} {status}"


def normalize_text(text: str, side: Side) -> list[str]:
    """A tool's output as lines, with what differs between any two clusters replaced."""
    lines: list[str] = []
    for raw in text.replace(side.cluster_id, "<cluster-id>").splitlines():
        if _STACK_LINE.search(raw) or _LOG_LINE.search(raw):
            continue
        line = _ADDRESS.sub("<address>", raw.rstrip())
        if lines and lines[-1] == _PROPOSAL_HEADER:
            line = _REPLICAS.sub(_random_placement, line)
        line = re.sub(rf"TopicId: {_UUID}", "TopicId: <topic-id>", line)
        line = _LOG_DIRS.sub('"log_dirs":"<log-dirs>"', line)
        line = _FEATURE_EPOCH.sub("Epoch: <epoch>", line)
        line = _QUORUM_NUMBER.sub(r"\1:\2<n>", line)
        # Kafka keeps the ISR in no particular order (it is a set).
        line = _ISR.sub(lambda m: "Isr: " + ",".join(sorted(m.group(1).split(","), key=_int_or_str)), line)
        if line.startswith("LeaderId:"):
            line = "LeaderId: " + side.controller(int(line.split(":")[1]))
        elif line.startswith(("CurrentVoters:", "CurrentObservers:")):
            line = _quorum_json(line, side)
        elif "\t" in line and not line.startswith(("\t", "Topic:")):
            line = _replication_row(line, side)
        lines.append(line)
    return lines


def _random_placement(match: re.Match[str]) -> str:
    """A replica list the tool drew at random, as what any draw has: its size, and whether its
    brokers are distinct (a list naming one twice is no placement, and stays a difference)."""
    replicas = match.group(1).split(",")
    if len(set(replicas)) != len(replicas):
        return match.group(0)
    return f'"replicas":"<{len(replicas)} distinct brokers, drawn at random>"'


def _int_or_str(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (0, value)


def tool_view(run: ToolRun, side: Side) -> dict[str, Any]:
    """One tool run's exit code, stdout lines and the first line of stderr (the error it reports)."""
    view: dict[str, Any] = {"exit_code": run.exit_code}
    for index, line in enumerate(normalize_text(run.stdout, side)):
        view[f"stdout[{index}]"] = line
    errors = normalize_text(run.stderr, side)
    view["stderr"] = errors[0] if errors else ""
    return view


def _normalize_value(path: str, value: Any, side: Side) -> Any:
    leaf = path.rsplit(".", 1)[-1]
    if leaf in ("topicId", "replicaDirectoryId"):
        return "<zero-id>" if value == ZERO_UUID else "<id>"
    if leaf == "clusterId":
        return "<cluster-id>" if value == side.cluster_id else value
    if leaf in ("lastFetchTimestamp", "lastCaughtUpTimestamp"):
        return None if value is None else "<timestamp>"
    if leaf in ("leaderEpoch", "highWatermark", "logEndOffset"):
        return "<n>"
    if leaf in ("leaderId", "replicaId"):
        return side.controller(int(value))
    if leaf == "port":
        return "<port>"
    return value


def admin_view(line: Mapping[str, Any], side: Side) -> dict[str, Any]:
    """One Admin call's outcome: ok, the error class and message, or the result's fields."""
    flat: dict[str, Any] = {}
    _flatten({key: value for key, value in line.items() if key != "call"}, "", flat)
    view: dict[str, Any] = {}
    for path, value in flat.items():
        if isinstance(value, list) and path.endswith(".nodes"):
            view[path] = [side.controller(int(v)) for v in value]
        else:
            view[path] = _normalize_value(path, value, side)
    if "message" in view and isinstance(view["message"], str):
        view["message"] = view["message"].replace(side.cluster_id, "<cluster-id>")
    _normalize_cluster_controller(line, view)
    return view


def _normalize_cluster_controller(line: Mapping[str, Any], view: dict[str, Any]) -> None:
    """describeCluster's controller as ``<a listed broker>`` when it is one of the brokers listed: a
    KRaft broker names a random alive broker (getRandomAliveBroker), raftmeta one at the node asked."""
    result = line.get("result")
    if not isinstance(result, Mapping) or "controller" not in result or "nodes" not in result:
        return
    listed = {node.get("id") for node in result["nodes"] if isinstance(node, Mapping)}
    if result["controller"] in listed:
        view["result.controller"] = "<a listed broker>"


def compare(
    steps: Sequence[str], kraft: Sequence[Mapping[str, Any]], raftmeta: Sequence[Mapping[str, Any]]
) -> list[Difference]:
    """Every field that differs, step by step (a field one side lacks is a difference too)."""
    assert len(steps) == len(kraft) == len(raftmeta), (len(steps), len(kraft), len(raftmeta))
    differences = []
    missing = ABSENT
    for step, left, right in zip(steps, kraft, raftmeta, strict=True):
        for field in sorted(set(left) | set(right), key=_field_order):
            if left.get(field, missing) != right.get(field, missing):
                differences.append(Difference(step, field, left.get(field, missing), right.get(field, missing)))
    return differences


def _field_order(field: str) -> tuple[str, int]:
    index = re.search(r"\[(\d+)\]$", field)
    return (field[: index.start()] if index else field, int(index.group(1)) if index else -1)


def judge(differences: Iterable[Difference], known: Sequence[KnownDifference]) -> tuple[list[Difference], list[str]]:
    """(differences no known entry covers, names of known entries that covered nothing)."""
    unknown = []
    used: set[str] = set()
    for difference in differences:
        covering = [k.name for k in known if k.covers(difference)]
        if covering:
            used.update(covering)
        else:
            unknown.append(difference)
    return unknown, [k.name for k in known if k.name not in used]


def report(unknown: Sequence[Difference], stale: Sequence[str]) -> str:
    parts = []
    if unknown:
        parts.append(f"{len(unknown)} differences from real Kafka no known entry explains:")
        parts.extend(str(d) for d in unknown)
    if stale:
        parts.append("known differences that no longer occur (fixed? drop them here and in docs/kafka-protocol.md):")
        parts.extend(f"  {name}" for name in stale)
    return "\n".join(parts)
