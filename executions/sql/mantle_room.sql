-- The room a limit has left: the one place each kind of limit is counted, read by admission
-- (mantle_admit.sql) and by promotion (mantle_promote.sql, mantle_fair_heads.sql,
-- mantle_fair_queue.sql) alike (docs/architecture.md, Where the rules live). A new kind of limit
-- is a function here and a call in each. Installed from this file (docs/architecture.md, The data
-- room).
--
-- Each counts rows, never a counter: the slot holders (pending or running executions, as the
-- model's SLOT_HOLDING and the partial indexes that serve these counts say) or the executions
-- that became pending in a rate window. A count is only compared with its limit, so it reads at
-- most that many rows: unbounded, a count read every live execution of a team, and the dead
-- index entries finished ones leave until vacuum. `free` is NULL when no limit applies (0 is
-- unlimited) and never below 0; `paused` (docs/operations.md, Pausing during an incident) is
-- the caller's to apply: admission queues or rejects, promotion finds no free slot.
-- Read under the lock of what is counted (the team's, the named limit's, the workflow's, which
-- covers its keys): holders can then only leave until the caller's commit. Each is one SELECT
-- of LANGUAGE sql, STABLE, with no SET clause: PostgreSQL inlines it into the statement that
-- calls it (in FROM), which a PL/pgSQL caller plans once per connection.

-- A team's slots: its own limit, else the default of the configuration (the caller's).
CREATE OR REPLACE FUNCTION mantle_team_room(_team_id bigint, _default_team_limit int)
RETURNS TABLE(room_limit int, free bigint, paused boolean)
LANGUAGE sql STABLE
AS $team_room$
SELECT r.room_limit,
       CASE WHEN r.room_limit > 0 THEN r.room_limit - (
           SELECT count(*) FROM (SELECT 1 FROM executions_execution e
                                  WHERE e.team_id = _team_id
                                    AND e.status IN ('pending', 'running')
                                  LIMIT r.room_limit) AS holders) END,
       r.paused
  FROM (SELECT coalesce(t.max_concurrent_executions, _default_team_limit) AS room_limit,
               t.paused_at IS NOT NULL AS paused
          FROM teams_team t
         WHERE t.id = _team_id) r
$team_room$;

-- A workflow's slots (max_parallel_executions of its current version).
CREATE OR REPLACE FUNCTION mantle_workflow_room(_workflow_id bigint)
RETURNS TABLE(room_limit int, free bigint, paused boolean)
LANGUAGE sql STABLE
AS $workflow_room$
SELECT v.max_parallel_executions,
       CASE WHEN v.max_parallel_executions > 0 THEN v.max_parallel_executions - (
           SELECT count(*) FROM (SELECT 1 FROM executions_execution e
                                  WHERE e.team_id = w.team_id AND e.workflow_id = w.id
                                    AND e.status IN ('pending', 'running')
                                  LIMIT v.max_parallel_executions) AS holders) END,
       w.paused_at IS NOT NULL
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE w.id = _workflow_id
$workflow_room$;

-- A named limit's slots, across every workflow that lists it.
CREATE OR REPLACE FUNCTION mantle_limit_room(_limit_id bigint)
RETURNS TABLE(room_limit int, free bigint, paused boolean)
LANGUAGE sql STABLE
AS $limit_room$
SELECT l.max,
       CASE WHEN l.max > 0 THEN l.max - (
           SELECT count(*) FROM (SELECT 1 FROM executions_execution e
                                  WHERE e.named_limits @> ARRAY[l.id]
                                    AND e.status IN ('pending', 'running')
                                  LIMIT l.max) AS holders) END,
       l.paused_at IS NOT NULL
  FROM teams_namedlimit l
 WHERE l.id = _limit_id
$limit_room$;

