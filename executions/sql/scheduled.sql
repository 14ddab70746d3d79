-- Delayed runs (services/scheduled.py): the due ones of one team, admitted by the engine clock in
-- batches, each batch one transaction.

-- name: scheduled_due_teams
-- The teams with runs due now (by the database's clock), the one due first first.
SELECT team_id FROM executions_execution
 WHERE status = 'scheduled' AND run_at <= now()
 GROUP BY team_id
 ORDER BY min(run_at)
 LIMIT %(teams)s

-- name: scheduled_due_lock
-- At most %(batch)s of one team's due runs, oldest run_at first, locked: a second clock passes
-- them over (SKIP LOCKED), and a cancel waits for this batch's commit, then finds them gone.
SELECT id, workflow_id, inputs, trigger, priority, idempotency_key, run_at
  FROM executions_execution
 WHERE status = 'scheduled' AND run_at <= now() AND team_id = %(team_id)s
 ORDER BY run_at, created_at
 LIMIT %(batch)s
   FOR UPDATE SKIP LOCKED

-- name: scheduled_delete
-- The batch's runs, gone before their admissions insert each under its own id again.
DELETE FROM executions_execution WHERE id = ANY(%(ids)s::uuid[]) AND status = 'scheduled'

-- name: scheduled_admit
-- Each run of the batch through mantle_admit, in the batch's order (its ordinality), in this one
-- statement: the team's admission locks are taken by the first and held to the batch's commit,
-- so the batch is admitted as its runs would be one after another, limits decided then.
SELECT r.id, a.outcome, a.scope, a.scope_limit, a.scope_name, a.retry_after, a.superseded
  FROM unnest(%(ids)s::uuid[], %(workflow_ids)s::bigint[], %(version_ids)s::bigint[],
              %(inputs)s::jsonb[], %(triggers)s::jsonb[], %(idempotency_keys)s::text[],
              %(concurrency_keys)s::text[], %(priorities)s::int[], %(key_limits)s::int[],
              %(key_locks)s::int[])
       WITH ORDINALITY AS r(id, workflow_id, version_id, inputs, trigger, idempotency_key,
                            concurrency_key, priority, key_limit, key_lock, ord)
 CROSS JOIN LATERAL mantle_admit(
    r.id, %(team_id)s, r.workflow_id, r.version_id, r.inputs, r.trigger, false,
    r.idempotency_key, r.concurrency_key, r.priority, r.key_limit, %(default_team_limit)s,
    %(team_namespace)s, %(limit_namespace)s, %(workflow_namespace)s, %(key_namespace)s,
    r.key_lock, %(lock_timeout)s) AS a
 ORDER BY r.ord

-- name: scheduled_run_at
-- Each admitted run keeps its run_at (mantle_admit inserts none).
UPDATE executions_execution e SET run_at = r.run_at
  FROM unnest(%(ids)s::uuid[], %(run_ats)s::timestamptz[]) AS r(id, run_at)
 WHERE e.id = r.id

-- name: scheduled_wake_workers
-- The batch's pending runs announced at its commit (mantle_admit marks each as announced after
-- commit instead, which a batch does not do one by one).
SELECT pg_notify('mantle_work', '')
