"""IAM wildcards (`*` any run, `?` one character, everything else literal) without backtracking.

A pattern is split at its stars into segments; the first segment must start the text, the last must
end it, and each middle one is taken at its leftmost place after the one before (taking the leftmost
occurrence never loses a match, so no choice is ever undone). Each step is a `str.find` or a search
with a star-free regex, so a match costs O(len(text) * len(segment)) in C at worst, whatever the
pattern: `bucket/*****q` costs what `bucket/*q` costs.

Lists also ask about sets of resources, named by a prefix (every ARN that starts with it):
`viable` (may the pattern match some member?) and `covers` (does it match every member?).
"""

from __future__ import annotations

import re
from functools import lru_cache

MAX_PATTERN = 2048  # IAM's limit for an ARN in a policy


Seg = tuple[str, "re.Pattern[str] | None"]  # the segment's text ("?" = any character), its regex if it has "?"


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> tuple[tuple[Seg, ...], bool]:
    """The pattern's segments between stars, and whether it has a star."""
    parts = pattern.split("*")
    segs = tuple(
        (part, re.compile("".join("." if c == "?" else re.escape(c) for c in part), re.DOTALL) if "?" in part else None)
        for part in parts
    )
    return segs, len(parts) > 1


def _at(seg: Seg, text: str, pos: int) -> bool:
    """The segment matches text exactly at pos."""
    plain, regex = seg
    if regex is None:
        return text.startswith(plain, pos)
    return pos + len(plain) <= len(text) and regex.match(text, pos) is not None


def _find(seg: Seg, text: str, pos: int, end: int) -> int:
    plain, regex = seg
    if regex is None:
        return text.find(plain, pos, end)
    found = regex.search(text, pos, end)
    return -1 if found is None else found.start()


def match(pattern: str, text: str, ignore_case: bool = False) -> bool:
    """Whether the whole text matches the pattern."""
    if ignore_case:
        pattern, text = pattern.lower(), text.lower()
    segs, star = _compiled(pattern)
    if not star:
        return len(text) == len(segs[0][0]) and _at(segs[0], text, 0)
    first, *middle, last = segs
    head, tail = len(first[0]), len(last[0])
    if head + tail > len(text) or not _at(first, text, 0) or not _at(last, text, len(text) - tail):
        return False
    pos, end = head, len(text) - tail
    for seg in middle:
        found = _find(seg, text, pos, end)
        if found < 0:
            return False
        pos = found + len(seg[0])
    return True


def _agrees(plain: str, text: str) -> bool:
    """The segment and the text agree on their common length ("?" agrees with anything)."""
    return all(p in ("?", c) for p, c in zip(plain, text, strict=False))


def viable(pattern: str, prefix: str) -> bool:
    """Whether the pattern matches some text that starts with prefix."""
    segs, star = _compiled(pattern)
    first = segs[0][0]
    if not star:
        return len(first) >= len(prefix) and _agrees(first, prefix)
    return _agrees(first, prefix)  # past the first star, anything can follow the prefix


def covers(pattern: str, prefix: str) -> bool:
    """Whether the pattern matches every text that starts with prefix (itself included)."""
    return pattern.endswith("*") and match(pattern, prefix)
