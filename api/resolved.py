"""Per-process caches of what a request resolves before its admission: an API key with its team
and a workflow with its current version (`POST /api/v1/run/<workflow>`), and a hook path with its
workflow, team and current version (`POST /hooks/<path>`). With a hit, the admission is the
request's one round trip.

Nothing read from them is trusted: the admission's own statement (executions/sql/admission.sql,
admit_resolved) checks that it still holds (the key unrevoked and the team's, the version still
current, the path still the workflow's); when it does not, nothing is admitted
(ResolutionStale) and the request resolves from the tables. So a check in every admission, not
a TTL: a key revoked in any process is refused by the next request in every other one. Only
what was found is kept: an unknown key or path always reads the tables.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from api.errors import ApiError
from executions.services.admission import ResolutionStale
from teams.models import ApiKey
from workflows.models import WebhookPath, WorkflowDefinition
from workflows.schema import InvalidInputs

K = TypeVar("K")
V = TypeVar("V")

# What a request resolved from a cache can fail with before anything is admitted: its body or
# its inputs (of the version the cache holds), the signature (of the secret it holds), or the
# admission's check. The request then starts again from the tables, which decide its answer.
BEFORE_ADMISSION = (ResolutionStale, ApiError, InvalidInputs)


class Cache(Generic[K, V]):
    """A bounded dict: a process serving more keys, workflows or hooks starts over rather than
    grow. Its threads share the entries, which they only read."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._entries: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[key] = value

    def forget(self, key: K) -> None:
        self._entries.pop(key, None)


# (API key hash, workflow name) -> the key with its team, the workflow with its current version.
RUNS: Cache[tuple[str, str], tuple[ApiKey, WorkflowDefinition]] = Cache()
# Hook path -> the webhook trigger with its workflow, team and current version.
HOOKS: Cache[str, WebhookPath] = Cache()
