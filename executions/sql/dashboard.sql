-- The dashboard's panels (executions/dashboard_selectors.py), each for a list of teams; each
-- column is named as a field of the row type it fills.

-- name: dashboard_rejections
SELECT team_id, workflow_id, count(*) AS count FROM executions_rejection
 WHERE team_id = ANY(%(team_ids)s) AND created_at > statement_timestamp() - %(window)s
 GROUP BY team_id, workflow_id

-- name: dashboard_depth
-- The deepest sampled queue of each workflow per minute, 0 = the current minute.
SELECT s.workflow_id,
       floor(extract(epoch FROM statement_timestamp() - s.taken_at) / 60)::int AS minutes_ago,
       max(s.queued) AS queued
  FROM executions_queuesample s
  JOIN workflows_workflowdefinition w ON w.id = s.workflow_id
 WHERE w.team_id = ANY(%(team_ids)s) AND s.taken_at > statement_timestamp() - %(window)s
 GROUP BY 1, 2

-- name: dashboard_queued
-- The queued executions of each team in the order promotion takes them (docs/operations.md,
-- The dashboard): each queued workflow's first %(limit)s in its fair order with every slot free
-- (no key or rate bound), with their rank in it; then the team's first %(limit)s waiting out a
-- debounce, rank NULL, the soonest due first. With what blocks each: the named limit by name,
-- the key by value, a debounce until when; and the priority and age that order the workflows'
-- queues among each other.
-- The fair order is promotion's own, mantle_fair_queue (mantle_fair_queue.sql, docs/limits.md).
-- tests/dashboard checks that promotion then takes the queue in this order.
SELECT e.id, e.team_id, w.name AS workflow, h.rank, e.blocked_by,
       extract(epoch FROM statement_timestamp() - e.created_at)::float8 AS wait_seconds,
       e.blocked_by_limit, e.concurrency_key, e.not_before, e.priority, e.created_at
  FROM (SELECT DISTINCT workflow_id FROM executions_execution
         WHERE team_id = ANY(%(team_ids)s) AND status = 'queued') wq
 -- Every slot free: no key limit, no stored key limits, no rate per key.
 CROSS JOIN LATERAL mantle_fair_queue(wq.workflow_id, 0, false, %(limit)s, false, now()) h
  JOIN executions_execution e ON e.id = h.id
  JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
UNION ALL
SELECT d.id, d.team_id, w.name, NULL, d.blocked_by,
       extract(epoch FROM statement_timestamp() - d.created_at)::float8,
       d.blocked_by_limit, d.concurrency_key, d.not_before, d.priority, d.created_at
  FROM (SELECT e.*, row_number() OVER (PARTITION BY e.team_id ORDER BY e.not_before, e.id)
                    AS team_rank
          FROM executions_execution e
         WHERE e.team_id = ANY(%(team_ids)s) AND e.status = 'queued' AND e.not_before > now()) d
  JOIN workflows_workflowdefinition w ON w.id = d.workflow_id
 WHERE d.team_rank <= %(limit)s

-- name: dashboard_running
-- The slot holders of each team, oldest first, with their steps' progress: a fan-out step's
-- parent row (it holds the items) counts as one step per item, as its branches are created
-- lazily; its steps waiting for step-scope limits and those limits' names (docs/limits.md).
SELECT id, team_id, name AS workflow, status, elapsed AS elapsed_seconds, done AS steps_done,
       total AS steps_total, waiting AS steps_waiting, waiting_for FROM (
  SELECT e.id, e.team_id, w.name, e.status, e.created_at, st.done, st.total, st.waiting,
         (SELECT string_agg(DISTINCT l.name, ', ' ORDER BY l.name)
            FROM executions_stepexecution ws JOIN teams_namedlimit l ON l.id = ANY(ws.limit_ids)
           WHERE ws.execution_id = e.id AND ws.status = 'waiting') AS waiting_for,
         extract(epoch FROM statement_timestamp()
                 - coalesce(e.started_at, e.promoted_at, e.created_at))::float8 AS elapsed,
         row_number() OVER (PARTITION BY e.team_id ORDER BY e.created_at, e.id) AS team_rank
    FROM executions_execution e
    JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
    JOIN workflows_workflowversion v ON v.id = e.version_id
    CROSS JOIN LATERAL (
      -- Every step of the version counts, created yet or not; an expanded fan-out step counts
      -- as its items.
      SELECT count(*) FILTER (WHERE s.items IS NULL
               AND s.status IN ('completed', 'failed', 'skipped', 'cancelled')) AS done,
             jsonb_array_length(v.spec -> 'steps')
               + coalesce(sum(jsonb_array_length(s.items) - 1)
                          FILTER (WHERE jsonb_typeof(s.items) = 'array'), 0) AS total,
             count(*) FILTER (WHERE s.status = 'waiting') AS waiting
        FROM executions_stepexecution s WHERE s.execution_id = e.id
    ) st
   WHERE e.team_id = ANY(%(team_ids)s) AND e.status IN ('pending', 'running')
) r
 WHERE team_rank <= %(limit)s
 ORDER BY team_id, created_at, id
