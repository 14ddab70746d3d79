-- Admission (services/admission.py): the statements mantle_admit (mantle_admit.sql) is built
-- from, and its call. Each runs after the advisory locks of its transaction are held, so in
-- READ COMMITTED it sees every commit made before the lock was granted: counts are exact.
-- bench/pgbench.py runs the same statements one by one as the physical limit.

-- name: admission_state
-- The live state a newcomer is judged against: limits, slot holders, and the FIFO queues ahead:
-- what waits for a team slot, for a slot of the workflow, and the newcomer's own key's queue
-- (unkeyed executions share the key '', so for them that is the workflow's whole queue).
-- A count of slot holders is only compared with its limit, so it reads at most that many rows,
-- and none without a limit (LIMIT 0): unbounded, every admission read every live execution
-- of its team twice, and the dead index entries that finished ones leave until vacuum.
-- The newcomer's key limit is the one it evaluated when the workflow gives it by an expression
-- (%(evaluated_key_limit)s, else NULL: its version's count).
SELECT t.max_concurrent_executions,
       v.max_parallel_executions,
       v.on_limit,
       coalesce(%(evaluated_key_limit)s, v.max_parallel_per_key),
       v.max_queued,
       v.rate_max,
       extract(epoch FROM v.rate_period)::float8,
       v.rate_per_key,
       extract(epoch FROM v.debounce)::float8,
       (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.status IN {slot_holding}
         LIMIT coalesce(t.max_concurrent_executions, %(default_team_limit)s)) AS holders),
       (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.workflow_id = %(workflow_id)s
           AND e.status IN {slot_holding}
         LIMIT v.max_parallel_executions) AS holders),
       (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = %(concurrency_key)s
           AND e.status IN {slot_holding}
         LIMIT coalesce(%(evaluated_key_limit)s, v.max_parallel_per_key)) AS holders),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = %(workflow_id)s AND e.status = 'queued'
           AND e.blocked_by = 'workflow'),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = %(concurrency_key)s
           AND e.status = 'queued'),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.status = 'queued' AND e.blocked_by = 'team')
  FROM teams_team t, workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE t.id = %(team_id)s AND w.id = %(workflow_id)s

-- name: admission_paused
-- The pause that holds a newcomer (docs/operations.md, Pausing during an incident): '' for its
-- team's or its workflow's own, else the name of the first (by name) paused named limit it
-- holds (%(named_limits)s), NULL when none; with its workflow's on_pause and max_queued. Read
-- after admission's locks, which a pause takes too: a pause committed before they were granted
-- is seen, and none commits until this admission has.
SELECT CASE WHEN t.paused_at IS NOT NULL OR w.paused_at IS NOT NULL THEN ''
            ELSE (SELECT min(l.name) FROM teams_namedlimit l
                   WHERE l.id = ANY(%(named_limits)s) AND l.paused_at IS NOT NULL) END,
       v.on_pause, v.max_queued
  FROM teams_team t, workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE t.id = %(team_id)s AND w.id = %(workflow_id)s

-- name: workflow_named_limits
-- The named limits the workflow's current version lists, in lock order (by name): id, name, max.
-- Read under the team's lock, which every change of a team's named limits and of its workflows'
-- versions takes.
SELECT l.id, l.name, l.max
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  JOIN teams_namedlimit l ON l.team_id = w.team_id AND l.name = ANY(v.limits)
 WHERE w.id = %(workflow_id)s
 ORDER BY l.name

-- name: named_limit_state
-- One named limit under its lock: its slot holders (across every workflow that lists it; as in
-- admission_state, at most its max of them are read), and whether a queued execution waits for
-- it (a newcomer queues behind it).
SELECT (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.named_limits @> ARRAY[%(limit_id)s]::bigint[] AND e.status IN {slot_holding}
         LIMIT %(limit_max)s) AS holders),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.status = 'queued' AND e.blocked_by = 'limit'
           AND e.blocked_by_limit = %(limit_name)s)

-- name: rate_window_full_until
-- A rate limit's window as a newcomer finds it: the %(rate_max)s-th newest execution of the
-- workflow (of the newcomer's key when per key) that became pending in the trailing
-- %(rate_period)s seconds. While there is one the window is full, until that one leaves it: the
-- moment returned (no row: there is room now). Reads at most %(rate_max)s rows.
SELECT e.pending_at + make_interval(secs => %(rate_period)s)
  FROM executions_execution e
 WHERE e.workflow_id = %(workflow_id)s
   AND e.pending_at > clock_timestamp() - make_interval(secs => %(rate_period)s)
   AND (NOT %(rate_per_key)s OR e.concurrency_key = %(concurrency_key)s)
 ORDER BY e.pending_at DESC
 OFFSET %(rate_max)s - 1 LIMIT 1

-- name: debounced_key_queued
-- debounce: the execution of the newcomer's key still waiting out its debounce, which the
-- newcomer supersedes (at most one: each newcomer supersedes the one before it).
SELECT e.id FROM executions_execution e
 WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = %(concurrency_key)s
   AND e.status = 'queued' AND e.blocked_by = 'debounce'
 ORDER BY e.created_at DESC, e.id DESC
 LIMIT 1

-- name: oldest_key_holder
-- on_limit cancel_running: the slot holder of the newcomer's key (its workflow's when unkeyed,
-- the key '') that it supersedes.
SELECT e.id FROM executions_execution e
 WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = %(concurrency_key)s
   AND e.status IN {slot_holding}
 ORDER BY e.created_at, e.id
 LIMIT 1

-- name: latest_key_queued
-- on_limit keep_latest: the one queued execution of the newcomer's key that it supersedes.
SELECT e.id FROM executions_execution e
 WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = %(concurrency_key)s
   AND e.status = 'queued'
 ORDER BY e.created_at DESC, e.id DESC
 LIMIT 1

-- name: key_queue_full
-- max_queued: whether the newcomer's queue (its key's; its workflow's when unkeyed, the key '')
-- already holds %(max_queued)s, not counting one it supersedes; counts at most that many rows.
SELECT count(*) - (%(superseded)s IS NOT NULL)::int >= %(max_queued)s
  FROM (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = %(concurrency_key)s
           AND e.status = 'queued'
         LIMIT %(max_queued)s + 1) AS queued

-- name: admitted_announced_after_commit
-- Marks the pending execution this transaction admits: the trigger that announces a row that
-- becomes pending at its commit (triggers.sql) passes it over, and the admission announces it
-- right after its commit instead (wake_workers).
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
-- The admitted execution. created_at and (when queued) queued_at are the same clock time, taken
-- after the locks were granted: the FIFO order of the queue is the order of the inserts.
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
    %(key_lock)s, %(lock_timeout)s)

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
    %(key_namespace)s, %(key_lock)s, %(lock_timeout)s) AS admitted
