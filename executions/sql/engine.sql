-- The engine's reads (engine/reaper.py). The step workers' claims and leases are still in
-- engine/dispatch.py.

-- name: executions_past_timeout
-- Running executions past their workflow's `timeout`.
SELECT e.id FROM executions_execution e
  JOIN workflows_workflowversion v ON v.id = e.version_id
 WHERE e.status = 'running' AND jsonb_typeof(v.spec -> 'timeout') = 'number'
   AND e.started_at + make_interval(secs => (v.spec ->> 'timeout')::float) <= now()

-- name: executions_stalled
-- Running executions where nothing is pending or running: an `advance` was lost.
SELECT e.id FROM executions_execution e
 WHERE e.status = 'running' AND e.started_at <= now() - make_interval(secs => %(lease)s)
   AND NOT EXISTS (SELECT 1 FROM executions_stepexecution s
                    WHERE s.execution_id = e.id
                      AND (s.status = 'pending' OR (s.status = 'running' AND s.lease_owner <> '')))
