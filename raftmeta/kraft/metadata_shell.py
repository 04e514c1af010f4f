"""Kafka's ``kafka-metadata-shell`` (``org.apache.kafka.shell.MetadataShell``) in its
non-interactive form (``--snapshot FILE COMMAND ARGS...``), and what it prints read back: the
topics, partitions and brokers of the image it loads from one metadata snapshot or segment.

The shell reads one file and needs the file to set ``metadata.version`` before its other records
(a snapshot does; a segment does only when it starts the log). It reports a record it cannot
load as a "shell fault" on stderr and goes on, exiting 0: :func:`faults` finds them. It also
logs every control record of a snapshot as "Ignoring control record" -- for Kafka's own
snapshots too -- which is no fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from raftmeta.kraft.classpath import kafka_shell_classpath
from raftmeta.kraft.tools import run_tool
from raftmeta.records.kafka.batch import iter_batches

METADATA_SHELL: Final = "org.apache.kafka.shell.MetadataShell"
_PARTITION: Final = re.compile(
    r"^PartitionRegistration\(replicas=\[(?P<replicas>[^\]]*)\], .*?isr=\[(?P<isr>[^\]]*)\], .*?"
    r"leader=(?P<leader>-?\d+), .*?leaderEpoch=(?P<leader_epoch>-?\d+), partitionEpoch=(?P<partition_epoch>-?\d+)\)$"
)
_BROKER: Final = re.compile(
    r"^BrokerRegistration\(id=(?P<id>\d+), epoch=(?P<epoch>-?\d+), .*?"
    r"rack=(?P<rack>Optional\[[^\]]*\]|Optional\.empty), fenced=(?P<fenced>true|false),"
)
_FAULT_MARKERS: Final = ("fault", "Exception", "Error loading")


class ShellOutputError(ValueError):
    """A line the shell printed that is not what its command prints."""


@dataclass(frozen=True, slots=True)
class ShellPartition:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class ShellBroker:
    broker_id: int
    epoch: int
    rack: str | None
    fenced: bool


@dataclass(frozen=True, slots=True)
class ShellImage:
    """The image as the shell shows it, and what it reported on stderr."""

    topics: dict[str, dict[int, ShellPartition]]
    brokers: dict[int, ShellBroker]
    stderr: str


def run_shell(snapshot: Path, *command: str) -> tuple[str, str]:
    """The shell's stdout and stderr for one command on ``snapshot``."""
    done = run_tool(METADATA_SHELL, "--snapshot", str(snapshot), *command, classpath=kafka_shell_classpath())
    return done.stdout, done.stderr


def faults(stderr: str) -> list[str]:
    """The lines of the shell's stderr that report a record or an image it could not load."""
    return [line for line in stderr.splitlines() if any(marker in line for marker in _FAULT_MARKERS)]


def read_image(snapshot: Path, *, tries: int = 10) -> ShellImage:
    """Every topic's partitions and every broker the shell shows for ``snapshot``, from one
    ``tree /image`` (one image: the command walks the root it reads once).

    The shell answers once its loader has applied anything (``waitUntilCaughtUp`` in Kafka's
    MetadataShell waits for an applied offset above 0, not for the file's end), so on a loaded
    machine it can answer from the first batches only; the image's provenance says which offset
    it holds, and the command runs again until that is the file's last record's."""
    last = last_metadata_offset(snapshot.read_bytes())
    seen: list[int] = []
    stderr = ""
    for _ in range(tries):
        text, err = run_shell(snapshot, "tree", "/image")
        stderr += err
        if faults(err):
            break
        image = parse_tree(text)
        provenance = _provenance_offset(image)
        if provenance == last:
            return _shell_image(image, stderr)
        seen.append(provenance)
    raise ShellOutputError(
        f"kafka-metadata-shell showed the image at offsets {seen} of {snapshot}, never at its last record's, {last}"
        + (f"; it reported: {faults(stderr)[:3]}" if faults(stderr) else "")
    )


def last_metadata_offset(data: bytes) -> int:
    """The offset of the last metadata (not control) record of a file in Kafka's format."""
    last = -1
    for _, batch in iter_batches(data):
        if not batch.is_control:
            last = batch.last_offset
    return last


@dataclass
class TreeNode:
    """A line of the shell's ``tree`` output and the lines indented under it."""

    text: str
    children: list[TreeNode]

    def child(self, name: str) -> TreeNode:
        for node in self.children:
            if node.text == name + ":":
                return node
        raise ShellOutputError(f"no {name!r} under {self.text!r}")

    def named(self) -> dict[str, TreeNode]:
        return {node.text.removesuffix(":"): node for node in self.children}

    def contents(self) -> str:
        if len(self.children) != 1 or self.children[0].children:
            raise ShellOutputError(f"{self.text!r} is not a file with one line of contents")
        return self.children[0].text


def parse_tree(text: str) -> TreeNode:
    """The shell's ``tree`` output (two spaces per level) as nested nodes under a root."""
    root = TreeNode("", [])
    stack: list[tuple[int, TreeNode]] = [(-1, root)]
    for line in text.splitlines():
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        node = TreeNode(line.strip(), [])
        while stack[-1][0] >= depth:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((depth, node))
    return root


_PROVENANCE: Final = re.compile(r"^offset (-?\d+), epoch")


def _provenance_offset(image: TreeNode) -> int:
    match = _PROVENANCE.match(image.child("provenance").contents())
    if match is None:
        raise ShellOutputError(f"not a provenance: {image.child('provenance').contents()!r}")
    return int(match[1])


def _shell_image(image: TreeNode, stderr: str) -> ShellImage:
    topics: dict[str, dict[int, ShellPartition]] = {}
    for name, topic in image.child("topics").child("byName").named().items():
        topics[name] = {
            int(key): parse_partition(node.contents()) for key, node in topic.named().items() if key.isdigit()
        }
    brokers = {}
    for node in image.child("cluster").child("brokers").children:
        broker = parse_broker(node.contents())
        brokers[broker.broker_id] = broker
    return ShellImage(topics, brokers, stderr)


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def parse_partition(line: str) -> ShellPartition:
    match = _PARTITION.match(line.strip())
    if match is None:
        raise ShellOutputError(f"not a PartitionRegistration: {line!r}")
    return ShellPartition(
        _ids(match["replicas"]),
        _ids(match["isr"]),
        int(match["leader"]),
        int(match["leader_epoch"]),
        int(match["partition_epoch"]),
    )


def parse_broker(line: str) -> ShellBroker:
    match = _BROKER.match(line.strip())
    if match is None:
        raise ShellOutputError(f"not a BrokerRegistration: {line!r}")
    rack = match["rack"]
    return ShellBroker(
        int(match["id"]),
        int(match["epoch"]),
        None if rack == "Optional.empty" else rack.removeprefix("Optional[").removesuffix("]"),
        match["fenced"] == "true",
    )
