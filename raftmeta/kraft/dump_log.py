"""Kafka's ``kafka-dump-log --cluster-metadata-decoder`` (``DumpLogSegments``) run from the
pinned release, and its output read back into the shape of
:func:`raftmeta.records.kafka.json_view.file_view`, so the two decoders can be compared field by
field (tests/kraft/test_kafka_log_golden.py, tests/records/kafka/test_kafka_golden.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from raftmeta.kraft.tools import run_tool
from raftmeta.records.kafka.json_view import BatchView, RecordView

DUMP_LOG_SEGMENTS: Final = "org.apache.kafka.tools.DumpLogSegments"

_RECORD_LINE = re.compile(
    r"^\| offset: (?P<offset>-?\d+) CreateTime: (?P<CreateTime>-?\d+) keySize: (?P<keySize>-?\d+) "
    r"valueSize: (?P<valueSize>-?\d+) sequence: (?P<sequence>-?\d+) headerKeys: \[(?P<headerKeys>[^\]]*)\] "
    r"(?P<label>\w+):? (?P<json>\{.*\})$"
)
_BATCH_FIELD = re.compile(r"(\w+): (\S+)")


class DumpOutputError(ValueError):
    """A line of the tool's output that is neither a batch, a record nor a known header."""


@dataclass
class DumpedFile:
    """What the tool printed for one file: its batches, and the lines it printed besides."""

    path: str
    batches: list[BatchView] = field(default_factory=list)
    other_lines: list[str] = field(default_factory=list)


def dump_log_segments(files: Sequence[Path]) -> str:
    """The tool's stdout for ``files`` (segments and .checkpoint snapshots); KafkaToolError when
    it exits non-zero."""
    return run_tool(DUMP_LOG_SEGMENTS, "--cluster-metadata-decoder", "--files", ",".join(map(str, files))).stdout


def parse_dump(text: str) -> list[DumpedFile]:
    """The tool's output, file by file."""
    files: list[DumpedFile] = []
    for line in text.splitlines():
        if line.startswith("Dumping "):
            files.append(DumpedFile(line.removeprefix("Dumping ")))
            continue
        if not files:
            raise DumpOutputError(f"output before the first 'Dumping' line: {line!r}")
        current = files[-1]
        if line.startswith("baseOffset: "):
            current.batches.append(BatchView(dict(_BATCH_FIELD.findall(line)), ()))
            continue
        if line.startswith("| offset: "):
            match = _RECORD_LINE.match(line)
            if match is None or not current.batches:
                raise DumpOutputError(f"a record line the parser does not know: {line!r}")
            fields = {k: v for k, v in match.groupdict().items() if k not in ("label", "json")}
            record = RecordView(int(fields["offset"]), fields, match["label"], json.loads(match["json"]))
            last = current.batches[-1]
            current.batches[-1] = BatchView(last.fields, (*last.records, record))
            continue
        current.other_lines.append(line)
    return files


def differences(ours: Sequence[BatchView], kafkas: Sequence[BatchView], *, where: str) -> list[str]:
    """Every field where the two views of one file differ, each naming the batch or record."""
    found: list[str] = []
    if len(ours) != len(kafkas):
        found.append(f"{where}: {len(ours)} batches decoded, Kafka shows {len(kafkas)}")
    for mine, theirs in zip(ours, kafkas, strict=False):
        at = f"{where} batch at offset {theirs.fields.get('baseOffset')}"
        for name in sorted(set(mine.fields) | set(theirs.fields)):
            if mine.fields.get(name) != theirs.fields.get(name):
                found.append(f"{at}: {name} {mine.fields.get(name)!r}, Kafka {theirs.fields.get(name)!r}")
        if len(mine.records) != len(theirs.records):
            found.append(f"{at}: {len(mine.records)} records decoded, Kafka shows {len(theirs.records)}")
        for record, kafka_record in zip(mine.records, theirs.records, strict=False):
            at_record = f"{where} record at offset {kafka_record.offset}"
            if record.fields != kafka_record.fields:
                found.append(f"{at_record}: {record.fields}, Kafka {kafka_record.fields}")
            if record.label != kafka_record.label:
                found.append(f"{at_record}: label {record.label!r}, Kafka {kafka_record.label!r}")
            if record.payload != kafka_record.payload:
                found.append(f"{at_record}: {json.dumps(record.payload)}\n  Kafka: {json.dumps(kafka_record.payload)}")
    return found
