"""The HTTP framing of the catalog's own AWS client (chalicelib/awswire/connection.py and
transport.py), against a socket server that answers each request with scripted bytes: chunked
bodies, bodies delimited by the end of the connection, interim 1xx answers, answers without a body,
answers cut short, and kept-alive connections the server closed.

What must hold: an answer is read whole or reported lost (AnswerLost), never returned in part; the
stream is left at the start of the next answer (the next request on the same connection reads its
own answer); and a request is sent again only when it certainly was not sent, or is idempotent and
no byte of its answer arrived: never when an answer was cut after it began.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from chalicelib.awswire import AnswerLost, ClientError, NotSent, Request, S3Client, Transport
from chalicelib.awswire.connection import Connection

OK = b'HTTP/1.1 200 OK\r\nETag: "e"\r\nContent-Length: 2\r\n\r\nok'
KEEP, CLOSE, RESET = "keep", "close", "reset"  # what the server does after an answer


@dataclass
class Server:
    """Answers the requests it reads, in order, with `script`'s (bytes, then) items; an item of
    None closes the connection without answering. `seen` holds (connection number, request line)."""

    script: list[tuple[bytes, str] | None]
    seen: list[tuple[int, str]] = field(default_factory=list)
    port: int = 0

    def start(self) -> Server:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        self.port = listener.getsockname()[1]
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        for number in range(1000):
            conn, _ = listener.accept()
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        reader = conn.makefile("rb")
        while True:
            line = reader.readline()
            if not line:
                break
            length = 0
            while (header := reader.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            reader.read(length)
            self.seen.append((number, line.decode().strip()))
            item = self.script.pop(0) if self.script else None
            if item is None:
                break
            answer, then = item
            conn.sendall(answer)
            if then != KEEP:
                if then == RESET:  # an RST, not a FIN: the client's next write fails at once
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
        reader.close()
        conn.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connections(self) -> int:
        return len({n for n, _ in self.seen})


def serve(*script: tuple[bytes, str] | None) -> Server:
    return Server(list(script)).start()


def client(server: Server) -> S3Client:
    return S3Client(server.url, "us-east-1", read_timeout=2.0, credentials=lambda: ("AKID", "secret", None))


def get(transport: Transport, server: Server, method: str = "GET", idempotent: bool = True) -> tuple[int, bytes]:
    request = Request(method, f"{server.url}/b/k", {"host": "x"}, b"", idempotent, transport)
    answer = transport.send(request)
    return answer.status_code, answer.content


@pytest.fixture
def transport() -> Iterator[Transport]:
    yield Transport(1.0, 2.0)


@pytest.fixture
def race(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's close reaches the client after it checked the kept connection (the race every
    pooled client loses sometimes): the check always says usable."""
    monkeypatch.setattr(Connection, "usable", lambda self: True)


# ---- bodies ----------------------------------------------------------------------------------------


def test_a_chunked_body_with_extensions_and_trailers_is_read_whole(transport: Transport) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4;name=value\r\nWiki\r\n5\r\npedia\r\nE;a;b=c\r\n in\r\n\r\nchunks.\r\n"
        b"0\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n"
    )
    server = serve((chunked, KEEP), (OK, KEEP))
    assert get(transport, server) == (200, b"Wikipedia in\r\n\r\nchunks.")
    assert get(transport, server) == (200, b"ok")  # the trailers were read: the next answer is framed right
    assert server.connections() == 1


def test_a_body_delimited_by_the_end_of_the_connection(transport: Transport) -> None:
    server = serve((b"HTTP/1.1 200 OK\r\n\r\nto the end", CLOSE), (OK, KEEP))
    assert get(transport, server) == (200, b"to the end")
    assert get(transport, server) == (200, b"ok")
    assert server.connections() == 2  # that connection is not kept: it carried its body's end


def test_answers_without_a_body_leave_the_stream_at_the_next_answer(transport: Transport) -> None:
    server = serve(
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", KEEP),  # HEAD: the length of a body not sent
        (b"HTTP/1.1 204 No Content\r\n\r\n", KEEP),
        (b'HTTP/1.1 304 Not Modified\r\nETag: "e"\r\n\r\n', KEEP),
        (OK, KEEP),
    )
    assert get(transport, server, "HEAD") == (200, b"")
    assert get(transport, server, "DELETE") == (204, b"")
    assert get(transport, server) == (304, b"")
    assert get(transport, server) == (200, b"ok")
    assert server.connections() == 1


def test_s3_calls_over_answers_without_a_body() -> None:
    server = serve(
        (b'HTTP/1.1 200 OK\r\nETag: "h"\r\nContent-Length: 1000\r\nx-amz-meta-a: 1\r\n\r\n', KEEP),
        (b"HTTP/1.1 204 No Content\r\n\r\n", KEEP),
        (b'HTTP/1.1 304 Not Modified\r\nETag: "e"\r\n\r\n', KEEP),
        (OK, KEEP),
    )
    s3 = client(server)
    assert s3.head_object(Bucket="b", Key="k") == {"ETag": '"h"', "Metadata": {"a": "1"}}
    assert s3.delete_object(Bucket="b", Key="k") == {}
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket="b", Key="k", IfNoneMatch='"e"')
    assert caught.value.response["Error"]["Code"] == "304"
    assert s3.get_object(Bucket="b", Key="k")["Body"].read() == b"ok"
    assert server.connections() == 1


