"""``raftmeta records``: the metadata record types, and decoding of single records."""

from __future__ import annotations

import base64
import binascii

import click
from google.protobuf.descriptor import FieldDescriptor

from raftmeta.cli.common import emit_json, output_option, usage_error
from raftmeta.cli.log import message_fields
from raftmeta.records.decode import NotARecordError, parse_record
from raftmeta.v1 import records_pb2


def record_types() -> list[dict[str, object]]:
    """Every record type of the MetadataRecord oneof, with its fields, from the descriptors."""
    oneof = records_pb2.MetadataRecord.DESCRIPTOR.oneofs_by_name["record"]
    out: list[dict[str, object]] = []
    for field in oneof.fields:
        message = field.message_type
        assert message is not None, f"oneof member {field.name} is not a message"
        fields = [
            {
                "name": f.name,
                "type": f.message_type.name if f.message_type else _scalar_name(f),
                "repeated": f.is_repeated,
            }
            for f in message.fields
        ]
        out.append({"tag": field.number, "oneof_field": field.name, "type": message.name, "fields": fields})
    return out


def _scalar_name(field: FieldDescriptor) -> str:
    if field.enum_type is not None:
        return field.enum_type.name
    names = {v: k for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}
    return names[field.type].removeprefix("TYPE_").lower()


@click.group()
def records() -> None:
    """The metadata record types (proto/raftmeta/v1/records.proto)."""


@records.command("types")
@output_option
def types_command(output: str) -> None:
    """List every record type and its fields."""
    kinds = record_types()
    if output == "json":
        emit_json({"record_types": kinds})
        return
    for kind in kinds:
        fields = ", ".join(
            f"{f['name']}: {'repeated ' if f['repeated'] else ''}{f['type']}"
            for f in kind["fields"]  # type: ignore[attr-defined]
        )
        click.echo(f"{kind['tag']:>3}  {kind['type']:<24} {fields}")


@records.command("decode")
@click.argument("data")
@click.option("--encoding", type=click.Choice(["hex", "base64"]), default="hex", show_default=True)
@output_option
def decode_command(data: str, encoding: str, output: str) -> None:
    """Decode one serialized MetadataRecord given as hex or base64."""
    try:
        raw = bytes.fromhex(data) if encoding == "hex" else base64.b64decode(data, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise usage_error(f"not valid {encoding}: {exc}", "DATA") from exc
    try:
        record = parse_record(raw)
    except NotARecordError as exc:
        raise usage_error(str(exc), "DATA") from exc
    kind = record.WhichOneof("record")
    if kind is None:
        raise usage_error("the record sets no record type (empty oneof)", "DATA")
    # As `log dump` shows records: ids in Kafka's form, other bytes as hex (raftmeta.api.ids).
    fields = message_fields(getattr(record, kind))
    if output == "json":
        emit_json({"type": kind, "record": {kind: fields}})
    else:
        click.echo(f"{kind}: {fields}")
