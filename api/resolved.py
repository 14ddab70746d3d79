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

from api.errors import ApiError
from core.caches import BoundedCache
from executions.services.admission import ResolutionStale
from teams.models import ApiKey
from workflows.models import WebhookPath, WorkflowDefinition
from workflows.schema import InvalidInputs

# What a request resolved from a cache can fail with before anything is admitted: its body or
# its inputs (of the version the cache holds), the signature (of the secret it holds), or the
# admission's check. The request then starts again from the tables, which decide its answer.
BEFORE_ADMISSION = (ResolutionStale, ApiError, InvalidInputs)


# (API key hash, workflow name) -> the key with its team, the workflow with its current version.
RUNS: BoundedCache[tuple[str, str], tuple[ApiKey, WorkflowDefinition]] = BoundedCache()
# Hook path -> the webhook trigger with its workflow, team and current version.
HOOKS: BoundedCache[str, WebhookPath] = BoundedCache()
