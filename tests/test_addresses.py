"""raftmeta/api/addresses.py: the one HOST:PORT parser, with IPv6 in brackets and errors naming the
field and the rule."""

from __future__ import annotations

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
