"""Concurrency keys (docs/limits.md): the key of each execution, its indexes, and
mantle_admit with the key (its lock, its slot holders, its queue), without the django-q2 task
arguments that were always NULL since the step workers (migration 0005).

The function is frozen here as rendered from executions/sql/ when this migration was written
(tests/structure/test_migrations.py checks it is what executions/sql builds now).
"""

import importlib

from django.db import migrations, models

PREVIOUS = importlib.import_module("executions.migrations.0004_admission_function")

OLD_SIGNATURE = (
    "mantle_admit(uuid, bigint, bigint, bigint, jsonb, jsonb, boolean, text, int, int, int, "
    "text, text, text)"
)
NEW_SIGNATURE = (
    "mantle_admit(uuid, bigint, bigint, bigint, jsonb, jsonb, boolean, text, text, int, int, "
    "int, int, int, text)"
)

ADMIT_FUNCTION = r"""
CREATE OR REPLACE FUNCTION mantle_admit(
    _id uuid, _team_id bigint, _workflow_id bigint, _version_id bigint, _inputs jsonb,
    _trigger jsonb, _forced boolean, _idempotency_key text, _concurrency_key text,
    _default_team_limit int, _team_namespace int, _workflow_namespace int, _key_namespace int,
    _key_lock int, _lock_timeout text)
RETURNS TABLE(outcome text, scope text, scope_limit int, admitted_at timestamptz,
              queue_position bigint)
LANGUAGE plpgsql VOLATILE AS $admit$
DECLARE
    _team_limit int;
    _workflow_limit int;
    _on_limit text;
    _key_limit int;
    _team_holders bigint;
    _workflow_holders bigint;
    _key_holders bigint;
    _workflow_has_blocked_queue boolean;
    _key_has_queue boolean;
    _team_has_blocked_queue boolean;
    _status text := 'pending';
    _blocked_by text;
    _created_at timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(_team_namespace, _team_id::int),
       pg_advisory_xact_lock(_workflow_namespace, _workflow_id::int),
       pg_advisory_xact_lock(_key_namespace, _key_lock)
  FROM (SELECT set_config('lock_timeout', _lock_timeout, true)) AS bounded;
    IF NOT _forced THEN
        SELECT t.max_concurrent_executions,
       v.max_parallel_executions,
       v.on_limit,
       v.max_parallel_per_key,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = _team_id AND e.status IN ('pending', 'running')),
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = _team_id AND e.workflow_id = _workflow_id
           AND e.status IN ('pending', 'running')),
       (SELECT count(*) FROM executions_execution e
         WHERE v.max_parallel_per_key > 0 AND e.workflow_id = _workflow_id
           AND e.concurrency_key = _concurrency_key AND e.status IN ('pending', 'running')),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = _workflow_id AND e.status = 'queued'
           AND e.blocked_by = 'workflow'),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
           AND e.status = 'queued'),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.team_id = _team_id AND e.status = 'queued' AND e.blocked_by = 'team')
  FROM teams_team t, workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE t.id = _team_id AND w.id = _workflow_id
          INTO _team_limit, _workflow_limit, _on_limit, _key_limit, _team_holders,
               _workflow_holders, _key_holders, _workflow_has_blocked_queue, _key_has_queue,
               _team_has_blocked_queue;
        _team_limit := coalesce(_team_limit, _default_team_limit);
        IF _team_has_blocked_queue OR (_team_limit > 0 AND _team_holders >= _team_limit) THEN
            _blocked_by := 'team';
        ELSIF _key_limit > 0 AND _key_holders >= _key_limit THEN
            _blocked_by := 'key';
        ELSIF _workflow_has_blocked_queue
              OR (_workflow_limit > 0 AND _workflow_holders >= _workflow_limit) THEN
            _blocked_by := 'workflow';
        ELSIF _key_has_queue THEN
            -- Its key's queue, not yet promoted into the slot a completion just freed.
            _blocked_by := CASE WHEN _concurrency_key = '' THEN 'workflow' ELSE 'key' END;
        END IF;
        IF _blocked_by IS NOT NULL AND _on_limit = 'reject' THEN
            RETURN QUERY SELECT 'rejected', _blocked_by,
                CASE _blocked_by WHEN 'team' THEN _team_limit WHEN 'key' THEN _key_limit
                                 ELSE _workflow_limit END,
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
        idempotency_key, concurrency_key, error, created_at, queued_at)
VALUES (_id, _team_id, _workflow_id, _version_id, _status,
        _inputs, _trigger, _forced, _blocked_by, _idempotency_key,
        _concurrency_key, '', _created_at,
        CASE WHEN _status = 'queued' THEN _created_at END);
    IF _status = 'pending' THEN
        RETURN QUERY SELECT _status, NULL::text, NULL::int, _created_at, NULL::bigint;
    ELSE
        RETURN QUERY SELECT _status, _blocked_by, NULL::int, _created_at,
            (SELECT count(*) FROM executions_execution e
 WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
   AND e.status = 'queued' AND (e.created_at, e.id) <= (_created_at, _id));
    END IF;
END
$admit$
"""


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0006_step_unfinished_branches"),
        ("teams", "0001_initial"),
        ("workflows", "0003_max_parallel_per_key"),
    ]

    operations = [
        migrations.RunSQL(
            sql=f"DROP FUNCTION {OLD_SIGNATURE}", reverse_sql=PREVIOUS.ADMIT_FUNCTION
        ),
        migrations.RemoveIndex(
            model_name="execution",
            name="execution_workflow_queue",
        ),
        migrations.AddField(
            model_name="execution",
            name="concurrency_key",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AlterField(
            model_name="execution",
            name="blocked_by",
            field=models.CharField(
                blank=True,
                choices=[("team", "Team"), ("workflow", "Workflow"), ("key", "Key")],
                max_length=8,
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="rejection",
            name="scope",
            field=models.CharField(
                choices=[("team", "Team"), ("workflow", "Workflow"), ("key", "Key")], max_length=8
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("status__in", ("pending", "running"))),
                fields=["workflow", "concurrency_key"],
                name="execution_key_holders",
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("status", "queued")),
                fields=["workflow", "concurrency_key", "created_at", "id"],
                name="execution_key_queue",
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("blocked_by", "team"), ("status", "queued")),
                fields=["team"],
                name="execution_team_blocked",
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("blocked_by", "workflow"), ("status", "queued")),
                fields=["workflow"],
                name="execution_workflow_blocked",
            ),
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("promoted_at__isnull", False)),
                fields=["workflow", "concurrency_key", "promoted_at"],
                name="execution_key_promoted",
            ),
        ),
        migrations.RunSQL(sql=ADMIT_FUNCTION, reverse_sql=f"DROP FUNCTION {NEW_SIGNATURE}"),
    ]
