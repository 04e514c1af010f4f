"""``meta.properties``: which cluster and which node a data dir belongs to.

Kafka's format (java.util.Properties: ``key=value`` lines, ``#`` comments)::

    version=1
    cluster.id=<id>
    node.id=<int>

Written once, atomically, when a node first starts on an empty data dir. On every later start
the node checks it: a data dir of another cluster or another node id is refused with a message
naming both values, because silently adopting it would let one node vote with another's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raftmeta.storage.errors import DataDirMismatchError, InvalidFileError
from raftmeta.storage.fileio import atomic_write

META_PROPERTIES = "meta.properties"
VERSION = 1


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int

    def render(self) -> str:
        return (
            "#raftmeta node identity: do not edit\n"
            f"version={VERSION}\ncluster.id={self.cluster_id}\nnode.id={self.node_id}\n"
        )


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
    return MetaProperties(cluster_id=cluster_id, node_id=node_id)


def read_meta_properties(data_dir: Path) -> MetaProperties | None:
    """The data dir's identity, or None when it has none yet."""
    path = data_dir / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return parse_meta_properties(path, text)


def ensure_meta_properties(data_dir: Path, cluster_id: str, node_id: int) -> MetaProperties:
    """Create meta.properties on a fresh data dir, or check that an existing one matches.

    Raises DataDirMismatchError naming the data dir and both identities if it does not.
    """
    if not cluster_id or "\n" in cluster_id or "=" in cluster_id:
        raise ValueError(f"invalid cluster id {cluster_id!r}")
    wanted = MetaProperties(cluster_id=cluster_id, node_id=node_id)
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
    return existing
