-- Promotion (services/promotion.py): queued → pending under the team's lock, then the locks of
-- its queued workflows in id order, as admission takes them.

-- name: queued_workflows
SELECT DISTINCT workflow_id FROM executions_execution
 WHERE team_id = %(team_id)s AND status = 'queued'

-- name: promotion_state
-- Per queued workflow of the team: its limit, slot holders and name; with the team's limit and
-- slot holders repeated on each row.
SELECT w.id, w.name, v.max_parallel_executions,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = w.team_id AND e.workflow_id = w.id
           AND e.status IN {slot_holding}),
       t.slug, t.max_concurrent_executions,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = t.id AND e.status IN {slot_holding})
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  JOIN teams_team t ON t.id = w.team_id
 WHERE w.id = ANY(%(workflow_ids)s)

-- name: oldest_queued
SELECT id, created_at FROM executions_execution
 WHERE workflow_id = %(workflow_id)s AND status = 'queued'
 ORDER BY created_at, id
 LIMIT %(limit)s

-- name: promote
UPDATE executions_execution
   SET status = 'pending', promoted_at = statement_timestamp(), blocked_by = NULL
 WHERE id = ANY(%(ids)s) AND status = 'queued'
RETURNING id, workflow_id, promoted_at - queued_at

-- name: relabel_queue
-- What blocks the executions still queued: the team when it is full, else their workflow.
UPDATE executions_execution SET blocked_by = %(blocked_by)s
 WHERE team_id = %(team_id)s AND status = 'queued' AND blocked_by IS DISTINCT FROM %(blocked_by)s

-- name: teams_with_queue
SELECT DISTINCT team_id FROM executions_execution WHERE status = 'queued'
