-- Promotion (services/promotion.py): queued -> pending, decided whole by mantle_promote
-- (mantle_promote.sql) under the same locks as admission; these only call it and its parts, or
-- read which teams have a queue.

-- name: promote_team
-- One team's promotion, in one round trip: the promoted executions in the order they were
-- chosen, with what the metrics need (mantle_promote.sql).
SELECT * FROM mantle_promote(
    %(team_id)s::bigint, %(default_team_limit)s::int, %(team_namespace)s::int,
    %(limit_namespace)s::int, %(workflow_namespace)s::int, %(lock_timeout)s::text)

-- name: fair_queue_heads
-- The next %(limit)s (NULL: all) queued executions of a workflow in promotion order, with their
-- rank (mantle_fair_queue.sql); the dashboard reads it for many workflows at once.
SELECT * FROM mantle_fair_queue(
    %(workflow_id)s::bigint, %(per_key)s::int, %(stored_key_limits)s::boolean, %(limit)s::int,
    %(rate_per_key)s::boolean, statement_timestamp())

-- name: promotion_owed
-- Whether a terminal commit owes its team a promotion, without its lock
-- (mantle_promotion_owed.sql).
SELECT mantle_promotion_owed(%(team_id)s::bigint, %(team_namespace)s::int)

-- name: fair_heads
-- fair_queue_heads' answer at a cost flat in the number of the workflow's keys, through its
-- keys' turns (mantle_fair_heads.sql).
SELECT * FROM mantle_fair_heads(
    %(workflow_id)s::bigint, %(per_key)s::int, %(stored_key_limits)s::boolean, %(limit)s::int,
    %(rate_per_key)s::boolean, statement_timestamp())

-- name: teams_with_queue
SELECT DISTINCT team_id FROM executions_execution WHERE status = 'queued'

-- name: teams_waiting_for_time
-- The teams with a queue in a workflow that has a rate limit (one probe of execution_key_queue
-- per such workflow; not by blocked_by: a label written a moment before the window moved may
-- say "workflow" of one that waits for its window), and those with a debounced execution now
-- due (promotion's relabel clears not_before once due).
SELECT w.team_id
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE v.rate_max > 0
   AND EXISTS (SELECT 1 FROM executions_execution e
                WHERE e.workflow_id = w.id AND e.status = 'queued')
UNION
SELECT e.team_id FROM executions_execution e
 WHERE e.status = 'queued' AND e.not_before <= now()
