"""mantle_admit: the whole locked part of admission as one PL/pgSQL function.

The SQL is frozen here, as rendered from executions/sql.py when this migration was written:
a migration must install the same thing whenever it runs. tests/core/test_structure.py fails
when executions/sql.py builds a different function than the migrations install.
"""

from django.db import migrations

ADMIT_FUNCTION = r"""
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
    _status text := 'pending';
    _blocked_by text;
    _created_at timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(_team_namespace, _team_id::int),
       pg_advisory_xact_lock(_workflow_namespace, _workflow_id::int)
  FROM (SELECT set_config('lock_timeout', _lock_timeout, true)) AS bounded;
    IF NOT _forced THEN
        SELECT t.max_concurrent_executions,
       v.max_parallel_executions,
       v.on_limit,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = _team_id AND e.status IN ('pending', 'running')),
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = _team_id AND e.workflow_id = _workflow_id
           AND e.status IN ('pending', 'running')),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = _workflow_id AND e.status = 'queued'),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.team_id = _team_id AND e.status = 'queued' AND e.blocked_by = 'team')
  FROM teams_team t, workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE t.id = _team_id AND w.id = _workflow_id
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
            RETURN QUERY SELECT 'rejected', _blocked_by,
                CASE WHEN _blocked_by = 'team' THEN _team_limit ELSE _workflow_limit END,
                NULL::timestamptz, NULL::bigint;
            RETURN;
        END IF;
        IF _blocked_by IS NOT NULL THEN
            _status := 'queued';
        END IF;
    END IF;
    -- After the locks (not the calling statement's start): inserts under the lock are in
    -- created_at order.
    _created_at := clock_timestamp();
    INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, blocked_by,
        idempotency_key, error, created_at, queued_at)
VALUES (_id, _team_id, _workflow_id, _version_id, _status,
        _inputs, _trigger, _forced, _blocked_by, _idempotency_key, '',
        _created_at, CASE WHEN _status = 'queued' THEN _created_at END);
    IF _status = 'pending' THEN
        IF _task IS NOT NULL THEN
            INSERT INTO django_q_ormq (key, payload, lock) VALUES (_task_key, _task, _created_at);
        END IF;
        RETURN QUERY SELECT _status, NULL::text, NULL::int, _created_at, NULL::bigint;
    ELSE
        RETURN QUERY SELECT _status, _blocked_by, NULL::int, _created_at,
            (SELECT count(*) FROM executions_execution e
 WHERE e.workflow_id = _workflow_id AND e.status = 'queued'
   AND (e.created_at, e.id) <= (_created_at, _id));
    END IF;
END
$admit$
"""

DROP_ADMIT_FUNCTION = "DROP FUNCTION mantle_admit(uuid, bigint, bigint, bigint, jsonb, jsonb, boolean, text, int, int, int, text, text, text)"


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0003_step_fanout_items"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.RunSQL(sql=ADMIT_FUNCTION, reverse_sql=DROP_ADMIT_FUNCTION),
    ]
