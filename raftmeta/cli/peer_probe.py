"""What listens at a bootstrap address, found out before a command waits on it.

A gRPC client that reaches nothing, an HTTP/1 server or a Kafka listener sees only UNAVAILABLE and
retries it until --timeout, which then reads like a TLS problem. One short exchange per address
tells them apart:

- the TCP connect is refused: nothing listens there;
- the HTTP/2 client preface (which every gRPC call starts with) is answered with an HTTP/2 frame:
  a gRPC listener, the command goes ahead;
- it is answered with text (``HTTP/1.1 400 ...``, an HTML error page): an HTTP/1 server (a
  --metrics-listen endpoint, a web server);
- it is answered with a TLS record: a TLS listener reached without --tls-ca;
- the connection is closed unanswered: a Kafka listener does that (it reads ``PRI `` as a frame
  size it refuses), so a Kafka ApiVersions v0 request on a second connection settles it.

Anything else (no answer in time, a reset, bytes of another kind) proves nothing: the command goes
ahead and the client's own errors and hints apply. Sockets only, no gRPC or Kafka libraries, so a
command pays a round trip, not an import.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from dataclasses import dataclass
from enum import Enum

from raftmeta.api.addresses import parse_host_port

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# An empty SETTINGS frame: 3-byte length 0, type 4, no flags, stream 0 (RFC 9113, 3.4).
HTTP2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
HTTP2_FRAME_HEADER_BYTES = 9
HTTP2_SETTINGS = 4
# TLS record content types a TLS server may answer garbage with: alert (21), handshake (22).
TLS_RECORD_TYPES = (21, 22)
# Kafka ApiVersions v0 (api key 18): size, api key, version, correlation id, null client id.
KAFKA_CORRELATION_ID = 0x52414654
KAFKA_API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, KAFKA_CORRELATION_ID, -1)


class PeerKind(Enum):
    GRPC = "gRPC"
    UNKNOWN = "unknown"  # nothing proven: let the client try
    REFUSED = "connection refused"
    HTTP1 = "HTTP/1 server"
    TLS = "TLS listener"
    KAFKA = "Kafka listener"


@dataclass(frozen=True, slots=True)
class Peer:
    address: str
    kind: PeerKind

    @property
    def usable(self) -> bool:
        """Worth the client's time: gRPC, or not proven otherwise."""
        return self.kind in (PeerKind.GRPC, PeerKind.UNKNOWN)

    def describe(self) -> str:
        """What is at the address, for the error message."""
        if self.kind is PeerKind.REFUSED:
            return f"{self.address}: connection refused (nothing listens there)"
        if self.kind is PeerKind.HTTP1:
            return f"{self.address}: an HTTP/1 server answered, not gRPC (a --metrics-listen endpoint?)"
        if self.kind is PeerKind.TLS:
            return f"{self.address}: a TLS listener, reached in plaintext (give --tls-ca)"
        if self.kind is PeerKind.KAFKA:
            return f"{self.address}: a Kafka listener answered, not gRPC (Kafka clients use it)"
        return f"{self.address}: {self.kind.value}"


def probe(address: str, timeout_s: float, *, tls: bool) -> Peer:
    """What listens at ``address`` (``host:port``), within about ``timeout_s`` per exchange. With
    ``tls`` only the connect is tried: the plaintext exchanges would prove nothing there."""
    target = parse_host_port(address, "peer")
    try:
        sock = socket.create_connection(target, timeout=timeout_s)
    except ConnectionRefusedError:
        return Peer(address, PeerKind.REFUSED)
    except OSError:
        return Peer(address, PeerKind.UNKNOWN)  # unreachable, unresolvable, slow: the client says
    with sock:
        if tls:
            return Peer(address, PeerKind.UNKNOWN)
        answer = _exchange(sock, HTTP2_PREFACE + HTTP2_EMPTY_SETTINGS, HTTP2_FRAME_HEADER_BYTES)
    if answer is None:
        return Peer(address, PeerKind.UNKNOWN)
    if len(answer) >= HTTP2_FRAME_HEADER_BYTES and answer[3] == HTTP2_SETTINGS:
        return Peer(address, PeerKind.GRPC)
    if answer and _is_text(answer):
        # "HTTP/1.1 400 ..." from most servers; Python's http.server answers an HTTP/2.0 request
        # line with a bare HTML error page.
        return Peer(address, PeerKind.HTTP1)
    if answer and answer[0] in TLS_RECORD_TYPES:
        return Peer(address, PeerKind.TLS)
    if answer == b"" and _answers_kafka(target, timeout_s):
        return Peer(address, PeerKind.KAFKA)
    return Peer(address, PeerKind.UNKNOWN)


def _is_text(data: bytes) -> bool:
    return all(32 <= byte < 127 or byte in b"\r\n\t" for byte in data)


def _exchange(sock: socket.socket, request: bytes, want: int) -> bytes | None:
    """Send ``request``; the first ``want`` bytes of the answer (fewer if the peer closed first),
    or None when no answer came in time or the connection was reset."""
    try:
        sock.sendall(request)
        answer = b""
        while len(answer) < want:
            chunk = sock.recv(want - len(answer))
            if not chunk:
                break
            answer += chunk
        return answer
    except (TimeoutError, ConnectionResetError, BrokenPipeError):
        return None


def _answers_kafka(target: tuple[str, int], timeout_s: float) -> bool:
    """A Kafka response (size, then our correlation id) to ApiVersions v0 on a new connection."""
    with contextlib.suppress(OSError), socket.create_connection(target, timeout=timeout_s) as sock:
        answer = _exchange(sock, KAFKA_API_VERSIONS_V0, 8)
        if answer is not None and len(answer) == 8:
            correlation_id: int = struct.unpack(">i", answer[4:8])[0]
            return correlation_id == KAFKA_CORRELATION_ID
    return False
