"""Kafka's own tools and Java Admin run against any Kafka endpoint (a KRaft cluster or raftmeta's
Kafka listener), many invocations to one JVM.

A JVM costs about a second to start on a loaded two-core machine, so a script of tool invocations
is handed to ``java/KafkaToolRunner.java``, which calls each tool's ``main`` in turn with Kafka's
exit procedure replaced (the tool's exit code is recorded, its stdout and stderr captured), and
``java/AdminScript.java`` runs a fixed sequence of Java Admin calls, one JSON line per call. Both
are single-file Java programs started from source (``java -cp <jars> File.java``): no build step,
and the jars are the pinned release's own.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from raftmeta.kraft.tools import tool_argv

JAVA_SOURCES: Final = Path(__file__).with_name("java")
TOOL_RUNNER: Final = JAVA_SOURCES / "KafkaToolRunner.java"
ADMIN_SCRIPT: Final = JAVA_SOURCES / "AdminScript.java"
# Compiling the source and loading the tools' classes takes many seconds on a loaded machine; the
# tools' own calls time out after Admin's 60 s default.
DEFAULT_TIMEOUT_S: Final = 600.0

# The main classes behind the other tools' scripts (raftmeta.kraft.tools names kafka-topics' and
# kafka-metadata-quorum's).
CONFIG_COMMAND: Final = "org.apache.kafka.tools.ConfigCommand"
LEADER_ELECTION_COMMAND: Final = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN_PARTITIONS_COMMAND: Final = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
CLUSTER_TOOL: Final = "org.apache.kafka.tools.ClusterTool"
FEATURE_COMMAND: Final = "org.apache.kafka.tools.FeatureCommand"


class JavaProgramFailed(RuntimeError):
    """The runner itself failed (not a tool: a tool's failure is its exit code)."""


@dataclass(frozen=True)
class ToolInvocation:
    """One tool run: its main class and arguments. With ``until`` (a regular expression) it is run
    again, half a second apart and at most ``attempts`` times, until its stdout matches or it fails
    (a failure is a final answer): for what Kafka finishes in the background, such as a reassignment
    ``--verify`` reports in progress, or a change a broker learns a moment after it is committed."""

    tool: str
    args: tuple[str, ...]
    until: str | None = None
    attempts: int = 1

    def to_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {"tool": self.tool, "args": list(self.args)}
        if self.until is not None:
            line.update(until=self.until, attempts=self.attempts)
        return line


@dataclass(frozen=True)
class ToolRun:
    """A tool's outcome as its shell script would leave it: exit code, stdout and stderr (of the
    last attempt), and how many attempts ``until`` took."""

    tool: str
    args: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    attempts: int


def _run_java(source: Path, arguments: Sequence[str], stdin: str, timeout_s: float) -> str:
    # Started as raftmeta.kraft.tools starts one tool (heap, collector, log4j: warnings and errors
    # to stderr), the source file in the main class's place.
    argv = tool_argv(str(source), arguments)
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise JavaProgramFailed(f"{source.name} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done.stdout


def run_tools(invocations: Sequence[ToolInvocation], *, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[ToolRun]:
    """Run every invocation in order in one JVM; one ToolRun each, in the same order."""
    script = "".join(json.dumps(i.to_json()) + "\n" for i in invocations)
    lines = _run_java(TOOL_RUNNER, (), script, timeout_s).splitlines()
    runs = [json.loads(line) for line in lines if line.startswith("{")]
    if len(runs) != len(invocations):
        raise JavaProgramFailed(f"{len(invocations)} invocations, {len(runs)} results:\n" + "\n".join(lines[-20:]))
    return [
        ToolRun(r["tool"], tuple(r["args"]), int(r["exit_code"]), r["stdout"], r["stderr"], int(r["attempts"]))
        for r in runs
    ]


def run_admin_script(bootstrap_servers: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[dict[str, Any]]:
    """AdminScript's calls against ``bootstrap_servers``: one dict per call, in order."""
    out = _run_java(ADMIN_SCRIPT, (bootstrap_servers,), "", timeout_s)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]
