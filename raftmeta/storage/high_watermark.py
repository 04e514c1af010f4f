"""The high-watermark checkpoint: each node's durable claim about its committed prefix.

``DATA_DIR/high-watermark-checkpoint`` is JSON, replaced atomically, with a checksum::

    {"version": 2, "high_watermark": 1234, "crc32c": 1234567890}

``crc32c`` is the same checksum as ``quorum-state``'s (:mod:`raftmeta.storage.checksummed_json`):
a wrong but plausible value is refused, naming the file, instead of being believed. Version 1
files (no checksum, written by earlier releases) are still read, as ``quorum-state``'s version
0 is, and the next write replaces them with version 2; any other version, a version 2 file
without its checksum, and unknown fields are refused.

The offset is exclusive, as the high watermark itself: offsets ``< high_watermark`` are
committed and present in this node's log (or in its snapshot). Two readers rely on it:

* recovery: corruption below this offset refuses to start, because the node may already have
  reported those offsets as persisted, and quietly truncating them would break the quorum's
  durability promise (docs/storage.md, "Recovery");
* the Spark verify job: each node's committed prefix to compare across nodes.

It is written lazily (a fsync and a rename per update would double the cost of a commit):
:meth:`HighWatermarkCheckpoint.maybe_write` writes at most once per ``interval_ms``. The value
written is clamped to the log's durable end, so the file never promises offsets the log could
lose in a crash; the value a node reports outward as "persisted" must be :attr:`checkpointed`.
"""

from __future__ import annotations

import json
from pathlib import Path

from raftmeta.storage.checksummed_json import CHECKSUM_FIELD, check_checksum, with_checksum
from raftmeta.storage.errors import InvalidFileError, StorageError
from raftmeta.storage.fileio import atomic_write

HIGH_WATERMARK_CHECKPOINT = "high-watermark-checkpoint"
VERSION = 2
LEGACY_VERSION = 1  # no checksum
FIELDS = ("version", "high_watermark")


class CommittedTruncationRefusedError(StorageError):
    """A truncation below the checkpointed high watermark: committed data, never removed."""

    def __init__(self, data_dir: Path, offset: int, checkpointed: int) -> None:
        super().__init__(
            f"{data_dir}: refusing to truncate the log to offset {offset}: offsets [{offset}, {checkpointed}) are "
            f"below the checkpointed high watermark {checkpointed} and committed"
        )
        self.offset = offset
        self.checkpointed = checkpointed


def read_high_watermark(data_dir: Path) -> int:
    """The checkpointed high watermark of a data dir; 0 if none was ever written."""
    path = data_dir / HIGH_WATERMARK_CHECKPOINT
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return 0
    return parse_high_watermark(path, text)


def parse_high_watermark(path: Path, text: str) -> int:
    """The value of a checkpoint file's text (``path`` only names it in errors). Readers that do not
    use the local filesystem (the Spark jobs, through pyarrow) share this parser."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidFileError(path, f"not a valid high-watermark checkpoint: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidFileError(path, "not a valid high-watermark checkpoint: not a JSON object")
    version = doc.get("version")
    if version not in (VERSION, LEGACY_VERSION) or isinstance(version, bool):
        raise InvalidFileError(path, f"unsupported version {version!r} (expected {VERSION})")
    if version == VERSION:
        check_checksum(path, doc)
    allowed = {*FIELDS, CHECKSUM_FIELD} if version == VERSION else set(FIELDS)
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise InvalidFileError(path, f"unknown fields {unknown} in a version {version} high-watermark checkpoint")
    if "high_watermark" not in doc:
        raise InvalidFileError(path, "field 'high_watermark' is missing")
    value = doc["high_watermark"]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidFileError(path, f"high_watermark must be a non-negative integer, got {value!r}")
    return value


def render_high_watermark(value: int) -> bytes:
    """The file's bytes for ``value``: the current version, with its checksum."""
    return (json.dumps(with_checksum({"version": VERSION, "high_watermark": value})) + "\n").encode()


class HighWatermarkCheckpoint:
    """Lazily persisted high watermark. Use from one thread (the writer thread)."""

    def __init__(self, data_dir: Path, *, interval_ms: int = 1000) -> None:
        self.path = data_dir / HIGH_WATERMARK_CHECKPOINT
        self.interval_ms = interval_ms
        self._checkpointed = read_high_watermark(data_dir)
        self._last_write_ms: int | None = None

    @property
    def checkpointed(self) -> int:
        """The value on disk: what a restart will recover and enforce."""
        return self._checkpointed

    def write(self, high_watermark: int, durable_end_offset: int) -> int:
        """Persist ``min(high_watermark, durable_end_offset)`` if it is higher than the file's.

        The high watermark never goes backwards (DESIGN.md §9.5), so a lower value is ignored.
        Returns the checkpointed value.
        """
        value = min(high_watermark, durable_end_offset)
        if value > self._checkpointed:
            atomic_write(self.path, render_high_watermark(value))
            self._checkpointed = value
        return self._checkpointed

    def maybe_write(self, high_watermark: int, durable_end_offset: int, now_ms: int) -> int:
        """:meth:`write` if ``interval_ms`` has passed since the last write; the checkpointed value."""
        if self._last_write_ms is not None and now_ms - self._last_write_ms < self.interval_ms:
            return self._checkpointed
        if min(high_watermark, durable_end_offset) > self._checkpointed:
            self._last_write_ms = now_ms
        return self.write(high_watermark, durable_end_offset)

    def reset(self, high_watermark: int) -> None:
        """Overwrite the checkpoint with a lower value: only for ``repair``, which knowingly gave
        up data this node had checkpointed (docs/storage.md)."""
        atomic_write(self.path, render_high_watermark(high_watermark))
        self._checkpointed = high_watermark
