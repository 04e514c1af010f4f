"""Where a quorum's files are: node data dirs, their segments, checkpoints and snapshots.

Paths may be local (``/data/quorum``) or any pyarrow filesystem URI (``file://``, ``hdfs://``,
``s3://``), so the same job reads logs staged on a cluster's storage. Everything here runs on the
driver (it plans the work); readers on executors open single files by the same URIs.

A data dir is either one node's dir (it has ``meta.properties``) or a parent of node dirs
(``quorum up`` writes ``DIR/node-1``, ``DIR/node-2``, ...). Note Spark's own file discovery would
hide ``__cluster_metadata-0`` (a leading ``_``), one reason the reader plans files itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pyarrow.fs as pafs

from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.errors import InvalidFileError
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT, parse_high_watermark
from raftmeta.storage.meta_properties import META_PROPERTIES, parse_meta_properties
from raftmeta.storage.segment import parse_log_file_name
from raftmeta.storage.snapshot import parse_snapshot_name


class LayoutError(ValueError):
    """The data dir does not look like raftmeta node data (names the path and what is wrong)."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    uri: str
    base_offset: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    uri: str
    end_offset: int
    epoch: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class NodeFiles:
    node_id: int
    cluster_id: str
    root: str
    segments: tuple[SegmentFile, ...]
    snapshots: tuple[SnapshotFile, ...]
    # The node's checkpointed high watermark: offsets below it are its committed prefix.
    high_watermark: int

    @property
    def newest_snapshot(self) -> SnapshotFile | None:
        return max(self.snapshots, key=lambda s: s.end_offset, default=None)


def filesystem_for(location: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the path within it, for a local path or a URI."""
    if "://" in location:
        fs, path = pafs.FileSystem.from_uri(location)
        return fs, path
    return pafs.LocalFileSystem(), str(Path(location).resolve())


def _uri(fs: pafs.FileSystem, path: str) -> str:
    """A URI a reader on another process can open with ``filesystem_for``."""
    if isinstance(fs, pafs.LocalFileSystem):
        return path
    return f"{fs.type_name}://{path}"


def read_bytes(location: str) -> bytes:
    fs, path = filesystem_for(location)
    with fs.open_input_stream(path) as stream:
        data: bytes = stream.read()
    return data


def _read_text(fs: pafs.FileSystem, path: str) -> str | None:
    try:
        with fs.open_input_stream(path) as stream:
            text: str = stream.read().decode("utf-8")
            return text
    except FileNotFoundError:
        return None


def _node_files(fs: pafs.FileSystem, root: str) -> NodeFiles:
    meta_path = str(PurePosixPath(root) / META_PROPERTIES)
    meta_text = _read_text(fs, meta_path)
    if meta_text is None:
        raise LayoutError(f"{_uri(fs, root)}: no {META_PROPERTIES}, so not a node data dir")
    try:
        meta = parse_meta_properties(Path(meta_path), meta_text)
    except InvalidFileError as exc:
        raise LayoutError(str(exc)) from None
    log_dir = str(PurePosixPath(root) / LOG_DIR_NAME)
    segments: list[SegmentFile] = []
    snapshots: list[SnapshotFile] = []
    try:
        infos = fs.get_file_info(pafs.FileSelector(log_dir, allow_not_found=True))
    except FileNotFoundError:
        infos = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        base = parse_log_file_name(info.base_name)
        if base is not None:
            segments.append(SegmentFile(_uri(fs, info.path), base, info.size))
            continue
        snap = parse_snapshot_name(info.base_name)
        if snap is not None:
            snapshots.append(SnapshotFile(_uri(fs, info.path), snap.offset, snap.epoch, info.size))
    hw_path = str(PurePosixPath(root) / HIGH_WATERMARK_CHECKPOINT)
    hw_text = _read_text(fs, hw_path)
    try:
        high_watermark = 0 if hw_text is None else parse_high_watermark(Path(hw_path), hw_text)
    except InvalidFileError as exc:
        raise LayoutError(str(exc)) from None
    return NodeFiles(
        node_id=meta.node_id,
        cluster_id=meta.cluster_id,
        root=_uri(fs, root),
        segments=tuple(sorted(segments, key=lambda s: s.base_offset)),
        snapshots=tuple(sorted(snapshots, key=lambda s: s.end_offset)),
        high_watermark=high_watermark,
    )


def discover(location: str) -> list[NodeFiles]:
    """Every node under ``location`` (a node dir, or a dir of node dirs), sorted by node id."""
    fs, path = filesystem_for(location)
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.Directory:
        raise LayoutError(f"{location}: not a directory")
    if fs.get_file_info(str(PurePosixPath(path) / META_PROPERTIES)).type == pafs.FileType.File:
        nodes = [_node_files(fs, path)]
    else:
        children = fs.get_file_info(pafs.FileSelector(path))
        nodes = [
            _node_files(fs, child.path)
            for child in sorted(children, key=lambda c: c.path)
            if child.type == pafs.FileType.Directory
            and fs.get_file_info(str(PurePosixPath(child.path) / META_PROPERTIES)).type == pafs.FileType.File
        ]
    if not nodes:
        raise LayoutError(f"{location}: no node data dirs (directories with {META_PROPERTIES}) found")
    ids = [n.node_id for n in nodes]
    if len(set(ids)) != len(ids):
        raise LayoutError(f"{location}: node ids repeat across data dirs: {sorted(ids)}")
    clusters = {n.cluster_id for n in nodes}
    if len(clusters) != 1:
        raise LayoutError(f"{location}: data dirs of different clusters: {sorted(clusters)}")
    return sorted(nodes, key=lambda n: n.node_id)