# ---- interim answers -------------------------------------------------------------------------------


def test_100_continue_and_unsolicited_1xx_answers_are_passed_over(transport: Transport) -> None:
    server = serve(
        (b"HTTP/1.1 100 Continue\r\n\r\n" + OK, KEEP),
        (b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n" + OK, KEEP),
        (OK, KEEP),
    )
    assert get(transport, server, "PUT") == (200, b"ok")
    assert get(transport, server) == (200, b"ok")
    assert get(transport, server) == (200, b"ok")
    assert server.connections() == 1


def test_a_protocol_switch_nobody_asked_for_is_an_answer_lost(transport: Transport) -> None:
    server = serve((b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", KEEP))
    with pytest.raises(AnswerLost):
        get(transport, server)


# ---- answers cut short -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd",  # the body
        b"HTTP/1.1 200 OK\r\nContent-Len",  # the headers
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nabc",  # a chunk
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",  # before the last chunk
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",  # not a chunk size
    ],
)
def test_an_answer_cut_short_is_lost_never_returned_in_part(transport: Transport, answer: bytes) -> None:
    server = serve((answer, CLOSE))
    with pytest.raises(AnswerLost):
        get(transport, server)
    assert len(server.seen) == 1


def test_an_answer_cut_on_a_kept_connection_is_not_sent_again(transport: Transport) -> None:
    """Even an idempotent GET: once its answer began, the port decides (by reading again)."""
    server = serve((OK, KEEP), (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd", CLOSE), (OK, KEEP))
    assert get(transport, server) == (200, b"ok")
    with pytest.raises(AnswerLost):
        get(transport, server)
    assert server.seen == [(0, "GET /b/k HTTP/1.1")] * 2


def test_s3_get_of_a_cut_body_raises_answer_lost() -> None:
    server = serve((b'HTTP/1.1 200 OK\r\nETag: "e"\r\nContent-Length: 10\r\n\r\nabcd', CLOSE))
    with pytest.raises(AnswerLost):
        client(server).get_object(Bucket="b", Key="k")


# ---- connections the server closed -----------------------------------------------------------------


def test_a_connection_closed_while_idle_is_not_reused() -> None:
    """As LocalStack and S3 do, without "Connection: close": the client finds out on its next use.
    No request fails, and none is sent twice."""
    server = serve(*[(OK, CLOSE)] * 6)
    s3 = client(server)
    for _ in range(5):
        assert s3.get_object(Bucket="b", Key="k")["Body"].read() == b"ok"
        time.sleep(0.05)  # the server's close reaches the client's idle socket
    s3.put_object(Bucket="b", Key="k", Body=b"x", IfNoneMatch="*")  # not idempotent: must not fail either
    assert [line for _, line in server.seen] == ["GET /b/k HTTP/1.1"] * 5 + ["PUT /b/k HTTP/1.1"]  # each once
    assert server.connections() == 6


def test_a_close_found_only_by_the_request_resends_an_idempotent_one(transport: Transport, race: None) -> None:
    """The kept connection was closed as the request went out: no byte of an answer came. An
    idempotent request is sent again on a new connection."""
    server = serve((OK, KEEP), None, (OK, KEEP))
    assert get(transport, server) == (200, b"ok")
    assert get(transport, server) == (200, b"ok")
    assert server.seen == [(0, "GET /b/k HTTP/1.1"), (0, "GET /b/k HTTP/1.1"), (1, "GET /b/k HTTP/1.1")]


def test_a_close_found_only_by_the_request_leaves_a_conditional_write_in_doubt(
    transport: Transport, race: None
) -> None:
    """The same close, under a request that is not idempotent: the server may have applied it
    before closing, so it is not sent again here (the port reads back)."""
    server = serve((OK, KEEP), None)
    assert get(transport, server) == (200, b"ok")
    with pytest.raises(AnswerLost):
        get(transport, server, "PUT", idempotent=False)
    assert len(server.seen) == 2


def test_a_reset_connection_that_took_no_request_resends_even_a_conditional_write(
    transport: Transport, race: None
) -> None:
    """The server reset the kept connection: the request's write fails, so it certainly was not
    sent, and is sent on a new connection whatever it is."""
    server = serve((OK, RESET), (OK, KEEP))
    assert get(transport, server) == (200, b"ok")
    time.sleep(0.05)  # the reset reaches the client
    assert get(transport, server, "PUT", idempotent=False) == (200, b"ok")
    assert server.seen == [(0, "GET /b/k HTTP/1.1"), (1, "PUT /b/k HTTP/1.1")]


def test_no_server_is_not_sent(transport: Transport) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nobody listens there
    request = Request("PUT", f"http://127.0.0.1:{port}/b/k", {"host": "x"}, b"x", False, transport)
    with pytest.raises(NotSent):
        transport.send(request)
