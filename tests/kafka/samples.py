"""One request per supported API (the fuzz target's samples: raftmeta/fuzz/kafka.py)."""

from __future__ import annotations

import uuid

from raftmeta.fuzz.kafka import SAMPLE_REQUESTS as REQUESTS

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")

__all__ = ["REQUESTS", "TOPIC_ID"]
