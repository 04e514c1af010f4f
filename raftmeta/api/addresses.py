"""``HOST:PORT``: the one parser of the addresses raftmeta is given (listeners, peers, bootstrap
servers, voters, probes), and the one way back to text. Pure.

An IPv6 host is written in brackets, as URLs and Kafka's tools write it (``[::1]:9093``); the host
returned has no brackets (what sockets and Kafka's Endpoint take). A bad address is refused with a
ValueError that names the field it was given in and the rule it breaks.
"""

from __future__ import annotations

from typing import Final

PORT_MAX: Final = 65535


def parse_host_port(text: str, field: str, *, any_port: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPV6]:PORT`` -> (host, port). The port is 1..65535, or 0..65535 with
    ``any_port`` (a listen address, where 0 asks the system for a free port)."""
    low = 0 if any_port else 1
    rule = f"is not HOST:PORT with a port in {low}..{PORT_MAX} (an IPv6 host in brackets: [::1]:9093)"
    if "://" in text:
        raise ValueError(f"{field} {text!r} is a URL: give HOST:PORT, with no scheme")
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        colon, port = rest[:1], rest[1:]
        if not bracket or ":" not in host:
            raise ValueError(f"{field} {text!r} {rule}")
    else:
        host, colon, port = text.rpartition(":")
        if ":" in host:
            raise ValueError(f"{field} {text!r}: an IPv6 host must be in brackets ([{host}]:{port})")
    if colon != ":" or not host or not port.isdigit() or not low <= int(port) <= PORT_MAX:
        raise ValueError(f"{field} {text!r} {rule}")
    return host, int(port)


def join_host_port(host: str, port: int) -> str:
    """(host, port) -> ``HOST:PORT``, an IPv6 host in brackets: what :func:`parse_host_port` reads."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
