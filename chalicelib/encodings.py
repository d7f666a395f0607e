"""Request bodies as clients encode them: what the pipeline parses and SigV4 hashes must agree."""

from __future__ import annotations


def latin1_as_utf8(body: bytes) -> bytes | None:
    """A body that is not UTF-8, read as ISO-8859-1 and written as UTF-8 (None: it is UTF-8).
    Iceberg Java up to 1.10 sends JSON in ISO-8859-1 but signs its UTF-8 bytes (apache/iceberg#17646):
    a signature over the transcoded text proves the text, so Latin-1 names arrive intact."""
    if body.isascii():  # nearly every body: no decode on the hot path
        return None
    try:
        body.decode("utf-8")
        return None
    except UnicodeDecodeError:
        return body.decode("latin-1").encode("utf-8")
