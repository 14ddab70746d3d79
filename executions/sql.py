"""Named SQL for the hot paths (admission and promotion), with %(name)s placeholders.

Every statement here runs after the advisory locks of its transaction are held, so in READ
COMMITTED it sees every commit made before the lock was granted: counts are exact.
"""

# The live state a newcomer is judged against: limits, slot holders, and the FIFO queue ahead.
ADMISSION_STATE = """
SELECT t.max_concurrent_executions,
       v.max_parallel_executions,
       v.on_limit,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.status IN ('pending', 'running')),
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.workflow_id = %(workflow_id)s
           AND e.status IN ('pending', 'running')),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = %(workflow_id)s AND e.status = 'queued'),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.status = 'queued' AND e.blocked_by = 'team')
  FROM teams_team t, workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE t.id = %(team_id)s AND w.id = %(workflow_id)s
"""

# The admitted execution. created_at and (when queued) queued_at take the same
# statement_timestamp(), after the locks were granted: the FIFO order of the queue.
ADMISSION_INSERT = """
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, blocked_by,
        idempotency_key, error, queued_at)
VALUES (gen_random_uuid(), %(team_id)s, %(workflow_id)s, %(version_id)s, %(status)s,
        %(inputs)s::jsonb, %(trigger)s::jsonb, %(forced)s, %(blocked_by)s, %(idempotency_key)s, '',
        CASE WHEN %(status)s = 'queued' THEN statement_timestamp() END)
RETURNING id, created_at, queued_at
"""

# 1-based position of a queued execution in its workflow's queue.
QUEUE_POSITION = """
SELECT count(*) FROM executions_execution e
 WHERE e.workflow_id = %(workflow_id)s AND e.status = 'queued'
   AND (e.created_at, e.id) <= (%(created_at)s, %(id)s)
"""

QUEUED_WORKFLOWS = """
SELECT DISTINCT workflow_id FROM executions_execution
 WHERE team_id = %(team_id)s AND status = 'queued'
"""

# Per queued workflow of the team: its limit, slot holders and name; with the team's limit and
# slot holders repeated on each row.
PROMOTION_STATE = """
SELECT w.id, w.name, v.max_parallel_executions,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = w.team_id AND e.workflow_id = w.id
           AND e.status IN ('pending', 'running')),
       t.slug, t.max_concurrent_executions,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = t.id AND e.status IN ('pending', 'running'))
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  JOIN teams_team t ON t.id = w.team_id
 WHERE w.id = ANY(%(workflow_ids)s)
"""

OLDEST_QUEUED = """
SELECT id, created_at FROM executions_execution
 WHERE workflow_id = %(workflow_id)s AND status = 'queued'
 ORDER BY created_at, id
 LIMIT %(limit)s
"""

PROMOTE = """
UPDATE executions_execution
   SET status = 'pending', promoted_at = statement_timestamp(), blocked_by = NULL
 WHERE id = ANY(%(ids)s) AND status = 'queued'
RETURNING id, workflow_id, promoted_at - queued_at
"""

# What blocks the executions still queued: the team when it is full, else their workflow.
RELABEL_QUEUE = """
UPDATE executions_execution SET blocked_by = %(blocked_by)s
 WHERE team_id = %(team_id)s AND status = 'queued' AND blocked_by IS DISTINCT FROM %(blocked_by)s
"""

TEAMS_WITH_QUEUE = """
SELECT DISTINCT team_id FROM executions_execution WHERE status = 'queued'
"""
