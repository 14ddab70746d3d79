-- The engine's statements: the step workers' claims, leases and settlements and the reaper's
-- reads, run by executions.services.claims and executions.selectors for engine/dispatch.py,
-- engine/orchestrator.py and engine/reaper.py.

-- name: executions_claim
-- pending → running for up to %(limit)s executions, the teams in turn (each team's oldest
-- first): one team's backlog of pending executions never holds back another team's start.
-- Its cost is an index probe per team with pending executions plus the rows it reads, whatever
-- the backlog (docs/performance.md, Claims): `teams` finds the teams on the index
-- execution_pending, then each team's oldest %(limit)s are locked (SKIP LOCKED: what another
-- claim holds is passed over, not waited for), and the teams take turns among those.
-- (The caller advances them in the same transaction.)
WITH RECURSIVE teams(team_id) AS (
    (SELECT team_id FROM executions_execution WHERE status = 'pending'
      ORDER BY team_id, created_at, id LIMIT 1)
  UNION ALL
    SELECT (SELECT x.team_id FROM executions_execution x
             WHERE x.status = 'pending' AND x.team_id > teams.team_id
             ORDER BY x.team_id, x.created_at, x.id LIMIT 1)
      FROM teams WHERE teams.team_id IS NOT NULL
), ranked AS (
    SELECT p.id, p.created_at,
           row_number() OVER (PARTITION BY p.team_id ORDER BY p.created_at, p.id) AS turn
      FROM teams CROSS JOIN LATERAL (
           SELECT x.id, x.team_id, x.created_at FROM executions_execution x
            WHERE x.team_id = teams.team_id AND x.status = 'pending'
            ORDER BY x.created_at, x.id LIMIT %(limit)s
              FOR UPDATE OF x SKIP LOCKED) p
)
UPDATE executions_execution SET status = 'running', started_at = now()
 WHERE id = ANY(ARRAY(SELECT ranked.id FROM ranked
                        ORDER BY ranked.turn, ranked.created_at LIMIT %(limit)s))
RETURNING id

-- name: executions_lock
-- The executions %(ids)s, locked in id order (two workers advancing overlapping sets never
-- deadlock): the columns engine.orchestrator's advance reads, its workflow's name and its team's
-- slug.
SELECT e.id, e.team_id, e.workflow_id, e.version_id, e.status, e.started_at, e.reused_steps,
       w.name AS workflow_name, t.slug AS team_slug
  FROM executions_execution e
  JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
  JOIN teams_team t ON t.id = e.team_id
 WHERE e.id = ANY(%(ids)s::uuid[])
 ORDER BY e.id
   FOR UPDATE OF e

-- name: step_rows
-- The steps' own rows (not a fan-out's branches) of the executions %(ids)s, every column but a
-- fan-out's items, and item_count: how many items it has.
SELECT id, execution_id, name, fanout_index, status, attempt, output, error, lease_owner,
       lease_expires_at, not_before, created_at, started_at, completed_at,
       jsonb_array_length(items) AS item_count
  FROM executions_stepexecution
 WHERE execution_id = ANY(%(ids)s::uuid[]) AND fanout_index IS NULL

