"""Glue `GetTables` `Expression`: a regular expression over table names, matched in linear time.

Python's `re` backtracks: `.*.*.*.*.*x` against a 170-character name took 11-14 s. Here the pattern
is compiled to a position (Glushkov) automaton and run as a DFA built lazily from sets of positions
(ints as bitsets), so a name costs one dictionary step per character once warm, whatever the
pattern. Accepted syntax (case-insensitive, whole-name match): literals, `.`, escapes (`\\.`, `\\d`,
`\\w`, `\\s` and their upper-case negations), classes `[a-z0-9_]` and `[^...]`, groups `( )` and
`(?: )`, alternation `|`, quantifiers `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` (a trailing `?` is
accepted and changes nothing for a whole match), a leading `^` and a trailing `$`. Glue's own
convention holds: a `*` that follows no atom means "anything". Anything else (backreferences,
lookarounds) is refused.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from chalicelib.errors import BadRequest

MAX_POSITIONS = 1024  # characters of the automaton once {n,m} is expanded
MAX_REPEAT = 255  # names are at most 255 characters: a larger count can never match
_DFA_STATES = 4096
Pred = Callable[[str], bool]
_CLASSES: dict[str, Pred] = {
    "d": str.isdigit,
    "w": lambda c: c.isalnum() or c == "_",
    "s": str.isspace,
}


def _invalid(message: str) -> BadRequest:
    return BadRequest(f"Invalid Expression: {message}")


# ---- syntax tree ----------------------------------------------------------------------------------


@dataclass
class _Node:
    kind: str  # "char", "cat", "alt", "star", "opt", "empty"
    pred: Pred | None = None
    kids: list[_Node] = field(default_factory=list)


def _copy(node: _Node) -> _Node:
    return _Node(node.kind, node.pred, [_copy(k) for k in node.kids])


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0

    def peek(self) -> str | None:
        return self.text[self.i] if self.i < len(self.text) else None

    def take(self) -> str:
        ch = self.text[self.i]
        self.i += 1
        return ch

    def parse(self) -> _Node:
        if self.peek() == "^":
            self.i += 1
        node = self.alt()
        if self.peek() == "$" and self.i == len(self.text) - 1:
            self.i += 1
        if self.i != len(self.text):
            raise _invalid(f"unexpected {self.text[self.i]!r} at position {self.i}")
        return node

    def alt(self) -> _Node:
        options = [self.concat()]
        while self.peek() == "|":
            self.i += 1
            options.append(self.concat())
        return options[0] if len(options) == 1 else _Node("alt", kids=options)

    def concat(self) -> _Node:
        items: list[_Node] = []
        while self.peek() not in (None, "|", ")") and not (self.peek() == "$" and self.i == len(self.text) - 1):
            items.append(self.repeat())
        if not items:
            return _Node("empty")
        return items[0] if len(items) == 1 else _Node("cat", kids=items)

    def repeat(self) -> _Node:
        node = self.atom()
        while self.peek() in ("*", "+", "?", "{"):
            low, high = self.quantifier()
            node = _repeated(node, low, high)
            if self.peek() == "?":  # lazy: the same whole-name matches
                self.i += 1
        return node

    def quantifier(self) -> tuple[int, int | None]:
        ch = self.take()
        if ch != "{":
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        found = re.match(r"(\d{1,4})(,(\d{0,4}))?\}", self.text[self.i :])
        if found is None:
            raise _invalid("a { quantifier needs {n}, {n,} or {n,m}")
        self.i += found.end()
        low = int(found[1])
        high = low if found[2] is None else (int(found[3]) if found[3] else None)
        if high is not None and high < low:
            raise _invalid("{n,m} needs n <= m")
        return low, high

    def atom(self) -> _Node:
        ch = self.take()
        if ch == "(":
            if self.text.startswith("?", self.i):
                if not self.text.startswith("?:", self.i):
                    raise _invalid("lookarounds and named groups are not supported")
                self.i += 2
            node = self.alt()
            if self.peek() != ")":
                raise _invalid("unbalanced parenthesis")
            self.i += 1
            return node
        if ch == "[":
            return _Node("char", self.char_class())
        if ch == ".":
            return _Node("char", lambda c: True)
        if ch == "\\":
            return _Node("char", self.escape())
        if ch in "*+?{":
            raise _invalid(f"nothing to repeat at position {self.i - 1}")
        if ch in ")]}^$" and ch != "}":
            raise _invalid(f"unexpected {ch!r} at position {self.i - 1}")
        return _Node("char", _literal(ch))

    def escape(self) -> Pred:
        if self.peek() is None:
            raise _invalid("a trailing backslash")
        ch = self.take()
        if ch.lower() in _CLASSES:
            test = _CLASSES[ch.lower()]
            return test if ch.islower() else (lambda c: not test(c))
        if ch.isdigit() or ch in "bBAZzk":
            raise _invalid(f"\\{ch} (backreferences and anchors) is not supported")
        if ch.isalpha():
            raise _invalid(f"unknown escape \\{ch}")
        return _literal(ch)

    def char_class(self) -> Pred:
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        tests: list[Pred] = []
        first = True
        while True:
            if self.peek() is None:
                raise _invalid("unterminated [ class")
            ch = self.take()
            if ch == "]" and not first:
                break
            first = False
            if ch == "\\":
                tests.append(self.escape())
                continue
            if self.peek() == "-" and self.i + 1 < len(self.text) and self.text[self.i + 1] != "]":
                self.i += 1
                end = self.take()
                if end < ch:
                    raise _invalid(f"bad range {ch}-{end}")
                lo, hi = ch, end
                tests.append(lambda c, lo=lo, hi=hi: lo <= c <= hi or lo <= c.upper() <= hi or lo <= c.lower() <= hi)
                continue
            tests.append(_literal(ch))

        def member(c: str) -> bool:
            return any(t(c) for t in tests) != negate

        return member


def _literal(ch: str) -> Pred:
    low = ch.lower()
    return lambda c: c.lower() == low


def _repeated(node: _Node, low: int, high: int | None) -> _Node:
    if low > MAX_REPEAT or (high is not None and high > MAX_REPEAT):
        raise _invalid(f"a repeat count above {MAX_REPEAT} (names are at most 255 characters)")
    parts = [_copy(node) for _ in range(low)]
    if high is None:
        parts.append(_Node("star", kids=[_copy(node)]))
    else:
        parts += [_Node("opt", kids=[_copy(node)]) for _ in range(high - low)]
    if not parts:
        return _Node("empty")
    return parts[0] if len(parts) == 1 else _Node("cat", kids=parts)


# ---- position automaton ------------------------------------------------------------------------------


class Expression:
    """A compiled Expression; `fullmatch(name)` answers whether the whole name matches."""

    def __init__(self, tree: _Node) -> None:
        self.preds: list[Pred] = []
        self.follow: list[int] = []
        nullable, first, last = self._build(tree)
        self.nullable, self.first, self.last = nullable, first, last
        self._masks: dict[str, int] = {}
        self._steps: dict[tuple[int, str], int] = {}

    def _build(self, node: _Node) -> tuple[bool, int, int]:
        """(nullable, first positions, last positions) of a node, recording follow sets."""
        if node.kind == "empty":
            return True, 0, 0
        if node.kind == "char":
            if len(self.preds) >= MAX_POSITIONS:
                raise _invalid(f"too complex: more than {MAX_POSITIONS} characters once repeats are expanded")
            assert node.pred is not None
            self.preds.append(node.pred)
            self.follow.append(0)
            bit = 1 << (len(self.preds) - 1)
            return False, bit, bit
        if node.kind == "alt":
            built = [self._build(k) for k in node.kids]
            return any(b[0] for b in built), _or(b[1] for b in built), _or(b[2] for b in built)
        if node.kind == "cat":
            nullable, first, last = True, 0, 0
            for kid in node.kids:
                k_null, k_first, k_last = self._build(kid)
                self._link(last, k_first)
                first = first | k_first if nullable else first
                last = last | k_last if k_null else k_last
                nullable = nullable and k_null
            return nullable, first, last
        k_null, k_first, k_last = self._build(node.kids[0])  # star or opt
        if node.kind == "star":
            self._link(k_last, k_first)
        return True, k_first, k_last

    def _link(self, sources: int, targets: int) -> None:
        while sources:
            low = sources & -sources
            self.follow[low.bit_length() - 1] |= targets
            sources ^= low

    def _mask(self, ch: str) -> int:
        mask = self._masks.get(ch)
        if mask is None:
            mask = _or(1 << i for i, pred in enumerate(self.preds) if pred(ch))
            if len(self._masks) < 1024:
                self._masks[ch] = mask
        return mask

    def _step(self, state: int, ch: str) -> int:
        key = (state, ch)
        found = self._steps.get(key)
        if found is None:
            reach, rest = 0, state
            while rest:
                low = rest & -rest
                reach |= self.follow[low.bit_length() - 1]
                rest ^= low
            found = reach & self._mask(ch)
            if len(self._steps) >= _DFA_STATES:
                self._steps.clear()  # bounded memory; rebuilt as needed
            self._steps[key] = found
        return found

    def fullmatch(self, name: str) -> bool:
        if not name:
            return self.nullable
        state = self.first & self._mask(name[0])
        for ch in name[1:]:
            if not state:
                return False
            state = self._step(state, ch)
        return bool(state & self.last)


def _or(bits: object) -> int:
    out = 0
    for b in bits:  # type: ignore[attr-defined]
        out |= b
    return out


def glue_to_regex(pattern: str) -> str:
    """Glue's convention: a `*` that follows no atom (not after `.`, `]`, `)` or an escape) means
    "anything"; every other character keeps its regex meaning."""
    return re.sub(r"(?<![.\])\\])\*", ".*", pattern)


def compile_expression(pattern: str) -> Expression:
    if any(c not in string.printable for c in pattern):
        raise _invalid("only printable characters")
    return Expression(_Parser(glue_to_regex(pattern)).parse())
