"""Kafka's own storage tool (``kafka-storage``, class ``kafka.tools.StorageTool``) run from the pinned
release: a cluster id from ``random-uuid``, and ``format`` of each node's log directories.

A failed run raises with the tool's own output: it says what it refused and why.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from raftmeta.kraft.tools import TOOL_TIMEOUT_S, tool_argv

STORAGE_TOOL = "kafka.tools.StorageTool"


class StorageToolError(RuntimeError):
    """kafka-storage refused or failed; the message holds its output."""


@dataclass(frozen=True, slots=True)
class FormatJob:
    """One node's ``kafka-storage format``: its server.properties, and for a controller of a new
    dynamic quorum the ``--initial-controllers`` list (None: ``--no-initial-controllers``, a
    broker or a controller that joins later)."""

    node_id: int
    config: Path
    initial_controllers: str | None


def random_uuid() -> str:
    """``kafka-storage random-uuid``: a new cluster id, made by Kafka."""
    done = subprocess.run(
        tool_argv(STORAGE_TOOL, ["random-uuid"]), check=False, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise StorageToolError(f"kafka-storage random-uuid failed (exit {done.returncode}): {done.stderr.strip()}")
    return lines[-1].strip()


def format_all(cluster_id: str, jobs: Sequence[FormatJob]) -> None:
    """Format every node's storage, the JVMs side by side (each is mostly class loading)."""
    running = []
    for job in jobs:
        choice = (
            ["--initial-controllers", job.initial_controllers]
            if job.initial_controllers is not None
            else ["--no-initial-controllers"]
        )
        argv = tool_argv(STORAGE_TOOL, ["format", "--config", str(job.config), "--cluster-id", cluster_id, *choice])
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        running.append((job, process))
    failures = []
    for job, process in running:
        try:
            output, _ = process.communicate(timeout=TOOL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
            failures.append(f"node {job.node_id}: kafka-storage format did not finish in {TOOL_TIMEOUT_S:.0f} s")
            continue
        if process.returncode != 0:
            failures.append(f"node {job.node_id}: kafka-storage format exited {process.returncode}: {output.strip()}")
    if failures:
        raise StorageToolError("; ".join(failures))
