"""raftmeta/api/ids.py: the one text form of topic ids (Kafka's Uuid.toString), read back."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest

from raftmeta.api.ids import id_text, uuid_from_str, uuid_to_str


def test_an_id_prints_as_kafka_prints_it_and_reads_back() -> None:
    # Kafka's Uuid.toString of 0x00010203-...-0e0f, as kafka-topics.sh prints it.
    raw = bytes(range(16))
    assert uuid_to_str(raw) == "AAECAwQFBgcICQoLDA0ODw"
    assert uuid_from_str("AAECAwQFBgcICQoLDA0ODw") == raw
    assert uuid_from_str(raw.hex()) == raw  # 32 hex digits are read too
    assert uuid_to_str(b"") == ""


def test_a_message_quotes_an_id_in_kafkas_form_and_anything_else_as_hex() -> None:
    raw = uuid.UUID("6f2636ea-adf7-4f80-b4a6-7d0ac06ed77a").bytes
    assert id_text(raw) == uuid_to_str(raw) == "byY26q33T4C0pn0KwG7Xeg"
    assert id_text(b"\x01\x02") == "0102"


@pytest.mark.parametrize("text", ["", "not-an-id", "AAECAwQFBgcICQoLDA0O", "zz" * 16])
def test_what_is_not_an_id_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"topic id|bytes"):
        uuid_from_str(text)


def base64url_coders() -> list[str]:
    """The project's calls of a url-safe base64 coder (Kafka's uuid text), file:line."""
    root = Path(__file__).resolve().parents[1]
    found = []
    for package in ("raftmeta", "placement"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                coder = isinstance(node, ast.Attribute) and node.attr in ("urlsafe_b64encode", "urlsafe_b64decode")
                altchars = isinstance(node, ast.keyword) and node.arg == "altchars"
                if coder or altchars:
                    found.append(f"{path.relative_to(root)}")
    return found


def test_the_kafka_uuid_text_is_written_once() -> None:
    """Topic, directory, cluster and incarnation ids print (and read back) through
    raftmeta/api/ids.py alone: one copy of the rule cannot drift from another."""
    assert set(base64url_coders()) == {"raftmeta/api/ids.py"}
