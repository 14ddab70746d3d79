-- Reads of the queues (selectors.py, collectors.py) and the dashboard's depth samples
-- (services/queue_samples.py).

-- name: queue_position
-- 1-based place of a queued execution in its queue, in promotion order (higher priority first,
-- FIFO among equals): its key's queue (its workflow's when unkeyed, the key ''). Also read inside
-- mantle_admit; queue_positions counts the same for many rows at once.
SELECT count(*) FROM executions_execution e
 WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = %(concurrency_key)s
   AND e.status = 'queued'
   AND (e.priority > %(priority)s
        OR e.priority = %(priority)s AND (e.created_at, e.id) <= (%(created_at)s, %(id)s))

-- name: queue_positions
-- The places of those of %(ids)s that are queued, each counted as queue_position counts it.
SELECT q.id,
       (SELECT count(*) FROM executions_execution e
         WHERE e.workflow_id = q.workflow_id AND e.concurrency_key = q.concurrency_key
           AND e.status = 'queued'
           AND (e.priority > q.priority
                OR e.priority = q.priority AND (e.created_at, e.id) <= (q.created_at, q.id)))
       AS position
  FROM executions_execution q
 WHERE q.id = ANY(%(ids)s) AND q.status = 'queued'

-- name: workflow_queues
-- One row per workflow of the teams: its current limits and its live counts. Slot holders
-- (pending + running) are what the limits count, so they are reported as `running`. With a rate
-- limit not per key, the executions that became pending in its trailing window (finished ones
-- too), read through the rate window's index (per key, each key has a window of its own:
-- busiest_keys counts it). Then its executions waiting out a debounce and the first one's due
-- time. Last, the pause that holds its newcomers: its team's, its own, or a named limit's it
-- lists (docs/operations.md, Pausing during an incident), NULL when none.
SELECT w.team_id, w.id, w.name, v.max_parallel_executions, v.on_limit, v.max_parallel_per_key,
       count(e.id) FILTER (WHERE e.status IN ('pending', 'running')) AS running,
       count(e.id) FILTER (WHERE e.status = 'queued') AS queued,
       min(e.created_at) FILTER (WHERE e.status = 'queued') AS oldest_queued_at,
       v.rate_max, extract(epoch FROM v.rate_period)::float8 AS rate_period_seconds,
       v.rate_per_key,
       CASE WHEN v.rate_max > 0 AND NOT v.rate_per_key THEN
         (SELECT count(*) FROM executions_execution r
           WHERE r.workflow_id = w.id
             AND r.pending_at > statement_timestamp() - v.rate_period) ELSE 0 END
         AS rate_in_window,
       count(e.id) FILTER (WHERE e.status = 'queued' AND e.blocked_by = 'debounce')
         AS debounced,
       min(e.not_before) FILTER (WHERE e.status = 'queued' AND e.blocked_by = 'debounce')
         AS next_debounce_due,
       CASE WHEN t.paused_at IS NOT NULL THEN 'team'
            WHEN w.paused_at IS NOT NULL THEN 'workflow'
            WHEN EXISTS (SELECT 1 FROM teams_namedlimit l
                          WHERE l.team_id = t.id AND l.name = ANY(v.limits)
                            AND l.paused_at IS NOT NULL) THEN 'limit' END AS paused_by
  FROM workflows_workflowdefinition w
  JOIN teams_team t ON t.id = w.team_id
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  LEFT JOIN executions_execution e
    ON e.workflow_id = w.id AND e.status IN ('queued', 'pending', 'running')
 WHERE w.team_id = ANY(%(team_ids)s)
 GROUP BY w.team_id, w.id, w.name, v.id, t.id
 ORDER BY w.name

-- name: named_limit_usage
-- The named limits of the teams %(team_ids)s (NULL: of every team), and the global ones when
-- %(with_global)s, by team (global last) and name: their max, slot holders (executions, across
-- every workflow that lists them), the executions queued waiting for them, their scope, the
-- units held by running steps (docs/limits.md, Step scope), the steps waiting for them and
-- the oldest wait, and whether it is paused.
SELECT coalesce(t.slug, '') AS team, l.name, l.max,
       (SELECT count(*) FROM executions_execution e
         WHERE e.named_limits @> ARRAY[l.id] AND e.status IN ('pending', 'running')) AS in_use,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = l.team_id AND e.status = 'queued' AND e.blocked_by = 'limit'
           AND e.blocked_by_limit = l.name) AS queued,
       CASE WHEN l.team_id IS NULL THEN 'global' ELSE 'team' END AS scope,
       (SELECT coalesce(sum(s.limit_units[array_position(s.limit_ids, l.id)]), 0)
          FROM executions_stepexecution s
         WHERE s.status = 'running' AND s.limit_ids @> ARRAY[l.id]) AS units_in_use,
       waiting.steps AS waiting_steps, waiting.oldest AS oldest_waiting_at,
       l.paused_at IS NOT NULL AS paused
  FROM teams_namedlimit l
  LEFT JOIN teams_team t ON t.id = l.team_id
 CROSS JOIN LATERAL (SELECT count(*) AS steps, min(s.created_at) AS oldest
                       FROM executions_stepexecution s
                      WHERE s.status = 'waiting' AND s.limit_ids @> ARRAY[l.id]) waiting
 WHERE %(team_ids)s::bigint[] IS NULL OR l.team_id = ANY(%(team_ids)s)
    OR (l.team_id IS NULL AND %(with_global)s)
 ORDER BY l.team_id IS NULL, t.slug, l.name