-- A key's slots under the key limit `_key_limit` that applies (the one an execution evaluated
-- and stored, else max_parallel_per_key of its workflow: the caller's). Unkeyed executions share
-- the key ''.
CREATE OR REPLACE FUNCTION mantle_key_room(_workflow_id bigint, _key text, _key_limit int)
RETURNS TABLE(free bigint)
LANGUAGE sql STABLE
AS $key_room$
SELECT CASE WHEN _key_limit > 0 THEN _key_limit - (
           SELECT count(*) FROM (SELECT 1 FROM executions_execution e
                                  WHERE e.workflow_id = _workflow_id
                                    AND e.concurrency_key = _key
                                    AND e.status IN ('pending', 'running')
                                  LIMIT _key_limit) AS holders) END
$key_room$;

-- A rate limit's window at `_at` (the caller's clock): the executions of the workflow (of the
-- key `_key` when its rate is per key) that became pending in the trailing rate_period. No row
-- when no rate applies: none set, or one per key asked for the workflow as a whole (`_key`
-- NULL). `room`: how many more the window admits; `full_until`: while it has none, the moment
-- the oldest of it leaves (then it admits one). Reads at most rate_max rows.
CREATE OR REPLACE FUNCTION mantle_rate_room(_workflow_id bigint, _key text, _at timestamptz)
RETURNS TABLE(rate_max int, room bigint, full_until timestamptz)
LANGUAGE sql STABLE
AS $rate_room$
SELECT v.rate_max, v.rate_max - n.in_window,
       CASE WHEN n.in_window >= v.rate_max THEN n.oldest + v.rate_period END
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 CROSS JOIN LATERAL (
        SELECT count(*) AS in_window, min(r.pending_at) AS oldest
          FROM (SELECT e.pending_at FROM executions_execution e
                 WHERE e.workflow_id = w.id
                   AND (NOT v.rate_per_key OR e.concurrency_key = _key)
                   AND e.pending_at > _at - v.rate_period
                 ORDER BY e.pending_at DESC
                 LIMIT v.rate_max) r) n
 WHERE w.id = _workflow_id AND v.rate_max > 0 AND NOT (v.rate_per_key AND _key IS NULL)
$rate_room$
;

-- The keys of a team's workflows that hold at least one slot: only those can be full.
CREATE OR REPLACE FUNCTION mantle_holding_keys(_team_id bigint)
RETURNS TABLE(workflow_id bigint, concurrency_key text)
LANGUAGE sql STABLE
AS $holding_keys$
SELECT DISTINCT e.workflow_id, e.concurrency_key
  FROM executions_execution e
 WHERE e.team_id = _team_id AND e.status IN ('pending', 'running')
$holding_keys$
;

-- The oldest slot holder of a key: the one on_limit cancel_running supersedes to make room.
CREATE OR REPLACE FUNCTION mantle_oldest_key_holder(_workflow_id bigint, _key text)
RETURNS TABLE(id uuid)
LANGUAGE sql STABLE
AS $oldest_key_holder$
SELECT e.id FROM executions_execution e
 WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _key
   AND e.status IN ('pending', 'running')
 ORDER BY e.created_at, e.id
 LIMIT 1
$oldest_key_holder$
;

-- The distinct sets of named limits that a workflow's queued executions hold (one, unless its
-- `limits` changed while some were queued): a loose index scan of execution_queued_limits, one
-- probe a set, however long the queue.
CREATE OR REPLACE FUNCTION mantle_queued_limit_sets(_workflow_id bigint)
RETURNS TABLE(named_limits bigint[])
LANGUAGE sql STABLE
AS $queued_limit_sets$
WITH RECURSIVE sets(named_limits) AS (
    (SELECT q.named_limits FROM executions_execution q
      WHERE q.workflow_id = _workflow_id AND q.status = 'queued' AND q.named_limits <> '{}'
      ORDER BY q.named_limits LIMIT 1)
  UNION ALL
    SELECT (SELECT q.named_limits FROM executions_execution q
             WHERE q.workflow_id = _workflow_id AND q.status = 'queued'
               AND q.named_limits <> '{}' AND q.named_limits > s.named_limits
             ORDER BY q.named_limits LIMIT 1)
      FROM sets s WHERE s.named_limits IS NOT NULL
)
SELECT s.named_limits FROM sets s WHERE s.named_limits IS NOT NULL
$queued_limit_sets$
