"""Kafka's command-line tools run from the pinned release: the main classes behind kafka-topics.sh,
kafka-metadata-quorum.sh and the others, started as ``kafka-run-class.sh`` starts them.

The tools log only warnings and errors, to stderr (Kafka's tools-log4j2 does the same), so their
stdout is exactly what an operator reads.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from raftmeta.kraft.classpath import java_executable, kafka_classpath

TOPIC_COMMAND: Final = "org.apache.kafka.tools.TopicCommand"
METADATA_QUORUM_COMMAND: Final = "org.apache.kafka.tools.MetadataQuorumCommand"
# A tool is one short JVM; on a loaded two-core machine class loading can take many seconds.
TOOL_TIMEOUT_S: Final = 180.0
TOOL_JVM_FLAGS: Final = ("-Xms16m", "-Xmx256m", "-XX:+UseSerialGC")

TOOLS_LOG4J2: Final = Path(__file__).with_name("tools-log4j2.properties")


class KafkaToolError(RuntimeError):
    """A tool exited non-zero; the message holds its command line and output."""


def tool_argv(main_class: str, arguments: Sequence[str], classpath: str | None = None) -> list[str]:
    return [
        java_executable(),
        *TOOL_JVM_FLAGS,
        f"-Dlog4j2.configurationFile={TOOLS_LOG4J2}",
        "-cp",
        kafka_classpath() if classpath is None else classpath,
        main_class,
        *arguments,
    ]


def run_tool(
    main_class: str, *arguments: str, check: bool = True, classpath: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one Kafka tool to its end (on the release's class path unless ``classpath`` is
    given); KafkaToolError if it fails and ``check``."""
    argv = tool_argv(main_class, arguments, classpath)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise KafkaToolError(
            f"{main_class} {' '.join(arguments)} exited {done.returncode}:\n"
            f"stdout: {done.stdout.strip()}\nstderr: {done.stderr.strip()}"
        )
    return done