-- name: busiest_keys
-- Per workflow of the teams, its 20 keys with the longest queues (keyed executions only): their
-- queue, slot holders and oldest queued time; with a rate limit per key, the key's executions
-- that became pending in its trailing window (finished ones too; NULL without one).
SELECT b.workflow_id, b.key, b.queued, b.running, b.oldest_queued_at,
       CASE WHEN v.rate_max > 0 AND v.rate_per_key THEN
         (SELECT count(*) FROM executions_execution r
           WHERE r.workflow_id = b.workflow_id AND r.concurrency_key = b.key
             AND r.pending_at > statement_timestamp() - v.rate_period) END AS rate_in_window
  FROM (
    SELECT e.workflow_id, e.concurrency_key AS key,
           count(*) FILTER (WHERE e.status = 'queued') AS queued,
           count(*) FILTER (WHERE e.status IN ('pending', 'running')) AS running,
           min(e.created_at) FILTER (WHERE e.status = 'queued') AS oldest_queued_at,
           row_number() OVER (PARTITION BY e.workflow_id
                              ORDER BY count(*) FILTER (WHERE e.status = 'queued') DESC,
                                       e.concurrency_key) AS rank
      FROM executions_execution e
     WHERE e.team_id = ANY(%(team_ids)s) AND e.status IN ('queued', 'pending', 'running')
       AND e.concurrency_key <> ''
     GROUP BY e.workflow_id, e.concurrency_key) AS b
  JOIN workflows_workflowdefinition w ON w.id = b.workflow_id
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE b.rank <= 20
 ORDER BY b.workflow_id, b.rank

-- name: live_counts
-- The gauges of a scrape from one snapshot: queue depth and slot holders of every workflow
-- with a current version, 0 included; and whether a pause holds its newcomers (its own, its
-- team's, or that of a named limit it lists).
SELECT t.slug AS team, w.name AS workflow,
       count(e.id) FILTER (WHERE e.status = 'queued') AS queued,
       count(e.id) FILTER (WHERE e.status IN ('pending', 'running')) AS running,
       t.paused_at IS NOT NULL OR w.paused_at IS NOT NULL
         OR EXISTS (SELECT 1 FROM teams_namedlimit l
                     WHERE l.team_id = t.id AND l.name = ANY(v.limits)
                       AND l.paused_at IS NOT NULL) AS paused
  FROM workflows_workflowdefinition w
  JOIN teams_team t ON t.id = w.team_id
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  LEFT JOIN executions_execution e
    ON e.workflow_id = w.id AND e.status IN ('queued', 'pending', 'running')
 GROUP BY t.id, w.id, v.id

-- name: queue_sample_record
-- Only workflows with live executions get a row: a minute without one charts as an empty queue.
INSERT INTO executions_queuesample (workflow_id, queued, running, taken_at)
SELECT workflow_id,
       count(*) FILTER (WHERE status = 'queued'),
       count(*) FILTER (WHERE status IN ('pending', 'running')),
       statement_timestamp()
  FROM executions_execution
 WHERE status IN ('queued', 'pending', 'running')
 GROUP BY workflow_id

-- name: queued_past_timeout
-- Queued executions past their version's queue_timeout (seconds in its spec), with the timeout
-- as the YAML wrote it.
SELECT e.id, v.spec->>'queue_timeout_text' AS timeout
  FROM executions_execution e
  JOIN workflows_workflowversion v ON v.id = e.version_id
 WHERE e.status = 'queued' AND jsonb_typeof(v.spec->'queue_timeout') = 'number'
   AND e.queued_at + make_interval(secs => (v.spec->>'queue_timeout')::float)
       <= statement_timestamp()

-- name: steps_blocked_by
-- Of the steps %(ids)s, the waiting ones with what each waits for (docs/limits.md, Step scope):
-- ('limit', name) for the first of its limits, in name order, without room for its units now;
-- else ('rate', name) when it names a rate (its window is full, or it waits for its turn);
-- else ('limit', the first it lists): it waits for its turn, or for its retry.
SELECT w.id,
       CASE WHEN short.name IS NULL AND r.name IS NOT NULL THEN 'rate' ELSE 'limit' END AS kind,
       coalesce(short.name, r.name, first.name) AS name
  FROM executions_stepexecution w
  LEFT JOIN teams_namedrate r ON r.id = w.rate_id
  LEFT JOIN LATERAL (
      SELECT l.name FROM unnest(w.limit_ids, w.limit_units) AS u(id, units)
        JOIN teams_namedlimit l ON l.id = u.id
       WHERE l.max > 0 AND l.max - (
                 SELECT coalesce(sum(s.limit_units[array_position(s.limit_ids, l.id)]), 0)
                   FROM executions_stepexecution s
                  WHERE s.status = 'running' AND s.limit_ids @> ARRAY[l.id]) < u.units
       ORDER BY l.name, l.id LIMIT 1) short ON true
  LEFT JOIN LATERAL (
      SELECT l.name FROM teams_namedlimit l WHERE l.id = ANY(w.limit_ids)
       ORDER BY l.name, l.id LIMIT 1) first ON true
 WHERE w.id = ANY(%(ids)s::bigint[]) AND w.status = 'waiting'
