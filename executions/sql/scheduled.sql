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
SELECT id, workflow_id, inputs, trigger, priority, idempotency_key, version_id, run_at
  FROM executions_execution
 WHERE status = 'scheduled' AND run_at <= now() AND team_id = %(team_id)s
 ORDER BY run_at, created_at
 LIMIT %(batch)s
   FOR UPDATE SKIP LOCKED

-- name: scheduled_delete
-- The batch's runs, gone before their admissions insert each under its own id again.
DELETE FROM executions_execution WHERE id = ANY(%(ids)s::uuid[]) AND status = 'scheduled'
