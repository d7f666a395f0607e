"""Glue `GetTables` `Expression`: a regular expression over table names, matched in linear time.

Python's `re` backtracks: `.*.*.*.*.*x` against a 170-character name took 11-14 s. Here the pattern
is compiled to a position (Glushkov) automaton and run as a DFA built lazily from sets of positions
(ints as bitsets): each character of a name is one dictionary step once warm, and at most one pass
over the positions when not, whatever the pattern. Nothing backtracks, so the time is linear in the
name. Compiling is bounded too: the automaton has at most `MAX_POSITIONS` positions (counted while
parsing, before any `{n,m}` is expanded) and groups nest at most `MAX_DEPTH` deep.

Accepted syntax (case-insensitive, whole-name match): literals, `.`, escapes (`\\.`, `\\\\`, `\\d`,
`\\w`, `\\s` and their upper-case negations), classes `[a-z0-9_]` and `[^...]`, groups `( )` and
`(?: )`, alternation `|` (top level and in groups), quantifiers `*`, `+`, `?`, `{n}`, `{n,}`,
`{n,m}` on atoms and groups (a trailing lazy `?` changes nothing for a whole match), a leading `^`
and a trailing `$` (ignored). Glue's own convention holds: a `*` that follows no atom means
"anything". Anything else (backreferences, lookarounds, other anchors, possessive or stacked
quantifiers) answers BadRequest.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from chalicelib.errors import BadRequest

MAX_POSITIONS = 1024  # characters of the automaton once {n,m} is expanded
MAX_REPEAT = 255  # names are at most 255 characters: a larger count can never match
MAX_DEPTH = 32  # nested groups; keeps the recursive parser far from Python's recursion limit
_DFA_STEPS = 4096  # cached (state, character) transitions; cleared when full
_MASKS = 1024  # cached per-character position masks
Pred = Callable[[str], bool]
_CLASSES: dict[str, Pred] = {
    "d": str.isdecimal,  # as re's \d: decimal digits only
    "w": lambda c: c.isalnum() or c == "_",
    "s": str.isspace,
}
_BOUNDS = re.compile(r"(\d{1,4})(,(\d{0,4}))?\}")  # fixed-width, anchored by match(): no backtracking


def _invalid(message: str) -> BadRequest:
    return BadRequest(f"Invalid Expression: {message}")


def _too_complex(message: str) -> BadRequest:
    return BadRequest(f"Expression is too complex: {message}")


# ---- syntax tree ----------------------------------------------------------------------------------


@dataclass
class _Node:
    kind: str  # "char", "cat", "alt", "star", "opt", "empty"
    pred: Pred | None = None
    kids: list[_Node] = field(default_factory=list)
    size: int = 0  # positions (char nodes) in this subtree


def _char(pred: Pred) -> _Node:
    return _Node("char", pred, size=1)


def _group(kind: str, kids: list[_Node]) -> _Node:
    return _Node(kind, kids=kids, size=sum(k.size for k in kids))


def _copy(node: _Node) -> _Node:
    # Copies share predicates, which lets the automaton test each distinct predicate once.
    return _Node(node.kind, node.pred, [_copy(k) for k in node.kids], node.size)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0
        self.positions = 0  # positions in the tree so far, repeats expanded
        self.depth = 0

    def peek(self) -> str | None:
        return self.text[self.i] if self.i < len(self.text) else None

    def take(self) -> str:
        ch = self.text[self.i]
        self.i += 1
        return ch

    def at_final_dollar(self) -> bool:
        return self.peek() == "$" and self.i == len(self.text) - 1

    def parse(self) -> _Node:
        if self.peek() == "^":
            self.i += 1
        node = self.alt()
        if self.at_final_dollar():
            self.i += 1
        if self.i != len(self.text):
            raise _invalid(f"unexpected {self.text[self.i]!r} at position {self.i}")
        return node

    def alt(self) -> _Node:
        options = [self.concat()]
        while self.peek() == "|":
            self.i += 1
            options.append(self.concat())
        return options[0] if len(options) == 1 else _group("alt", options)

    def concat(self) -> _Node:
        items: list[_Node] = []
        while self.peek() not in (None, "|", ")") and not self.at_final_dollar():
            items.append(self.repeat())
        if not items:
            return _Node("empty")
        return items[0] if len(items) == 1 else _group("cat", items)

    def repeat(self) -> _Node:
        node = self.atom()
        if self.peek() not in ("*", "+", "?", "{"):
            return node
        low, high = self.quantifier()
        if self.peek() == "?":  # lazy: the same whole-name matches
            self.i += 1
        if self.peek() in ("+", "?", "{"):  # `*` here was turned into `.*` by glue_to_regex
            raise _invalid(f"multiple repeat at position {self.i} (possessive quantifiers are not supported)")
        return self.expand(node, low, high)

    def quantifier(self) -> tuple[int, int | None]:
        ch = self.take()
        if ch != "{":
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        found = _BOUNDS.match(self.text, self.i)
        if found is None:
            raise _invalid("a { quantifier needs {n}, {n,} or {n,m}")
        self.i = found.end()
        low = int(found[1])
        high = low if found[2] is None else (int(found[3]) if found[3] else None)
        if high is not None and high < low:
            raise _invalid("{n,m} needs n <= m")
        return low, high

    def expand(self, node: _Node, low: int, high: int | None) -> _Node:
        """`node{low,high}` as copies; counted before copying, so a nested repeat cannot blow up."""
        if max(low, high or 0) > MAX_REPEAT:
            raise _too_complex(f"a repeat count above {MAX_REPEAT} (names are at most 255 characters)")
        copies = max(low, 1) if high is None else high
        if high is None and low > 0:
            copies += 1  # low copies plus a star
        self.positions += node.size * (copies - 1)
        if self.positions > MAX_POSITIONS:
            raise _too_complex(f"more than {MAX_POSITIONS} characters once repeats are expanded")
        parts = [_copy(node) for _ in range(low)]
        if high is None:
            parts.append(_Node("star", kids=[_copy(node)], size=node.size))
        else:
            parts += [_Node("opt", kids=[_copy(node)], size=node.size) for _ in range(high - low)]
        if not parts:
            return _Node("empty")
        return parts[0] if len(parts) == 1 else _group("cat", parts)

    def atom(self) -> _Node:
        ch = self.take()
        if ch == "(":
            return self.group()
        if ch in "*+?{":
            raise _invalid(f"nothing to repeat at position {self.i - 1}")
        if ch in ")^$":
            raise _invalid(f"unexpected {ch!r} at position {self.i - 1} (anchors only at the ends)")
        self.positions += 1
        if self.positions > MAX_POSITIONS:
            raise _too_complex(f"more than {MAX_POSITIONS} characters once repeats are expanded")
        if ch == "[":
            return _char(self.char_class())
        if ch == ".":
            return _char(lambda c: True)
        if ch == "\\":
            return _char(self.escape())
        return _char(_literal(ch))

    def group(self) -> _Node:
        if self.text.startswith("?", self.i):
            if not self.text.startswith("?:", self.i):
                raise _invalid("lookarounds, named groups and inline flags are not supported")
            self.i += 2
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _too_complex(f"groups nested more than {MAX_DEPTH} deep")
        node = self.alt()
        if self.peek() != ")":
            raise _invalid("unbalanced parenthesis")
        self.i += 1
        self.depth -= 1
        return node

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
            elif self.peek() == "-" and self.i + 1 < len(self.text) and self.text[self.i + 1] != "]":
                self.i += 1
                tests.append(_range(ch, self.take()))
            else:
                tests.append(_literal(ch))

        def member(c: str) -> bool:
            return any(t(c) for t in tests) != negate

        return member


def _literal(ch: str) -> Pred:
    low = ch.lower()
    return lambda c: c.lower() == low


def _range(lo: str, hi: str) -> Pred:
    if hi < lo:
        raise _invalid(f"bad range {lo}-{hi}")
    # Case-insensitive, as re.IGNORECASE: `[A-Z]` takes `a`, `[a-z]` takes `A`.
    return lambda c: lo <= c <= hi or lo <= c.upper() <= hi or lo <= c.lower() <= hi


# ---- position automaton ------------------------------------------------------------------------------


class Expression:
    """A compiled Expression; `fullmatch(name)` answers whether the whole name matches."""

    def __init__(self, tree: _Node) -> None:
        self.follow: list[int] = []  # per position: the positions that may come next
        self._by_pred: dict[Pred, int] = {}  # each distinct predicate: the positions it guards
        self.nullable, self.first, self.last = self._build(tree)
        self._split_follow()
        self._masks: dict[str, int] = {}
        self._steps: dict[tuple[int, str], int] = {}

    def _build(self, node: _Node) -> tuple[bool, int, int]:
        """(nullable, first positions, last positions) of a node, recording follow sets."""
        if node.kind == "empty":
            return True, 0, 0
        if node.kind == "char":
            assert node.pred is not None
            bit = 1 << len(self.follow)
            self.follow.append(0)
            self._by_pred[node.pred] = self._by_pred.get(node.pred, 0) | bit
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
        _, k_first, k_last = self._build(node.kids[0])  # star or opt
        if node.kind == "star":
            self._link(k_last, k_first)
        return True, k_first, k_last

    def _link(self, sources: int, targets: int) -> None:
        if not targets:
            return
        for position in _bits(sources):
            self.follow[position] |= targets

    def _mask(self, ch: str) -> int:
        """The positions whose character test accepts `ch`."""
        mask = self._masks.get(ch)
        if mask is None:
            mask = _or(bits for pred, bits in self._by_pred.items() if pred(ch))
            if len(self._masks) < _MASKS:
                self._masks[ch] = mask
        return mask

    def _step(self, state: int, ch: str) -> int:
        key = (state, ch)
        found = self._steps.get(key)
        if found is None:
            found = self._reach(state) & self._mask(ch)
            if len(self._steps) >= _DFA_STEPS:
                self._steps.clear()  # bounded memory; rebuilt as needed
            self._steps[key] = found
        return found

    def _split_follow(self) -> None:
        """Most positions (chains such as `abc` or an expanded `.{200}`) lead only to the next one:
        those move by one shift. The others go through per-byte tables: for each byte of positions
        and each of its 256 values, the union of their follow sets, filled on use."""
        count = len(self.follow)
        chain = _or(1 << p for p in range(count) if self.follow[p] == 1 << (p + 1))
        self._chain = chain
        self._other = _or(1 << p for p in range(count) if self.follow[p] and not chain >> p & 1)
        self._width = (count + 7) // 8
        self._other_bytes = sorted({p // 8 for p in _bits(self._other)})
        self._reach_tables: dict[int, list[int | None]] = {i: [None] * 256 for i in self._other_bytes}

    def _reach(self, state: int) -> int:
        """The positions that may follow any position of `state`."""
        out = (state & self._chain) << 1
        other = state & self._other
        if not other:
            return out
        data = other.to_bytes(self._width, "little")
        for index in self._other_bytes:
            byte = data[index]
            if byte:
                table = self._reach_tables[index]
                union = table[byte]
                if union is None:
                    union = table[byte] = _or(self.follow[8 * index + b] for b in range(8) if byte >> b & 1)
                out |= union
        return out

    def fullmatch(self, name: str) -> bool:
        if not name:
            return self.nullable
        state = self.first & self._mask(name[0])
        steps = self._steps  # the warm path: one dictionary lookup per character
        for ch in name[1:]:
            if not state:
                return False
            known = steps.get((state, ch))
            state = self._step(state, ch) if known is None else known
        return bool(state & self.last)


def _bits(value: int) -> Iterable[int]:
    while value:
        low = value & -value
        yield low.bit_length() - 1
        value ^= low


def _or(values: Iterable[int]) -> int:
    out = 0
    for value in values:
        out |= value
    return out


def glue_to_regex(pattern: str) -> str:
    """Glue's convention: a `*` that follows no atom (not after `.`, `]`, `)` or an escape) means
    "anything"; every other character keeps its regex meaning."""
    return re.sub(r"(?<![.\])\\])\*", ".*", pattern)


def compile_expression(pattern: str) -> Expression:
    if any(c not in string.printable for c in pattern):
        raise _invalid("only printable characters")
    return Expression(_Parser(glue_to_regex(pattern)).parse())
