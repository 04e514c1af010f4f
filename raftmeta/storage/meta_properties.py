"""``meta.properties``: which cluster and which node a data dir belongs to.

Kafka's format (java.util.Properties: ``key=value`` lines, ``#`` comments)::

    version=1
    cluster.id=<id>
    node.id=<int>
    directory.id=<22 characters: a uuid, url-safe base64 without padding, as Kafka prints a Uuid>

Written once, atomically, when a node first starts on an empty data dir. On every later start
the node checks it: a data dir of another cluster or another node id is refused with a message
naming both values, because silently adopting it would let one node vote with another's log.

The directory id (KIP-853) names this log directory: a voter is its node id *and* its directory
id, so a node whose disk was wiped comes back with a new one and cannot pass for the voter it was
(its votes and acknowledgements are gone with the old disk). A dir written before directory ids
existed gets one on its next start.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from raftmeta.raft.voters import format_directory_id, parse_directory_id
from raftmeta.storage.errors import DataDirMismatchError, InvalidFileError
from raftmeta.storage.fileio import atomic_write

META_PROPERTIES = "meta.properties"
VERSION = 1


def new_directory_id() -> bytes:
    return uuid.uuid4().bytes


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    # 16 bytes; empty in a dir written before directory ids existed (until its next start).
    directory_id: bytes = b""

    def render(self) -> str:
        text = (
            "#raftmeta node identity: do not edit\n"
            f"version={VERSION}\ncluster.id={self.cluster_id}\nnode.id={self.node_id}\n"
        )
        if self.directory_id:
            text += f"directory.id={format_directory_id(self.directory_id)}\n"
        return text


def parse_meta_properties(path: Path, text: str) -> MetaProperties:
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise InvalidFileError(path, f"line {number} is not key=value: {raw!r}")
        values[key.strip()] = value.strip()
    if values.get("version") != str(VERSION):
        raise InvalidFileError(path, f"unsupported version {values.get('version')!r}, expected {VERSION}")
    try:
        cluster_id = values["cluster.id"]
        node_id = int(values["node.id"])
    except KeyError as exc:
        raise InvalidFileError(path, f"missing {exc.args[0]}") from None
    except ValueError:
        raise InvalidFileError(path, f"node.id is not an integer: {values['node.id']!r}") from None
    if not cluster_id:
        raise InvalidFileError(path, "cluster.id is empty")
    directory_id = b""
    if "directory.id" in values:
        try:
            directory_id = parse_directory_id(values["directory.id"])
        except ValueError as exc:
            raise InvalidFileError(path, str(exc)) from None
    return MetaProperties(cluster_id=cluster_id, node_id=node_id, directory_id=directory_id)


def read_meta_properties(data_dir: Path) -> MetaProperties | None:
    """The data dir's identity, or None when it has none yet."""
    path = data_dir / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return parse_meta_properties(path, text)


def ensure_meta_properties(
    data_dir: Path,
    cluster_id: str,
    node_id: int,
    *,
    directory_id: Callable[[], bytes] = new_directory_id,
    required_directory_id: bytes = b"",
) -> MetaProperties:
    """Create meta.properties on a fresh data dir (with a new directory id), or check that an
    existing one matches (and give it a directory id if it has none).

    Raises DataDirMismatchError naming the data dir and both identities if it does not.
    """
    if not cluster_id or "\n" in cluster_id or "=" in cluster_id:
        raise ValueError(f"invalid cluster id {cluster_id!r}")
    wanted = MetaProperties(
        cluster_id=cluster_id, node_id=node_id, directory_id=required_directory_id or directory_id()
    )
    existing = read_meta_properties(data_dir)
    if existing is None:
        data_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(data_dir / META_PROPERTIES, wanted.render().encode())
        return wanted
    if existing.cluster_id != cluster_id:
        raise DataDirMismatchError(
            f"data dir {data_dir} belongs to cluster {existing.cluster_id!r}, not {cluster_id!r} "
            f"(see {data_dir / META_PROPERTIES}); use an empty data dir for a new cluster"
        )
    if existing.node_id != node_id:
        raise DataDirMismatchError(
            f"data dir {data_dir} belongs to node {existing.node_id}, not node {node_id} "
            f"(see {data_dir / META_PROPERTIES}); each node needs its own data dir"
        )
    if required_directory_id and existing.directory_id and existing.directory_id != required_directory_id:
        raise DataDirMismatchError(
            f"data dir {data_dir} has directory id {format_directory_id(existing.directory_id)}, but this node is "
            f"given {format_directory_id(required_directory_id)} (--initial-controllers): a voter is its node id "
            "and its directory; use the data dir that directory id names, or an empty one for a new voter"
        )
    if not existing.directory_id:
        existing = replace(existing, directory_id=wanted.directory_id)
        atomic_write(data_dir / META_PROPERTIES, existing.render().encode())
    return existing
