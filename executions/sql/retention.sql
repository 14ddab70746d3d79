-- Retention (services/retention.py): finished executions past their workflow's horizon, with
-- their steps (and so their outputs) and idempotency keys, old rejections, finished bulk
-- actions and the dashboard's old queue samples, deleted in
-- batches of at most %(batch)s rows, each statement its own transaction. Only terminal
-- executions are ever matched (%(statuses)s is a subset of them) and a terminal status is
-- final: a live row is never deleted.

-- name: expired_steps_delete
-- Steps of one workflow's executions of %(statuses)s finished before %(cutoff)s.
DELETE FROM executions_stepexecution WHERE id IN (
    SELECT s.id FROM executions_execution e
      JOIN executions_stepexecution s ON s.execution_id = e.id
     WHERE e.workflow_id = %(workflow_id)s AND e.status = ANY(%(statuses)s)
       AND e.completed_at < %(cutoff)s
     LIMIT %(batch)s)

-- name: expired_executions_delete
-- Those executions once their steps are gone (one a running pass still holds is passed over).
DELETE FROM executions_execution WHERE id IN (
    SELECT e.id FROM executions_execution e
     WHERE e.workflow_id = %(workflow_id)s AND e.status = ANY(%(statuses)s)
       AND e.completed_at < %(cutoff)s
       AND NOT EXISTS (SELECT 1 FROM executions_stepexecution s WHERE s.execution_id = e.id)
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED)
  AND status = ANY(%(statuses)s)

-- name: expired_count
-- What expired_steps_delete and expired_executions_delete would delete, in all.
SELECT count(*),
       coalesce(sum((SELECT count(*) FROM executions_stepexecution s
                      WHERE s.execution_id = e.id)), 0)
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
