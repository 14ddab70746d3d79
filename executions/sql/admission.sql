-- Admission (services/admission.py): the call of mantle_admit (mantle_admit.sql, the whole
-- locked part of an admission), and the statements bench/pgbench.py and bench/floor.py run one
-- by one as the physical limit: mantle_admit's reads and writes, each after the advisory locks
-- of its transaction are held.

-- name: admission_state
-- The live state a newcomer is judged against, as mantle_admit reads it: its workflow's
-- strategy, the room of its team, workflow and key (mantle_room.sql), and the FIFO queues
-- ahead of it.
SELECT tr.room_limit, wr.room_limit, v.on_limit, k.key_limit, v.max_queued, v.rate_max,
       extract(epoch FROM v.debounce)::float8, tr.free, wr.free, kr.free,
       EXISTS (SELECT 1 FROM executions_execution e
                WHERE e.workflow_id = %(workflow_id)s AND e.status = 'queued'
                  AND e.blocked_by = 'workflow'),
       EXISTS (SELECT 1 FROM executions_execution e
                WHERE e.workflow_id = %(workflow_id)s
                  AND e.concurrency_key = %(concurrency_key)s AND e.status = 'queued'),
       (SELECT true FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.status = 'queued' AND e.blocked_by = 'team'
         ORDER BY e.blocked_by_limit LIMIT 1) IS NOT NULL
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 CROSS JOIN LATERAL (SELECT coalesce(%(evaluated_key_limit)s::int, v.max_parallel_per_key)
                       AS key_limit) k
 CROSS JOIN LATERAL mantle_team_room(%(team_id)s, %(default_team_limit)s) tr
 CROSS JOIN LATERAL mantle_workflow_room(w.id) wr
 CROSS JOIN LATERAL mantle_key_room(w.id, %(concurrency_key)s, k.key_limit) kr
 WHERE w.id = %(workflow_id)s

-- name: admission_paused
-- The pause that holds a newcomer, as mantle_admit reads it (docs/operations.md, Pausing during
-- an incident): '' for its team's or its workflow's own, else the name of the first (by name)
-- paused named limit it holds (%(named_limits)s), NULL when none; with its workflow's on_pause
-- and max_queued.
SELECT CASE WHEN tr.paused OR wr.paused THEN ''
            ELSE (SELECT min(l.name) FROM teams_namedlimit l
                   CROSS JOIN LATERAL mantle_limit_room(l.id) lr
                   WHERE l.id = ANY(%(named_limits)s) AND lr.paused) END,
       v.on_pause, v.max_queued
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 CROSS JOIN LATERAL mantle_team_room(%(team_id)s, %(default_team_limit)s) tr
 CROSS JOIN LATERAL mantle_workflow_room(w.id) wr
 WHERE w.id = %(workflow_id)s

-- name: workflow_named_limits
-- The named limits the workflow's current version lists, in lock order (by name): id, name, max,
-- as mantle_admit reads them under the team's lock.
SELECT l.id, l.name, l.max
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  JOIN teams_namedlimit l ON l.team_id = w.team_id AND l.name = ANY(v.limits)
 WHERE w.id = %(workflow_id)s
 ORDER BY l.name

-- name: admitted_announced_after_commit
-- Marks the pending execution this transaction admits, as mantle_admit does: the trigger that
-- announces a row that becomes pending at its commit (triggers.sql) passes it over, and the
-- admission announces it right after its commit instead (wake_workers).
SELECT set_config('mantle.admitted', %(id)s::text, true) AS admitted

-- name: wake_workers
-- Announces an admitted pending execution to the step workers, once its admission committed
-- (services/admission.py). Not in that commit: a transaction that NOTIFYs holds PostgreSQL's one
-- notify lock of the database from its commit's start to its end, WAL flush included, so every
-- admission of every team committed one at a time (100 teams at 16 clients: about 1,800
-- admissions/s with it, 3,500/s without; figure 1). This transaction writes nothing that must
-- outlive a crash, so its commit does not wait for the flush and holds the lock for microseconds.
-- The channel is executions.sql.WORK_CHANNEL; no parameter: it is sent as a simple query.
SELECT set_config('synchronous_commit', 'off', true), pg_notify('mantle_work', '')

