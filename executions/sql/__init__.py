"""Named SQL for the hot paths (admission and promotion), with %(name)s placeholders.

Every statement here runs after the advisory locks of its transaction are held, so in READ
COMMITTED it sees every commit made before the lock was granted: counts are exact.

Admission runs as one PL/pgSQL function, `mantle_admit` (ADMIT_FUNCTION, installed by a
migration), built from the named statements below and locks.ADMISSION_LOCKS: one round trip,
and no Python between the lock and the commit. bench/pgbench.py runs the same statements one by
one as the physical limit.
"""

import re

from core import locks

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

# The admitted execution. created_at and (when queued) queued_at are the same clock time, taken
# after the locks were granted: the FIFO order of the queue is the order of the inserts.
ADMISSION_INSERT = """
INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, blocked_by,
        idempotency_key, error, created_at, queued_at)
VALUES (%(id)s, %(team_id)s, %(workflow_id)s, %(version_id)s, %(status)s,
        %(inputs)s, %(trigger)s, %(forced)s, %(blocked_by)s, %(idempotency_key)s, '',
        %(created_at)s, CASE WHEN %(status)s = 'queued' THEN %(created_at)s END)
"""

# The start of a pending execution, for the worker cluster (django-q2's ORM broker queue): it
# commits with the execution or not at all.
DISPATCH_INSERT = """
INSERT INTO django_q_ormq (key, payload, lock) VALUES (%(task_key)s, %(task)s, %(created_at)s)
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


def _plpgsql(statement: str) -> str:
    """A named statement inside mantle_admit: each %(name)s becomes the variable _name."""
    return re.sub(r"%\((\w+)\)s", r"_\1", statement.strip())


# mantle_admit's first statement: the team's lock, then the workflow's, under lock_timeout.
LOCKS_IN_FUNCTION = "PERFORM " + _plpgsql(locks.ADMISSION_LOCKS).removeprefix("SELECT").strip()

# Outcomes of mantle_admit.
PENDING, QUEUED, REJECTED = "pending", "queued", "rejected"

# The decision: FIFO, a newcomer never overtakes a queued execution of its workflow, nor one of
# its team that waits for a team slot; the team is checked first; `forced` skips the checks.
# Each statement of a VOLATILE function takes a fresh snapshot in READ COMMITTED: the state read
# after the locks sees every commit made before they were granted. Lock keys come in as
# arguments (locks.Namespace stays their single source).
ADMIT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION mantle_admit(
    _id uuid, _team_id bigint, _workflow_id bigint, _version_id bigint, _inputs jsonb,
    _trigger jsonb, _forced boolean, _idempotency_key text, _default_team_limit int,
    _team_namespace int, _workflow_namespace int, _lock_timeout text,
    _task_key text, _task text)
RETURNS TABLE(outcome text, scope text, scope_limit int, admitted_at timestamptz,
              queue_position bigint)
LANGUAGE plpgsql VOLATILE AS $admit$
DECLARE
    _team_limit int;
    _workflow_limit int;
    _on_limit text;
    _team_holders bigint;
    _workflow_holders bigint;
    _workflow_has_queue boolean;
    _team_has_blocked_queue boolean;
    _status text := '{PENDING}';
    _blocked_by text;
    _created_at timestamptz;
BEGIN
    {LOCKS_IN_FUNCTION};
    IF NOT _forced THEN
        {_plpgsql(ADMISSION_STATE)}
          INTO _team_limit, _workflow_limit, _on_limit, _team_holders, _workflow_holders,
               _workflow_has_queue, _team_has_blocked_queue;
        _team_limit := coalesce(_team_limit, _default_team_limit);
        IF _team_has_blocked_queue OR (_team_limit > 0 AND _team_holders >= _team_limit) THEN
            _blocked_by := 'team';
        ELSIF _workflow_has_queue
              OR (_workflow_limit > 0 AND _workflow_holders >= _workflow_limit) THEN
            _blocked_by := 'workflow';
        END IF;
        IF _blocked_by IS NOT NULL AND _on_limit = 'reject' THEN
            RETURN QUERY SELECT '{REJECTED}', _blocked_by,
                CASE WHEN _blocked_by = 'team' THEN _team_limit ELSE _workflow_limit END,
                NULL::timestamptz, NULL::bigint;
            RETURN;
        END IF;
        IF _blocked_by IS NOT NULL THEN
            _status := '{QUEUED}';
        END IF;
    END IF;
    -- After the locks (not the calling statement's start): inserts under the lock are in
    -- created_at order.
    _created_at := clock_timestamp();
    {_plpgsql(ADMISSION_INSERT)};
    IF _status = '{PENDING}' THEN
        IF _task IS NOT NULL THEN
            {_plpgsql(DISPATCH_INSERT)};
        END IF;
        RETURN QUERY SELECT _status, NULL::text, NULL::int, _created_at, NULL::bigint;
    ELSE
        RETURN QUERY SELECT _status, _blocked_by, NULL::int, _created_at,
            ({_plpgsql(QUEUE_POSITION)});
    END IF;
END
$admit$
"""

ADMIT = """
SELECT * FROM mantle_admit(
    %(id)s, %(team_id)s, %(workflow_id)s, %(version_id)s, %(inputs)s::jsonb, %(trigger)s::jsonb,
    %(forced)s, %(idempotency_key)s, %(default_team_limit)s, %(team_namespace)s,
    %(workflow_namespace)s, %(lock_timeout)s, %(task_key)s, %(task)s)
"""
