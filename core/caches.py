"""The per-process cache of things that never change once read (a workflow version's parsed
spec) or that their user checks before trusting (api/resolved.py): a dict bounded by starting
over, so a process that serves more than `size` of them rereads rather than grows. Threads share
the entries; a lost race reads the same thing twice, which is harmless."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._entries: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> V:
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[key] = value
        return value

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        value = self._entries.get(key)
        return self.put(key, make()) if value is None else value

    def forget(self, key: K) -> None:
        self._entries.pop(key, None)
