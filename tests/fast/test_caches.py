"""chalicelib/caches.py: a named, bounded cache with real eviction (least recently used first, never
the whole cache) and staleness per cache or per entry."""

from __future__ import annotations

import threading

from chalicelib.caches import MISSING, Cache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_full_cache_evicts_the_least_recently_used_entry_only():
    c: Cache[str, int] = Cache("test lru", 3)
    for i, k in enumerate("abc"):
        c.put(k, i)
    assert c.get("a") == 0  # used: "b" is now the least recently used
    c.put("d", 3)
    assert len(c) == 3 and "b" not in c
    assert [c.get(k) for k in "acd"] == [0, 2, 3]
    assert c.name == "test lru" and c.maxsize == 3


def test_lookup_tells_a_cached_none_from_a_miss():
    c: Cache[str, int | None] = Cache("test none", 2)
    c.put("absent", None)
    assert c.lookup("absent") is None and c.lookup("other") is MISSING
    assert "absent" in c and "other" not in c
    assert c.get("other", 7) == 7


def test_entries_go_stale_after_the_cache_ttl_or_their_own():
    clock = Clock()
    c: Cache[str, int] = Cache("test ttl", 10, ttl=5.0, timer=clock)
    c.put("cache-ttl", 1)
    c.put("own-ttl", 2, ttl=20.0)
    c.put("short", 3, ttl=1.0)
    clock.now += 2
    assert c.lookup("short") is MISSING and c.get("cache-ttl") == 1
    clock.now += 4
    assert c.lookup("cache-ttl") is MISSING and c.get("own-ttl") == 2
    clock.now += 15
    assert c.lookup("own-ttl") is MISSING and len(c) == 0
    c.put("gone", 4, ttl=-1.0)  # already stale: never served
    assert "gone" not in c


def test_without_a_ttl_entries_stay_until_evicted():
    clock = Clock()
    c: Cache[str, int] = Cache("test no ttl", 2, timer=clock)
    c.put("a", 1)
    clock.now += 1e9
    assert c.get("a") == 1


def test_pop_discard_and_clear():
    c: Cache[int, int] = Cache("test pop", 10)
    for i in range(6):
        c.put(i, i * 10)
    assert c.pop(2) == 20 and c.pop(2) is None and c.pop(2, -1) == -1
    c.discard(lambda k, v: k % 2 == 0)  # drops the entries it refuses
    assert sorted(c.keys()) == [0, 4]
    c.clear()
    assert len(c) == 0 and c.lookup(0) is MISSING


def test_the_dict_operations_it_shares_with_a_dict():
    clock = Clock()
    c: Cache[str, int] = Cache("test dict ops", 3, ttl=5.0, timer=clock)
    c["a"] = 1  # put() at the cache's staleness
    c["b"] = 2
    assert c["a"] == 1 and dict(c) == {"a": 1, "b": 2}
    clock.now += 6
    assert dict(c) == {}
    try:
        c["a"]
    except KeyError:
        pass
    else:
        raise AssertionError("a stale entry was served")


def test_threads_share_it_safely_and_it_stays_bounded():
    c: Cache[tuple[int, int], int] = Cache("test threads", 100, ttl=60.0)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(2000):
                c.put((t, i), i)
                found = c.lookup((t, i - 1))
                assert found is MISSING or found == i - 1
                if i % 7 == 0:
                    c.pop((t, i - 3))
                if i % 500 == 0:
                    c.discard(lambda k, _v: k[1] % 2 == 0)
                assert len(c) <= 100
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and 0 < len(c) <= 100


def test_a_weighed_cache_bounds_the_sum_and_evicts_least_recent_first():
    c: Cache[str, bytes] = Cache("test weights", 100, weigh=len)
    c.put("a", b"x" * 40)
    c.put("b", b"x" * 40)
    assert c.get("a") is not None  # a is now the most recently used
    c.put("c", b"x" * 40)  # over the bound: b goes, not the whole cache
    assert "b" not in c and "a" in c and "c" in c and c.weight == 80
    c.put("huge", b"x" * 101)  # heavier than the bound: not kept, nothing evicted for it
    assert "huge" not in c and c.weight == 80
    c.bound(50)  # a smaller bound keeps what fits
    assert c.weight <= 50 and len(c) == 1
    c.bound(1000)
    c.put("d", b"x" * 900)
    assert c.weight == 940 and c.maxsize == 1000
