"""The storage port's HTTP client (chalicelib/awswire.py) against a server that closes kept-alive
connections while they sit idle, as LocalStack and S3 do: no request fails, and none is sent twice."""

from __future__ import annotations

import socket
import threading
import time

from chalicelib.awswire import S3Client


def _server_closing_after_each_answer() -> tuple[int, list[bytes]]:
    seen: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            conn, _ = listener.accept()
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            seen.append(data.split(b"\r\n", 1)[0])
            conn.sendall(b'HTTP/1.1 200 OK\r\nETag: "e"\r\nContent-Length: 2\r\n\r\nok')
            conn.close()  # no "Connection: close": the client finds out on its next use

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], seen


def test_a_connection_closed_while_idle_is_not_reused(monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    port, seen = _server_closing_after_each_answer()
    client = S3Client(f"http://127.0.0.1:{port}", "us-east-1")
    for _ in range(5):
        assert client.get_object(Bucket="b", Key="k")["Body"].read() == b"ok"
        time.sleep(0.05)  # the server's close reaches the client's idle socket
    client.put_object(Bucket="b", Key="k", Body=b"x", IfNoneMatch="*")  # not idempotent: must not fail either
    assert seen == [b"GET /b/k HTTP/1.1"] * 5 + [b"PUT /b/k HTTP/1.1"]  # each sent once
