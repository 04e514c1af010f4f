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

METADATA_SHELL: Final = "org.apache.kafka.shell.MetadataShell"
TOPICS: Final = "/image/topics/byName"
BROKERS: Final = "/image/cluster/brokers"
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


def read_image(snapshot: Path) -> ShellImage:
    """Every topic's partitions and every broker the shell shows for ``snapshot`` (two runs: a
    ``find`` for the paths, a ``cat`` of them all)."""
    listing, listing_err = run_shell(snapshot, "find", TOPICS, BROKERS)
    paths = listing.split()
    partition_paths = [p for p in paths if re.fullmatch(rf"{TOPICS}/[^/]+/\d+", p)]
    broker_paths = [p for p in paths if re.fullmatch(rf"{BROKERS}/\d+", p)]
    topics: dict[str, dict[int, ShellPartition]] = {
        p.removeprefix(TOPICS + "/"): {} for p in paths if re.fullmatch(rf"{TOPICS}/[^/]+", p)
    }
    brokers: dict[int, ShellBroker] = {}
    stderr = listing_err
    wanted = partition_paths + broker_paths
    if wanted:
        text, cat_err = run_shell(snapshot, "cat", *wanted)
        stderr += cat_err
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) != len(wanted):
            raise ShellOutputError(f"cat of {len(wanted)} paths printed {len(lines)} lines: {text!r}")
        for path, line in zip(wanted, lines, strict=True):
            if path in partition_paths:
                topic, partition = path.removeprefix(TOPICS + "/").split("/")
                topics[topic][int(partition)] = parse_partition(line)
            else:
                broker = parse_broker(line)
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
