from __future__ import annotations

from core.caches import BoundedCache


def test_it_makes_a_value_once_and_then_reads_it() -> None:
    cache: BoundedCache[int, list[int]] = BoundedCache()
    made: list[int] = []

    def make() -> list[int]:
        made.append(1)
        return made

    for _ in range(3):
        cache.get_or_make(1, make)
    assert made == [1]
    assert cache.get(1) is made


def test_a_full_cache_starts_over_rather_than_grow() -> None:
    cache: BoundedCache[int, str] = BoundedCache(size=2)
    cache.put(1, "one")
    cache.put(2, "two")
    cache.put(3, "three")
    assert (cache.get(1), cache.get(2), cache.get(3)) == (None, None, "three")


def test_a_forgotten_key_is_read_again() -> None:
    cache: BoundedCache[str, int] = BoundedCache()
    cache.put("key", 1)
    cache.forget("key")
    cache.forget("never kept")
    assert cache.get("key") is None
