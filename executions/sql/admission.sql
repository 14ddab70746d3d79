-- Admission (services/admission.py): the statements mantle_admit (mantle_admit.sql) is built
-- from, and its call. Each runs after the advisory locks of its transaction are held, so in
-- READ COMMITTED it sees every commit made before the lock was granted: counts are exact.
-- bench/pgbench.py runs the same statements one by one as the physical limit.

-- name: admission_state
-- The live state a newcomer is judged against: limits, slot holders, and the FIFO queue ahead.
SELECT t.max_concurrent_executions,
       v.max_parallel_executions,
       v.on_limit,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.status IN {slot_holding}),
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.workflow_id = %(workflow_id)s
           AND e.status IN {slot_holding}),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = %(workflow_id)s AND e.status = 'queued'),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.team_id = %(team_id)s AND e.status = 'queued' AND e.blocked_by = 'team')
  FROM teams_team t, workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE t.id = %(team_id)s AND w.id = %(workflow_id)s

-- name: admission_insert
-- The admitted execution. created_at and (when queued) queued_at are the same clock time, taken
-- after the locks were granted: the FIFO order of the queue is the order of the inserts.
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, blocked_by,
        idempotency_key, error, created_at, queued_at)
VALUES (%(id)s, %(team_id)s, %(workflow_id)s, %(version_id)s, %(status)s,
        %(inputs)s, %(trigger)s, %(forced)s, %(blocked_by)s, %(idempotency_key)s, '',
        %(created_at)s, CASE WHEN %(status)s = 'queued' THEN %(created_at)s END)

-- name: dispatch_insert
-- The start of a pending execution, for the worker cluster (django-q2's ORM broker queue): it
-- commits with the execution or not at all.
INSERT INTO django_q_ormq (key, payload, lock) VALUES (%(task_key)s, %(task)s, %(created_at)s)

-- name: admit
-- One admission: the whole locked part in one round trip (mantle_admit.sql).
SELECT * FROM mantle_admit(
    %(id)s, %(team_id)s, %(workflow_id)s, %(version_id)s, %(inputs)s::jsonb, %(trigger)s::jsonb,
    %(forced)s, %(idempotency_key)s, %(default_team_limit)s, %(team_namespace)s,
    %(workflow_namespace)s, %(lock_timeout)s, %(task_key)s, %(task)s)
