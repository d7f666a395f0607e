"""The one in-process cache the catalog keeps things in: named, bounded, with real eviction.

Each cache says how many entries it holds (the least recently used goes first when it is full, never
the whole cache) and how long an entry stays fresh (its staleness: per cache, or per entry, e.g. a
session until it expires). Caches are per process, so a Lambda instance keeps them across
requests. A cache is a value its module owns: nothing registers itself anywhere.
cachetools' TLRUCache does the bookkeeping; a lock makes each cache safe across request threads.
"""

from __future__ import annotations

import enum
import math
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, Literal, TypeVar, cast

import cachetools

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Missing(enum.Enum):
    """What `lookup` answers for a key with no fresh entry (None can be a cached value)."""

    MISSING = 0


MISSING = _Missing.MISSING


class Cache(Generic[K, V]):
    def __init__(
        self,
        name: str,
        maxsize: int,
        ttl: float | None = None,
        timer: Callable[[], float] = time.monotonic,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        """ttl: seconds an entry stays fresh (None: until evicted); `put` may give an entry its own.
        weigh: an entry's weight (e.g. its bytes), making `maxsize` the bound of their sum (default: 1
        per entry); an entry heavier than the bound is not kept."""
        self.name, self.maxsize, self.ttl, self._timer, self._weigh = name, maxsize, ttl, timer, weigh
        self._lock = threading.Lock()
        self._data: Any = self._new(maxsize)

    def _new(self, maxsize: int) -> Any:
        weigh = self._weigh
        return cachetools.TLRUCache(  # keys to (value, expiry on the timer)
            maxsize,
            ttu=lambda _k, v, _now: v[1],
            timer=self._timer,
            getsizeof=None if weigh is None else (lambda v: weigh(v[0])),
        )

    def bound(self, maxsize: int) -> None:
        """Change the bound (a setting read per request): the most recently used entries that fit stay."""
        with self._lock:
            if maxsize == self.maxsize:
                return
            old, self.maxsize, self._data = self._data, maxsize, self._new(maxsize)
            for key in list(old.keys()):
                entry = old.get(key)
                if entry is not None:
                    try:
                        self._data[key] = entry
                    except ValueError:  # heavier than the new bound
                        pass

    @property
    def weight(self) -> int:
        """The sum of the entries' weights (their count without `weigh`)."""
        with self._lock:
            return int(self._data.currsize)

    def get(self, key: K, default: V | None = None) -> V | None:
        found = self.lookup(key)
        return default if found is MISSING else found

    def lookup(self, key: K) -> V | Literal[_Missing.MISSING]:
        """The fresh value (None may be a value: "known to be absent"), or MISSING."""
        with self._lock:
            hit = self._data.get(key, MISSING)
        return MISSING if hit is MISSING else cast(V, hit[0])

    def put(self, key: K, value: V, ttl: float | None = None) -> None:
        life = self.ttl if ttl is None else ttl
        expires = math.inf if life is None else self._timer() + life
        with self._lock:
            try:
                self._data[key] = (value, expires)
            except ValueError:  # heavier than the whole bound: not kept, and no other entry evicted for it
                self._data.pop(key, None)

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Drop the key's entry: its value when fresh, else `default` (as dict.pop with a default)."""
        with self._lock:
            hit = self._data.pop(key, MISSING)
        return default if hit is MISSING else cast(V, hit[0])

    # The dict operations callers share with a plain dict (code a test hands a dict in its place):
    # `cache[key] = value` is put() at the cache's staleness, `cache[key]` a fresh value or KeyError,
    # and keys() with cache[key] make `dict(cache)` a snapshot of the fresh entries.
    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def __getitem__(self, key: K) -> V:
        found = self.lookup(key)
        if found is MISSING:
            raise KeyError(key)
        return found

    def keys(self) -> list[K]:
        """The keys of the fresh entries (a snapshot)."""
        with self._lock:
            return list(self._data.keys())

    def discard(self, keep: Callable[[K, V], bool]) -> None:
        """Drop the entries `keep` refuses (after a change this process made to what they hold)."""
        with self._lock:
            for key, (value, _) in list(self._data.items()):
                if not keep(key, value):
                    self._data.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: object) -> bool:
        return self.lookup(cast(K, key)) is not MISSING
