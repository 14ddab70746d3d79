-- Delayed runs (services/scheduled.py): the due ones of one team, admitted by the engine clock in
-- batches, each batch one transaction.

-- name: scheduled_due_teams
-- The teams with runs due now (by the database's clock), the one due first first.
SELECT team_id FROM executions_execution
 WHERE status = 'scheduled' AND run_at <= now()
 GROUP BY team_id
 ORDER BY min(run_at)
 LIMIT %(teams)s

-- name: scheduled_next_due
-- Seconds (by the database's clock) until the first run falls due: negative when one is due
-- now, NULL when none is scheduled. One probe of execution_scheduled.
SELECT extract(epoch FROM min(run_at) - now())::float8 FROM executions_execution
 WHERE status = 'scheduled'

-- name: scheduled_due_lock
-- At most %(batch)s of one team's due runs, oldest run_at first, locked: a second clock passes
-- them over (SKIP LOCKED), and a cancel waits for this batch's commit, then finds them gone.
-- `current`: its workflow's current version is still the one it was scheduled with.
SELECT e.id, e.workflow_id, e.version_id = w.current_version_id AS current
  FROM executions_execution e
  JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
 WHERE e.status = 'scheduled' AND e.run_at <= now() AND e.team_id = %(team_id)s
 ORDER BY e.run_at, e.created_at
 LIMIT %(batch)s
   FOR UPDATE OF e SKIP LOCKED

-- name: scheduled_stored
-- What the batch's runs were scheduled with, for those admitted from Python (a key to evaluate,
-- or a version changed since).
SELECT id, workflow_id, inputs, trigger, priority, idempotency_key, version_id, run_at
  FROM executions_execution
 WHERE id = ANY(%(ids)s::uuid[])

-- name: scheduled_admit
-- The batch's runs of their workflow's current version admitted in one statement
-- (mantle_admit_due.sql); what the caller must still settle. The batch commits without waiting
-- for its WAL to reach the disk (synchronous_commit off for this transaction alone): a batch
-- lost with the database is one that never happened, its runs still scheduled and due, and
-- anything that saw its rows (a worker's claim, a promotion) commits after it in the one WAL
-- sequence, flushing it with its own.
SELECT d.id, d.outcome, d.scope, d.scope_limit, d.scope_name, d.retry_after, d.admitted_at,
       d.queue_position, d.superseded
  FROM set_config('synchronous_commit', 'off', true) AS commit_mode,
       mantle_admit_due(
    %(ids)s::uuid[], %(keys)s::text[], %(key_limits)s::int[], %(key_locks)s::int[],
    %(team_id)s, %(default_team_limit)s, %(team_namespace)s, %(limit_namespace)s,
    %(workflow_namespace)s, %(key_namespace)s, %(lock_timeout)s) AS d

-- name: scheduled_delete
-- The batch's runs, gone before their admissions insert each under its own id again.
DELETE FROM executions_execution WHERE id = ANY(%(ids)s::uuid[]) AND status = 'scheduled'