-- name: admission_insert
-- The admitted execution, as mantle_admit inserts it.
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, blocked_by,
        blocked_by_limit, named_limits, idempotency_key, concurrency_key, priority, key_limit,
        error, created_at, queued_at, pending_at, not_before)
VALUES (%(id)s, %(team_id)s, %(workflow_id)s, %(version_id)s, %(status)s,
        %(inputs)s, %(trigger)s, %(forced)s, %(blocked_by)s, %(blocked_by_limit)s,
        %(named_limits)s, %(idempotency_key)s, %(concurrency_key)s, %(priority)s,
        %(evaluated_key_limit)s, '',
        %(created_at)s,
        CASE WHEN %(status)s = 'queued' THEN %(created_at)s END,
        CASE WHEN %(status)s = 'pending' THEN %(created_at)s END, %(not_before)s)

-- name: admit
-- One admission: the whole locked part in one round trip (mantle_admit.sql).
SELECT * FROM mantle_admit(
    %(id)s, %(team_id)s, %(workflow_id)s, %(version_id)s, %(inputs)s::jsonb, %(trigger)s::jsonb,
    %(forced)s, %(idempotency_key)s, %(concurrency_key)s, %(priority)s, %(evaluated_key_limit)s,
    %(default_team_limit)s, %(team_namespace)s, %(limit_namespace)s, %(workflow_namespace)s, %(key_namespace)s,
    %(key_lock)s, %(lock_timeout)s, true, NULL, NULL)

-- name: admit_resolved
-- One admission of a request whose key, workflow or hook a web process resolved from its cache
-- (api/resolved.py), still in one round trip: mantle_admit runs only if what was resolved still
-- holds when the statement starts: the workflow's current version is the one resolved, the API
-- key (by its hash) is the team's and not revoked, the hook path is the workflow's, and no
-- execution of the team holds the Idempotency-Key yet (a retry is answered with its original).
-- Otherwise no row and nothing written: the caller resolves from the tables. mantle_admit reads
-- the team from `resolved` (a lateral reference), so it runs once per row of it: never for none.
SELECT admitted.*
  FROM (SELECT w.team_id FROM workflows_workflowdefinition w
         WHERE w.id = %(workflow_id)s AND w.team_id = %(team_id)s
           AND w.current_version_id = %(version_id)s
           AND (%(key_hash)s::text IS NULL OR EXISTS (SELECT 1 FROM teams_apikey k
                 WHERE k.key_hash = %(key_hash)s AND k.team_id = w.team_id
                   AND k.revoked_at IS NULL))
           AND (%(hook_path)s::text IS NULL OR EXISTS (SELECT 1 FROM workflows_webhookpath h
                 WHERE h.path = %(hook_path)s AND h.workflow_id = w.id))
           AND (%(idempotency_key)s::text IS NULL OR NOT EXISTS (SELECT 1
                 FROM executions_execution e
                 WHERE e.team_id = w.team_id AND e.idempotency_key = %(idempotency_key)s))
       ) AS resolved
 CROSS JOIN LATERAL mantle_admit(
    %(id)s, resolved.team_id, %(workflow_id)s, %(version_id)s, %(inputs)s::jsonb,
    %(trigger)s::jsonb, %(forced)s, %(idempotency_key)s, %(concurrency_key)s, %(priority)s,
    %(evaluated_key_limit)s, %(default_team_limit)s, %(team_namespace)s, %(limit_namespace)s, %(workflow_namespace)s,
    %(key_namespace)s, %(key_lock)s, %(lock_timeout)s, true, NULL, NULL) AS admitted
