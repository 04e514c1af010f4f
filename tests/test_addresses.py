"""raftmeta/api/addresses.py: the one HOST:PORT parser, with IPv6 in brackets and errors naming the
field and the rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from raftmeta.api.addresses import join_host_port, parse_host_port


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("127.0.0.1:9092", ("127.0.0.1", 9092)),
        ("localhost:1", ("localhost", 1)),
        ("node-1.example:65535", ("node-1.example", 65535)),
        ("[::1]:9093", ("::1", 9093)),
        ("[fe80::1%eth0]:80", ("fe80::1%eth0", 80)),
    ],
)
def test_hosts_and_ports_are_read_and_written_back(text: str, parsed: tuple[str, int]) -> None:
    assert parse_host_port(text, "--listen") == parsed
    assert join_host_port(*parsed) == text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nohost", "is not HOST:PORT with a port in 1..65535"),
        ("host:", "is not HOST:PORT"),
        (":80", "is not HOST:PORT"),
        ("h:x", "is not HOST:PORT"),
        ("h:-1", "is not HOST:PORT"),
        ("h:65536", "port in 1..65535"),
        ("h:0", "port in 1..65535"),
        ("[::1]", "is not HOST:PORT"),
        ("[::1]9093", "is not HOST:PORT"),
        ("[::1:9093", "is not HOST:PORT"),
        ("[localhost]:9093", "is not HOST:PORT"),
        ("::1:9093", r"an IPv6 host must be in brackets \(\[::1\]:9093\)"),
        ("http://h:80", "is a URL: give HOST:PORT, with no scheme"),
    ],
)
def test_a_bad_address_names_the_field_and_the_rule(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as refused:
        parse_host_port(text, "--kafka-listener")
    assert str(refused.value).startswith(f"--kafka-listener {text!r}")


def test_a_listen_address_may_ask_for_any_port() -> None:
    assert parse_host_port("127.0.0.1:0", "--metrics-listen", any_port=True) == ("127.0.0.1", 0)
    with pytest.raises(ValueError, match=r"port in 0\.\.65535"):
        parse_host_port("127.0.0.1:65536", "--metrics-listen", any_port=True)


# Splits at ":" outside the parser that are not of HOST:PORT, each with what it splits.
NOT_HOST_PORT = {
    "raftmeta/server/config.py": "ID@HOST:PORT:DIRECTORY_ID: the directory id off the end, then parse_voters",
    "raftmeta/server/services.py": "a gRPC peer string (ipv4:HOST:PORT): the caller's kind and host, for a log key",
    "raftmeta/jobs/datasource.py": "NODE:SEGMENT@POSITION of a data source's segments option",
    "raftmeta/chaos/linearizable.py": "CODE: message of a recorded error",
    "raftmeta/cli/main.py": "MODULE:ATTRIBUTE of a lazily loaded command",
    "raftmeta/cli/placement.py": "a replica list 1:2:3",
    "raftmeta/bench/results.py": "KEY: VALUE lines",
    "placement/manual.py": "a replica list 1:2:3",
}


def colon_splits() -> dict[str, list[int]]:
    """Every ``.split(":")``, ``.partition(":")`` and ``.rpartition(":")`` in the project's code,
    by file (the lines)."""
    root = Path(__file__).resolve().parents[1]
    found: dict[str, list[int]] = {}
    for package in ("raftmeta", "placement"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("split", "partition", "rpartition")
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value == ":"
                ):
                    found.setdefault(str(path.relative_to(root)), []).append(node.lineno)
    return found


def test_host_port_is_split_only_by_the_one_parser() -> None:
    """A copy of the HOST:PORT rule gets IPv6 or the port's range wrong: everything that splits at
    a colon is the parser or something that is not an address."""
    copies = {path: lines for path, lines in colon_splits().items() if path not in NOT_HOST_PORT}
    assert copies == {"raftmeta/api/addresses.py": [29]}
