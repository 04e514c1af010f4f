"""Small durable-file primitives: write-all, fsync of a directory, atomic replace.

The atomic replace is the classic sequence (DESIGN.md §4): write a temp file in the same
directory, fsync it, rename it over the target, fsync the directory so the rename itself
survives a power loss. A reader therefore sees either the old file or the new one, never a
torn mix.
"""

from __future__ import annotations

import os
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write may write less than asked (signals, odd filesystems): loop until all is out."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def pwrite_all(fd: int, data: bytes | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """Read ``size`` bytes at ``position``, or fewer only when the file ends first."""
    chunks: list[bytes] = []
    remaining = size
    while remaining > 0:
        chunk = os.pread(fd, remaining, position)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
        position += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def fsync_dir(path: Path) -> None:
    """Make creations, renames and unlinks inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` durably: temp file, fsync, rename, fsync the directory."""
    temp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    fsync_dir(path.parent)


def set_aside(path: Path, suffix: str) -> Path:
    """Rename a damaged file to ``<name><suffix>`` beside it, kept for inspection and never
    deleted: a file set aside earlier under that name is kept too (the new one gets ``.1``,
    ``.2``, ...). Returns the new path. Not made durable: a lost rename brings the damaged file
    back, and the next start sets it aside again."""
    target = path.with_name(path.name + suffix)
    number = 1
    while target.exists():
        target = path.with_name(f"{path.name}{suffix}.{number}")
        number += 1
    path.replace(target)
    return target
