"""One HTTP/1.1 keep-alive connection: a request written, its answer framed (RFC 9112).

Written on a socket rather than with http.client, whose import (email.parser and its kin) would cost
a cold start ~50-70 ms for the few headers S3 sends. An answer is read whole or not at all: a body
cut short raises (an OSError or ValueError, which the transport reports as AnswerLost), never
returns part of an object.
"""

from __future__ import annotations

from typing import Any

from chalicelib.awswire.messages import Headers

_LINE = 65537  # the longest status, header, chunk-size or trailer line read


class Connection:
    def __init__(
        self, scheme: str, host: str, port: int, connect_timeout: float, read_timeout: float, tls: Any
    ) -> None:
        import socket

        sock = socket.create_connection((host, port), timeout=connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small requests must not wait for ACKs
        if scheme == "https":
            sock = tls.wrap_socket(sock, server_hostname=host)
        sock.settimeout(read_timeout)
        self.sock = sock
        self.reader = sock.makefile("rb")
        # Whether a byte of the current answer arrived: a connection that fails before that was
        # (maybe) closed by the server while idle; one that fails after lost an answer.
        self.answer_began = False

    def usable(self) -> bool:
        """A kept connection is usable if the server has not closed it: an idle socket that is
        readable holds an EOF (or bytes nobody asked for)."""
        import select

        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        try:
            self.reader.close()
            self.sock.close()
        except OSError:
            pass

    def send(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        self.answer_began = False
        lines = [f"{method} {target} HTTP/1.1"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method in ("PUT", "POST"):
            lines.append(f"content-length: {len(body)}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def receive(self, method: str) -> tuple[int, Headers, bytes, bool]:
        """(status, headers, body, whether the server closes the connection). Interim answers
        (1xx: 100 Continue, 103 Early Hints), asked for or not, are read and passed over."""
        while True:
            version, status, headers = self._head()
            if status == 101:
                raise ValueError("the server switched protocols, which no request asked for")
            if not 100 <= status < 200:
                break
        closes = headers.get("connection", "").lower() == "close" or (
            version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive"
        )
        if method == "HEAD" or status in (204, 304):
            return status, headers, b"", closes
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return status, headers, self._chunks(), closes
        if "content-length" in headers:
            size = int(headers["content-length"])
            body = self.reader.read(size)
            if len(body) != size:
                raise ConnectionResetError("the answer's body was cut")
            return status, headers, body, closes
        return status, headers, self.reader.read(), True  # delimited by the end of the connection

    def _head(self) -> tuple[str, int, Headers]:
        """The status line and the headers of one answer."""
        status_line = self.reader.readline(_LINE)
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        self.answer_began = True
        version, _, rest = status_line.decode("latin-1").partition(" ")
        status = int(rest[:3])
        headers = Headers()
        while True:
            line = self.reader.readline(_LINE)
            if line in (b"\r\n", b"\n"):
                return version, status, headers
            if not line:
                raise ConnectionResetError("the answer was cut in its headers")
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()

    def _chunks(self) -> bytes:
        """A chunked body: each chunk's size in hex (its extensions, after ';', ignored), the last
        of size 0, then trailers up to an empty line (read and dropped)."""
        parts: list[bytes] = []
        while True:
            size = int(self.reader.readline(_LINE).split(b";", 1)[0].strip() or b"x", 16)
            if size == 0:
                while self.reader.readline(_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            chunk = self.reader.read(size)
            if len(chunk) != size:
                raise ConnectionResetError("the answer's body was cut")
            parts.append(chunk)
            self.reader.readline(_LINE)
