"""Kafka's tools run many to a JVM (raftmeta/kraft/java/KafkaToolRunner.java): each tool's exit
becomes its exit code and ends its output, the next invocation still runs, and ``until`` retries
only a run that succeeded. No cluster needed: these invocations never connect."""

from __future__ import annotations

import pytest

from raftmeta.kraft.classpath import kafka_version
from raftmeta.kraft.tool_batch import ToolInvocation, run_tools
from raftmeta.kraft.tools import TOPIC_COMMAND

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(300)]


def test_exits_become_exit_codes_and_the_batch_goes_on() -> None:
    bad, version, waited, failed = run_tools(
        [
            ToolInvocation(TOPIC_COMMAND, ("--bogus",)),
            ToolInvocation(TOPIC_COMMAND, ("--version",)),
            ToolInvocation(TOPIC_COMMAND, ("--version",), until="never printed", attempts=2),
            ToolInvocation(TOPIC_COMMAND, ("--bogus",), until="never printed", attempts=5),
        ]
    )
    assert bad.exit_code == 1 and "bogus is not a recognized option" in bad.stderr, bad
    assert (version.exit_code, version.stdout.strip()) == (0, kafka_version()), version
    # A run whose output never matches is retried up to its attempts; a failure is final.
    assert (waited.attempts, failed.attempts) == (2, 1)
    assert failed.args == ("--bogus",) and failed.exit_code == 1