-- name: steps_claim
-- pending → running, leased to %(owner)s, for up to %(limit)s due steps of running executions:
-- the teams in turn, and within a team by branch index first (a plain step counts as index 0),
-- then age, so every execution's first steps come before later branches of any fan-out. One
-- team's backlog, of steps or branches, holds back another team's next step by at most one
-- step per team with work.
-- Its cost does not grow with the backlog (docs/performance.md, Claims): `teams` walks the
-- index step_claim_order from one team to the next (a loose index scan: one probe per team
-- with pending steps); `ranked` reads each team's first %(limit)s due steps in claim order from
-- the same index and locks them (SKIP LOCKED: steps another claim holds are passed over, not
-- waited for, so racing claims never take a step twice); the teams then take turns among
-- those, and the rows locked beyond %(limit)s are let go at commit. What it reads past is a
-- team's steps not yet due (a retry's backoff) and steps of executions that are ending. (The
-- chosen ids are an array: rows found by their key, never a scan of the table joined to them.)
WITH RECURSIVE teams(team_id) AS (
    (SELECT team_id FROM executions_stepexecution WHERE status = 'pending'
      ORDER BY team_id, coalesce(fanout_index, 0), id LIMIT 1)
  UNION ALL
    SELECT (SELECT d.team_id FROM executions_stepexecution d
             WHERE d.status = 'pending' AND d.team_id > teams.team_id
             ORDER BY d.team_id, coalesce(d.fanout_index, 0), d.id LIMIT 1)
      FROM teams WHERE teams.team_id IS NOT NULL
), ranked AS (
    SELECT c.id, c.branch,
           row_number() OVER (PARTITION BY c.team_id ORDER BY c.branch, c.id) AS turn
      FROM teams CROSS JOIN LATERAL (
           SELECT p.id, p.team_id, coalesce(p.fanout_index, 0) AS branch
             FROM executions_stepexecution p
            WHERE p.team_id = teams.team_id AND p.status = 'pending'
              AND (p.not_before IS NULL OR p.not_before <= now())
              -- Its execution is not ending (a step is pending only while its execution runs):
              -- a filter on each row read, never a join the planner could start from, and
              -- written NOT IN so that the planner expects it to pass (with `= 'running'` it
              -- expected 1 row in 200 and read and sorted a whole team's backlog instead).
              AND (SELECT r.status FROM executions_execution r WHERE r.id = p.execution_id)
                  NOT IN ('cancelled', 'completed', 'failed', 'timed_out')
            ORDER BY coalesce(p.fanout_index, 0), p.id LIMIT %(limit)s
              FOR UPDATE OF p SKIP LOCKED) c
)
UPDATE executions_stepexecution s
   SET status = 'running', lease_owner = %(owner)s, started_at = now(),
       lease_expires_at = now() + make_interval(secs => %(lease)s)
  FROM executions_execution e
 WHERE s.id = ANY(ARRAY(SELECT ranked.id FROM ranked
                          ORDER BY ranked.turn, ranked.branch, ranked.id LIMIT %(limit)s))
   AND e.id = s.execution_id
-- What running one attempt needs, besides its params: a Claim (executions.services.claims).
RETURNING s.id, s.attempt, s.name, s.fanout_index, s.execution_id, e.version_id, e.started_at

-- name: steps_claim_started
-- The first steps of the executions %(ids)s, which this transaction started (so no one else
-- sees them yet), leased to %(owner)s: up to %(limit)s of them, in the order of steps_claim.
UPDATE executions_stepexecution s
   SET status = 'running', lease_owner = %(owner)s, started_at = now(),
       lease_expires_at = now() + make_interval(secs => %(lease)s)
  FROM executions_execution e
 WHERE s.id IN (SELECT p.id FROM executions_stepexecution p
                 WHERE p.execution_id = ANY(%(ids)s::uuid[]) AND p.status = 'pending'
                 ORDER BY coalesce(p.fanout_index, 0), p.id LIMIT %(limit)s)
   AND e.id = s.execution_id
-- What running one attempt needs, besides its params: a Claim (executions.services.claims).
RETURNING s.id, s.attempt, s.name, s.fanout_index, s.execution_id, e.version_id, e.started_at

-- name: steps_claim_limited
-- waiting → running, leased to %(owner)s, for up to %(limit)s due steps with step-scope limits
-- or a rate whose limits have room and whose window admits them: mantle_claim_limited (its own
-- file), which takes the limits' and rates' locks.
SELECT step_id AS id, step_attempt AS attempt, step_name AS name,
       step_fanout_index AS fanout_index, step_execution_id AS execution_id,
       execution_version_id AS version_id, execution_started_at AS started_at
  FROM mantle_claim_limited(
       %(owner)s, %(lease)s, %(limit)s, %(limit_namespace)s, %(rate_namespace)s)

-- name: steps_next_due
-- Seconds until the earliest pending or waiting step waiting for its `not_before` (a retry's
-- backoff); at most RATE_POLL while a step waits for a rate's window (so it starts within
-- 1 s of the moment the window admits it).
SELECT extract(epoch FROM least(
    (SELECT now() + make_interval(secs => %(rate_poll)s) FROM executions_stepexecution
      WHERE status = 'waiting' AND rate_id IS NOT NULL LIMIT 1),
    (SELECT min(not_before) FROM executions_stepexecution
      WHERE status = 'pending' AND not_before > now()),
    (SELECT min(not_before) FROM executions_stepexecution
      WHERE status = 'waiting' AND not_before > now())) - now())

-- name: leases_renew
-- Renew every lease %(owner)s holds, fenced by attempt; the steps it no longer holds are missing
-- from the result (the reaper took them over).
UPDATE executions_stepexecution s
   SET lease_expires_at = now() + make_interval(secs => %(lease)s)
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempt), executions_execution e
 WHERE s.id = held.id AND s.attempt = held.attempt AND s.status = 'running'
   AND s.lease_owner = %(owner)s AND e.id = s.execution_id
RETURNING s.id, e.status

-- name: leases_release
-- A stopping worker hands back the attempts it did not finish, as if never claimed (a step with
-- step-scope limits waits for them again).
UPDATE executions_stepexecution s
   SET status = CASE WHEN s.limit_ids = '{}' THEN 'pending' ELSE 'waiting' END, lease_owner = '', lease_expires_at = NULL, started_at = NULL
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held(id, attempt), executions_execution e
 WHERE s.id = held.id AND s.attempt = held.attempt AND s.status = 'running'
   AND s.lease_owner = %(owner)s AND e.id = s.execution_id AND e.status = 'running'

