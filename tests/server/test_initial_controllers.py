"""Bootstrapping with directory ids (Kafka's --initial-controllers / --standalone, KIP-853)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftmeta.raft.voters import format_directory_id
from raftmeta.server.config import NodeConfig, parse_initial_controllers
from raftmeta.server.recover import bootstrap_voters
from raftmeta.storage.errors import DataDirMismatchError
from raftmeta.storage.meta_properties import ensure_meta_properties

A, B = bytes(range(16)), bytes(range(16, 32))


def test_initial_controllers_name_each_voters_directory() -> None:
    text = f"1@10.0.0.1:9093:{format_directory_id(A)},2@10.0.0.2:9093:{format_directory_id(B)}"
    voters, directories = parse_initial_controllers(text)
    assert voters == {1: "10.0.0.1:9093", 2: "10.0.0.2:9093"}
    assert directories == {1: A, 2: B}
    config = NodeConfig(
        node_id=1,
        listen="10.0.0.1:9093",
        voters=voters,
        data_dir=Path("d"),
        cluster_id="c",
        voter_directory_ids=directories,
    )
    voter_set = bootstrap_voters(config)
    assert voter_set is not None
    assert [(n.voter_id, n.directory_id, n.endpoints[0].host) for n in voter_set.nodes] == [
        (1, A, "10.0.0.1"),
        (2, B, "10.0.0.2"),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("1@h:1", "is not ID@HOST:PORT:DIRECTORY_ID"),
        ("1@h:1:short", "directory id 'short'"),
        (f"1@h:1:{format_directory_id(A)},2@h:2:{format_directory_id(A)}", "same directory id"),
    ],
)
def test_bad_initial_controllers_are_refused_naming_the_item(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_initial_controllers(text)


def test_a_data_dir_of_another_directory_is_refused(tmp_path: Path) -> None:
    ensure_meta_properties(tmp_path, "c", 1, required_directory_id=A)
    assert ensure_meta_properties(tmp_path, "c", 1, required_directory_id=A).directory_id == A
    with pytest.raises(DataDirMismatchError, match="has directory id"):
        ensure_meta_properties(tmp_path, "c", 1, required_directory_id=B)
