"""The Kafka APIs this listener serves and their versions, as ApiVersions advertises them.

Each range is what the handler in :mod:`raftmeta.kafka.dispatch` has been tested at, within what
kio generates (Kafka 4's schemas). A request outside its range is refused as a broker does
(framing.UnsupportedVersion)."""

from __future__ import annotations

from typing import Final

from raftmeta.api.catalogue import KAFKA_APIS

API_VERSIONS_KEY: Final = 18

# api key → (min version, max version): the catalogue's (raftmeta/api/catalogue.py, KAFKA_APIS).
SUPPORTED: Final[dict[int, tuple[int, int]]] = {
    key: (api.min_version, api.max_version) for key, api in KAFKA_APIS.items()
}
