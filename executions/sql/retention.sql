-- Retention (services/retention.py): finished executions past their workflow's horizon, with
-- their steps (and so their outputs) and idempotency keys, old rejections, finished bulk
-- actions and the dashboard's old queue samples, deleted in batches of at most %(batch)s rows,
-- each statement its own transaction. Only terminal executions are ever matched (%(statuses)s
-- is a subset of them) and a terminal status is final: a live row is never deleted.

-- name: expired_batch_delete
-- One batch of one workflow's executions of %(statuses)s finished before %(cutoff)s, oldest
-- first, deleted with their steps (and so their outputs and idempotency keys) in one statement,
-- steps first: at most %(take)s of them, as many as fit %(batch)s rows with their steps. Returns
-- the executions and steps deleted, and `oversized`: the oldest, when it alone has more rows
-- than a batch (expired_steps_of_delete thins it first), else NULL. The executions are locked
-- SKIP LOCKED first: one another transaction holds (a racing pass) is passed over, never
-- waited for.
WITH candidates AS (
    SELECT e.id, e.completed_at,
           1 + (SELECT count(*) FROM executions_stepexecution s
                 WHERE s.execution_id = e.id) AS row_count
      FROM executions_execution e
     WHERE e.workflow_id = %(workflow_id)s AND e.status = ANY(%(statuses)s)
       AND e.completed_at < %(cutoff)s
     ORDER BY e.completed_at
     LIMIT %(take)s
       FOR UPDATE OF e SKIP LOCKED),
doomed AS (
    SELECT id FROM (SELECT id, sum(row_count) OVER (ORDER BY completed_at, id) AS running
                      FROM candidates) c
     WHERE running <= %(batch)s),
steps AS (
    -- By the index on execution_id, whatever the table's statistics say: a join here may be
    -- planned as a scan of the whole step table per batch.
    DELETE FROM executions_stepexecution
     WHERE execution_id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING 1),
gone AS (
    DELETE FROM executions_execution e USING doomed d
     WHERE e.id = d.id AND e.status = ANY(%(statuses)s)
    RETURNING 1)
SELECT (SELECT count(*) FROM gone) AS executions, (SELECT count(*) FROM steps) AS steps,
       (SELECT c.id FROM candidates c WHERE NOT EXISTS (SELECT 1 FROM doomed)
         ORDER BY c.completed_at, c.id LIMIT 1) AS oversized

-- name: expired_steps_of_delete
-- At most %(batch)s steps of one expired execution with more rows than a batch (a fan-out's).
DELETE FROM executions_stepexecution WHERE id IN (
    SELECT id FROM executions_stepexecution WHERE execution_id = %(execution_id)s
     LIMIT %(batch)s)

-- name: expired_count
-- What expired_batch_delete would delete, in all its batches.
SELECT count(*) AS executions,
       coalesce(sum((SELECT count(*) FROM executions_stepexecution s
                      WHERE s.execution_id = e.id)), 0) AS steps
  FROM executions_execution e
 WHERE e.workflow_id = %(workflow_id)s AND e.status = ANY(%(statuses)s)
   AND e.completed_at < %(cutoff)s

-- name: expired_rejections_delete
DELETE FROM executions_rejection WHERE id IN (
    SELECT id FROM executions_rejection WHERE created_at < %(cutoff)s LIMIT %(batch)s)

-- name: expired_rejections_count
SELECT count(*) FROM executions_rejection WHERE created_at < %(cutoff)s

-- name: expired_queue_samples_delete
-- The dashboard's queue-depth samples taken before %(cutoff)s.
DELETE FROM executions_queuesample WHERE id IN (
    SELECT id FROM executions_queuesample WHERE taken_at < %(cutoff)s LIMIT %(batch)s)

-- name: expired_queue_samples_count
SELECT count(*) FROM executions_queuesample WHERE taken_at < %(cutoff)s

-- name: expired_bulk_actions_delete
-- Bulk actions finished before %(cutoff)s (a running one has no finished_at).
DELETE FROM executions_bulkaction WHERE id IN (
    SELECT id FROM executions_bulkaction WHERE finished_at < %(cutoff)s LIMIT %(batch)s)

-- name: expired_bulk_actions_count
SELECT count(*) FROM executions_bulkaction WHERE finished_at < %(cutoff)s
