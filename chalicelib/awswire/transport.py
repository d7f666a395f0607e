"""Keep-alive HTTP(S) connections per host, and how a failed exchange is reported.

Transport errors are sorted the way the storage port needs (storage.classify): `NotSent` (the
request never reached the server: safe to send again) and `AnswerLost` (it was sent, its answer
did not arrive: it may have been applied). A pooled connection the server closed while idle is
found out on the next use; a request is then sent again on a new connection if it certainly was
not sent, or is idempotent and no byte of its answer arrived. Anything else is `AnswerLost`, which
the port resolves by reading back: an answer cut after it began is never sent again here.
"""

from __future__ import annotations

import os
import threading
from typing import Any
from urllib.parse import urlsplit

from chalicelib.awswire.connection import Connection
from chalicelib.awswire.errors import AnswerLost, NotSent
from chalicelib.awswire.messages import Request, Response


class Transport:
    """Keep-alive HTTP(S) connections per host, shared by the threads of a process."""

    def __init__(self, connect_timeout: float, read_timeout: float, max_idle: int = 64) -> None:
        self.connect_timeout, self.read_timeout, self.max_idle = connect_timeout, read_timeout, max_idle
        self._idle: dict[tuple[str, str], list[Connection]] = {}
        self._lock = threading.Lock()
        self._tls: Any = None

    def _context(self) -> Any:
        if self._tls is None:
            import ssl

            bundle = os.environ.get("AWS_CA_BUNDLE")
            self._tls = ssl.create_default_context(cafile=bundle) if bundle else ssl.create_default_context()
        return self._tls

    def _connection(self, scheme: str, netloc: str, fresh: bool = False) -> tuple[Connection, bool]:
        while not fresh:
            with self._lock:
                idle = self._idle.get((scheme, netloc))
                kept = idle.pop() if idle else None
            if kept is None:
                break
            if kept.usable():
                return kept, True
            kept.close()  # the server closed it while it was idle (as urllib3 checks before reuse)
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or (443 if scheme == "https" else 80)
        try:
            tls = self._context() if scheme == "https" else None
            return Connection(scheme, parts.hostname or "", port, self.connect_timeout, self.read_timeout, tls), False
        except (OSError, ValueError) as exc:
            raise NotSent(f"could not connect to {netloc}: {type(exc).__name__}") from None

    def _keep(self, scheme: str, netloc: str, conn: Connection) -> None:
        with self._lock:
            idle = self._idle.setdefault((scheme, netloc), [])
            if len(idle) < self.max_idle:
                idle.append(conn)
                return
        conn.close()

    def send(self, request: Request) -> Response:
        parts = urlsplit(request.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for attempt in range(2):
            conn, reused = self._connection(parts.scheme, parts.netloc, fresh=attempt > 0)
            sent = False
            try:
                conn.send(request.method, target, request.headers, request.body)
                sent = True
                status, headers, content, closes = conn.receive(request.method)
            except (OSError, ValueError) as exc:
                conn.close()
                # A kept connection the server closed while idle fails at once, before any byte of
                # an answer: a request not sent, or an idempotent one, is sent again on a new one
                # (as HTTP clients do); others are in doubt, and so is any answer cut after it began.
                idle_close = isinstance(exc, (BrokenPipeError, ConnectionResetError)) and not conn.answer_began
                if reused and attempt == 0 and idle_close and (request.idempotent or not sent):
                    continue
                if not sent and not reused:
                    raise NotSent(f"{type(exc).__name__} sending to {parts.netloc}") from None
                raise AnswerLost(f"{type(exc).__name__} from {parts.netloc}") from None
            if closes:
                conn.close()
            else:
                self._keep(parts.scheme, parts.netloc, conn)
            return Response(status, headers, content)
        raise AnswerLost(f"connection to {parts.netloc} failed")  # not reached: the loop returns or raises