-- name: steps_settle
-- End many attempts at once, each fenced by its owner and attempt: a retry becomes pending
-- again (the next attempt, claimable after %(delays)s seconds; waiting, for a step with
-- step-scope limits), anything else takes its final status. Returns the attempts it ended with their executions; an attempt missing from the
-- result was no longer its owner's.
-- Not %(flushed)s: its transaction commits without waiting for its WAL to reach the disk
-- (synchronous_commit off for this transaction alone). Only the end of completed attempts whose
-- units the same connection hands on next (engine.runner.settle_freeing) asks that: the hand-off
-- claim's commit, flushed, flushes this end with it (the WAL is one sequence), and so does any
-- commit that saw the units free. An end lost with the database before that is conservative:
-- its units stay counted, and the reaper retries the attempt once its lease has passed
-- (docs/performance.md, Step-scope hand-off).
UPDATE executions_stepexecution s
   SET status = CASE WHEN o.delay IS NOT NULL AND s.limit_ids <> '{}' THEN 'waiting'
                     WHEN o.delay IS NOT NULL THEN 'pending' ELSE o.status END,
       attempt = CASE WHEN o.delay IS NULL THEN s.attempt ELSE s.attempt + 1 END,
       not_before = CASE WHEN o.delay IS NULL THEN s.not_before
                         ELSE now() + make_interval(secs => o.delay) END,
       completed_at = CASE WHEN o.delay IS NULL THEN now() END,
       output = o.output::jsonb, error = o.error, lease_owner = '', lease_expires_at = NULL
  FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(owners)s::text[], %(statuses)s::text[],
              %(outputs)s::text[], %(errors)s::text[], %(delays)s::float[])
       AS o(id, attempt, owner, status, output, error, delay),
       set_config('synchronous_commit',
                  CASE WHEN %(flushed)s THEN current_setting('synchronous_commit') ELSE 'off' END,
                  true) AS commit_mode
 WHERE s.id = o.id AND s.attempt = o.attempt AND s.status = 'running' AND s.lease_owner = o.owner
RETURNING s.id, s.execution_id

-- name: steps_expired
-- Running attempts whose lease expired (their worker stopped heartbeating), with their owner
-- and when the lease ran out.
SELECT s.id, s.attempt, s.name, s.fanout_index, s.execution_id, e.version_id, e.started_at,
       s.lease_owner, s.lease_expires_at
  FROM executions_stepexecution s
  JOIN executions_execution e ON e.id = s.execution_id
 WHERE s.status = 'running' AND s.lease_expires_at < now()

-- name: execution_lease_lost
-- A step of the execution was lost with its worker %(owner)s: count that worker once (its
-- other steps of the execution follow in the same pass); how many workers it has lost.
UPDATE executions_execution
   SET lost_leases = lost_leases + (lost_lease_owner <> %(owner)s)::int,
       lost_lease_owner = %(owner)s
 WHERE id = %(id)s
RETURNING lost_leases

-- name: executions_past_timeout
-- Running executions past their workflow's `timeout`.
SELECT e.id FROM executions_execution e
  JOIN workflows_workflowversion v ON v.id = e.version_id
 WHERE e.status = 'running' AND jsonb_typeof(v.spec -> 'timeout') = 'number'
   AND e.started_at + make_interval(secs => (v.spec ->> 'timeout')::float) <= now()

-- name: executions_stalled
-- Running executions where nothing is pending, waiting or running: an `advance` was lost.
SELECT e.id FROM executions_execution e
 WHERE e.status = 'running' AND e.started_at <= now() - make_interval(secs => %(lease)s)
   AND NOT EXISTS (SELECT 1 FROM executions_stepexecution s
                    WHERE s.execution_id = e.id
                      AND (s.status IN ('pending', 'waiting')
                           OR (s.status = 'running' AND s.lease_owner <> '')))

-- name: executions_finish
-- End many executions at once (lifecycle.executions_finish_locked: rows its caller read under
-- their locks): each its terminal status and error, at %(completed_at)s.
UPDATE executions_execution e
   SET status = o.status, error = o.error, blocked_by = NULL, completed_at = %(completed_at)s
  FROM unnest(%(ids)s::uuid[], %(statuses)s::text[], %(errors)s::text[]) AS o(id, status, error)
 WHERE e.id = o.id

-- name: steps_insert
-- The step rows an advance created (engine/orchestrator.py), in one statement, from a JSON list
-- of the columns an advance sets; the others take their defaults (team_id the execution's, by
-- the trigger of migration 0020). A row `completed` (created skipped or failed) ends at the
-- statement's time, as Now() ends it in an ORM insert.
INSERT INTO executions_stepexecution
       (execution_id, name, fanout_index, status, attempt, error, lease_owner, limit_ids,
        limit_units, rate_id, rate_units, rate_key, completed_at)
SELECT r.execution_id, r.name, r.fanout_index, r.status, 1, r.error, '', r.limit_ids,
       r.limit_units, r.rate_id, r.rate_units, r.rate_key,
       CASE WHEN r.completed THEN statement_timestamp() END
  FROM jsonb_to_recordset(%(rows)s::jsonb)
       AS r(execution_id uuid, name text, fanout_index int, status text, error text,
            limit_ids bigint[], limit_units int[], rate_id bigint, rate_units int, rate_key text,
            completed boolean)
