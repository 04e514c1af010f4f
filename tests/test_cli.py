"""The command line: every group and command has useful --help, exit codes follow DESIGN.md §8."""

from __future__ import annotations

import importlib.util
import json

import click
import pytest
from click.testing import CliRunner

from raftmeta.cli.main import COMMANDS, cli
from raftmeta.v1 import records_pb2


def walk(group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths.extend(walk(command, ctx, (*prefix, name)))
    return paths


def all_command_paths() -> list[tuple[str, ...]]:
    with click.Context(cli) as ctx:
        return walk(cli, ctx)


def test_every_built_group_is_listed_and_unbuilt_ones_are_not() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    listed = {line.split()[0] for line in result.output.split("Commands:")[1].splitlines() if line.strip()}
    for name, target in COMMANDS.items():
        built = importlib.util.find_spec(target.split(":")[0]) is not None
        assert (name in listed) == built, name


@pytest.mark.parametrize("path", all_command_paths(), ids=" ".join)
def test_help_for_every_command(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output
    # A help text, not just the usage line.
    assert len(result.output.splitlines()) > 3


def test_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["no-such-command"])
    assert result.exit_code == 2


def test_records_types_json() -> None:
    result = CliRunner().invoke(cli, ["records", "types", "--output", "json"])
    assert result.exit_code == 0, result.output
    kinds = {k["type"] for k in json.loads(result.output)["record_types"]}
    assert {
        "TopicRecord",
        "PartitionRecord",
        "PartitionChangeRecord",
        "LeaderChangeRecord",
    } <= kinds


def test_records_decode_roundtrip() -> None:
    record = records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="orders", topic_id=b"\x00" * 15 + b"\x01"))
    result = CliRunner().invoke(cli, ["records", "decode", record.SerializeToString().hex(), "-o", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["type"] == "topic"
    assert document["record"]["topic"]["name"] == "orders"
    # The id as every command shows one: Kafka's form (as `topics` and `log dump` print it).
    assert document["record"]["topic"]["topic_id"] == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_records_decode_shows_log_directories_in_kafkas_form() -> None:
    """KIP-858's directory ids (a partition's, a change's, a broker's) as Kafka's tools show them."""
    one, two = b"\x00" * 15 + b"\x65", b"\x01" * 16
    change = records_pb2.PartitionChangeRecord(directories=records_pb2.DirectoryList(ids=[one, two]))
    records = {
        "partition": records_pb2.MetadataRecord(partition=records_pb2.PartitionRecord(directories=[one, two])),
        "partition_change": records_pb2.MetadataRecord(partition_change=change),
        "register_broker": records_pb2.MetadataRecord(register_broker=records_pb2.RegisterBrokerRecord(log_dirs=[one])),
    }
    shown = {}
    for kind, record in records.items():
        result = CliRunner().invoke(cli, ["records", "decode", record.SerializeToString().hex(), "-o", "json"])
        assert result.exit_code == 0, result.output
        shown[kind] = json.loads(result.output)["record"][kind]
    assert shown["partition"]["directories"] == ["AAAAAAAAAAAAAAAAAAAAZQ", "AQEBAQEBAQEBAQEBAQEBAQ"]
    assert shown["partition_change"]["directories"] == {"ids": ["AAAAAAAAAAAAAAAAAAAAZQ", "AQEBAQEBAQEBAQEBAQEBAQ"]}
    assert shown["register_broker"]["log_dirs"] == ["AAAAAAAAAAAAAAAAAAAAZQ"]


def test_records_decode_bad_input_exits_2_and_names_the_argument() -> None:
    result = CliRunner().invoke(cli, ["records", "decode", "zz-not-hex"])
    assert result.exit_code == 2
    assert "DATA" in result.output


def test_bad_output_choice_exits_2() -> None:
    result = CliRunner().invoke(cli, ["records", "types", "--output", "yaml"])
    assert result.exit_code == 2
