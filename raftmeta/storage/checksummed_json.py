"""The checksum of the small JSON state files (``quorum-state``, the high-watermark checkpoint).

A file carries ``"crc32c"``: the CRC32C of its other fields serialized with sorted keys and no
spaces, so a flipped bit or a hand edit is detected rather than believed. One rule for every
such file: :func:`checksum` computes it, :func:`check_checksum` verifies it on read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raftmeta.records.codec import crc32c
from raftmeta.storage.errors import InvalidFileError

CHECKSUM_FIELD = "crc32c"


def checksum(doc: dict[str, Any]) -> int:
    """CRC32C of the document's fields other than ``crc32c``, in a canonical serialization."""
    body = {k: v for k, v in doc.items() if k != CHECKSUM_FIELD}
    return crc32c(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def with_checksum(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its ``crc32c`` field set, ready to be written."""
    return {**doc, CHECKSUM_FIELD: checksum(doc)}


def check_checksum(path: Path, doc: dict[str, Any]) -> None:
    """InvalidFileError naming ``path`` unless ``doc``'s ``crc32c`` is present and matches."""
    stored = doc.get(CHECKSUM_FIELD)
    if not isinstance(stored, int) or isinstance(stored, bool):
        raise InvalidFileError(path, f"field {CHECKSUM_FIELD!r} must be an integer, got {stored!r}")
    actual = checksum(doc)
    if stored != actual:
        raise InvalidFileError(path, f"checksum mismatch: crc32c {stored} stored, {actual} computed")
