"""A per-key limit given by an expression (docs/limits.md, Per-key limits from an expression):
`max_parallel_per_key` may be one "{{ … }}" over inputs and trigger, evaluated once at admission
and stored on the execution (key_limit); mantle_admit takes it as a new argument
(_evaluated_key_limit: NULL when the workflow gives a plain count) and a newcomer fits when its
key's holders are fewer than the value it evaluated. A new signature: the old one is dropped.

The function is frozen here as rendered from executions/sql/ when this migration was written
(tests/structure/test_migrations.py checks it is what executions/sql builds now).
"""

import importlib

from django.db import migrations, models

PREVIOUS = importlib.import_module("executions.migrations.0021_pause")
OLD_SIGNATURE = importlib.import_module("executions.migrations.0012_named_limits").NEW_SIGNATURE
NEW_SIGNATURE = (
    "mantle_admit(uuid, bigint, bigint, bigint, jsonb, jsonb, boolean, text, text, int, int, "
    "int, int, int, int, int, int, text)"
)

ADMIT_FUNCTION = r"""
CREATE OR REPLACE FUNCTION mantle_admit(
    _id uuid, _team_id bigint, _workflow_id bigint, _version_id bigint, _inputs jsonb,
    _trigger jsonb, _forced boolean, _idempotency_key text, _concurrency_key text,
    _priority int, _evaluated_key_limit int, _default_team_limit int, _team_namespace int, _limit_namespace int,
    _workflow_namespace int, _key_namespace int, _key_lock int, _lock_timeout text)
RETURNS TABLE(outcome text, scope text, scope_limit int, scope_name text, retry_after int,
              admitted_at timestamptz, queue_position bigint, superseded uuid)
LANGUAGE plpgsql VOLATILE
-- Generic plans, made once per connection: with PL/pgSQL's default, every statement here was
-- planned again on every call for its parameters' values, a third of the function's CPU.
SET plan_cache_mode = force_generic_plan
AS $admit$
DECLARE
    _team_limit int;
    _workflow_limit int;
    _on_limit text;
    _key_limit int;
    _max_queued int;
    _rate_max int;
    _rate_period float8;
    _rate_per_key boolean;
    _rate_full_until timestamptz;
    _debounce float8;
    _not_before timestamptz;
    _queue_full boolean;
    _team_holders bigint;
    _workflow_holders bigint;
    _key_holders bigint;
    _workflow_has_blocked_queue boolean;
    _key_has_queue boolean;
    _team_has_blocked_queue boolean;
    _status text := 'pending';
    _blocked_by text;
    _created_at timestamptz;
    _superseded uuid;
    _limit_id bigint;
    _limit_name text;
    _limit_max int;
    _limit_holders bigint;
    _limit_has_queue boolean;
    _named_limits bigint[] := '{}';
    _blocked_by_limit text;
    _blocked_limit_max int;
    _paused_by text;
    _on_pause text;
BEGIN
    PERFORM pg_advisory_xact_lock(_team_namespace, _team_id::int)
  FROM (SELECT set_config('lock_timeout', _lock_timeout, true)) AS bounded;
    -- Each named limit of the workflow, locked in name order, then counted under its lock: its
    -- slot holders can only leave until this transaction ends. The first one full (or with a
    -- queue waiting for it) blocks the newcomer.
    FOR _limit_id, _limit_name, _limit_max IN SELECT l.id, l.name, l.max
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  JOIN teams_namedlimit l ON l.team_id = w.team_id AND l.name = ANY(v.limits)
 WHERE w.id = _workflow_id
 ORDER BY l.name LOOP
        PERFORM pg_advisory_xact_lock(_limit_namespace, _limit_id::int);
        _named_limits := _named_limits || _limit_id;
        IF NOT _forced AND _blocked_by_limit IS NULL THEN
            SELECT (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.named_limits @> ARRAY[_limit_id]::bigint[] AND e.status IN ('pending', 'running')
         LIMIT _limit_max) AS holders),
       EXISTS (SELECT 1 FROM executions_execution e
         WHERE e.team_id = _team_id AND e.status = 'queued' AND e.blocked_by = 'limit'
           AND e.blocked_by_limit = _limit_name) INTO _limit_holders, _limit_has_queue;
            IF _limit_has_queue OR (_limit_max > 0 AND _limit_holders >= _limit_max) THEN
                _blocked_by_limit := _limit_name;
                _blocked_limit_max := _limit_max;
            END IF;
        END IF;
    END LOOP;
    PERFORM pg_advisory_xact_lock(_workflow_namespace, _workflow_id::int),
       pg_advisory_xact_lock(_key_namespace, _key_lock);
    -- Paused (docs/operations.md): queued whatever the limits, forced or not, or rejected.
    SELECT CASE WHEN t.paused_at IS NOT NULL OR w.paused_at IS NOT NULL THEN ''
            ELSE (SELECT min(l.name) FROM teams_namedlimit l
                   WHERE l.id = ANY(_named_limits) AND l.paused_at IS NOT NULL) END,
       v.on_pause, v.max_queued
  FROM teams_team t, workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE t.id = _team_id AND w.id = _workflow_id INTO _paused_by, _on_pause, _max_queued;
    IF _paused_by IS NOT NULL THEN
        IF _on_pause = 'reject' THEN
            RETURN QUERY SELECT 'rejected', 'paused', NULL::int, nullif(_paused_by, ''),
                NULL::int, NULL::timestamptz, NULL::bigint, NULL::uuid;
            RETURN;
        END IF;
        IF _max_queued > 0 THEN
            SELECT count(*) - (_superseded IS NOT NULL)::int >= _max_queued
  FROM (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
           AND e.status = 'queued'
         LIMIT _max_queued + 1) AS queued INTO _queue_full;
            IF _queue_full THEN
                RETURN QUERY SELECT 'rejected', 'queue_full', _max_queued, NULL::text,
                    NULL::int, NULL::timestamptz, NULL::bigint, NULL::uuid;
                RETURN;
            END IF;
        END IF;
        _status := 'queued';
        _blocked_by := 'paused';
        _blocked_by_limit := nullif(_paused_by, '');
    END IF;
    IF NOT _forced AND _paused_by IS NULL THEN
        SELECT t.max_concurrent_executions,
       v.max_parallel_executions,
       v.on_limit,
       coalesce(_evaluated_key_limit, v.max_parallel_per_key),
       v.max_queued,
       v.rate_max,
       extract(epoch FROM v.rate_period)::float8,
       v.rate_per_key,
       extract(epoch FROM v.debounce)::float8,
       (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.team_id = _team_id AND e.status IN ('pending', 'running')
         LIMIT coalesce(t.max_concurrent_executions, _default_team_limit)) AS holders),
       (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.team_id = _team_id AND e.workflow_id = _workflow_id
           AND e.status IN ('pending', 'running')
         LIMIT v.max_parallel_executions) AS holders),
       (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
           AND e.status IN ('pending', 'running')
         LIMIT coalesce(_evaluated_key_limit, v.max_parallel_per_key)) AS holders),
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
          INTO _team_limit, _workflow_limit, _on_limit, _key_limit, _max_queued, _rate_max,
               _rate_period, _rate_per_key, _debounce, _team_holders,
               _workflow_holders, _key_holders, _workflow_has_blocked_queue, _key_has_queue,
               _team_has_blocked_queue;
        _team_limit := coalesce(_team_limit, _default_team_limit);
        IF _debounce > 0 THEN
            -- Debounced: queued until `debounce` passes with no newer execution of its key (then
            -- promoted like any queued one, under every other limit); it supersedes the one of
            -- its key still waiting.
            SELECT e.id FROM executions_execution e
 WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
   AND e.status = 'queued' AND e.blocked_by = 'debounce'
 ORDER BY e.created_at DESC, e.id DESC
 LIMIT 1 INTO _superseded;
            _blocked_by := 'debounce';
        ELSIF _team_has_blocked_queue OR (_team_limit > 0 AND _team_holders >= _team_limit) THEN
            _blocked_by := 'team';
        ELSIF _blocked_by_limit IS NOT NULL THEN
            _blocked_by := 'limit';
        ELSIF _key_limit > 0 AND _key_holders >= _key_limit THEN
            _blocked_by := 'key';
        ELSIF _workflow_has_blocked_queue
              OR (_workflow_limit > 0 AND _workflow_holders >= _workflow_limit) THEN
            _blocked_by := 'workflow';
        ELSE
            IF _rate_max > 0 THEN
                -- The rate window: rows that became pending, counted under the workflow's lock
                -- (the key's when per key; promotion takes the workflow's, covering its keys).
                SELECT e.pending_at + make_interval(secs => _rate_period)
  FROM executions_execution e
 WHERE e.workflow_id = _workflow_id
   AND e.pending_at > clock_timestamp() - make_interval(secs => _rate_period)
   AND (NOT _rate_per_key OR e.concurrency_key = _concurrency_key)
 ORDER BY e.pending_at DESC
 OFFSET _rate_max - 1 LIMIT 1 INTO _rate_full_until;
            END IF;
            IF _rate_full_until IS NOT NULL THEN
                _blocked_by := 'rate';
            ELSIF _key_has_queue THEN
                -- Its key's queue, not yet promoted into the slot a completion just freed.
                _blocked_by := CASE WHEN _concurrency_key = '' THEN 'workflow' ELSE 'key' END;
            END IF;
        END IF;
        IF _blocked_by <> 'debounce' AND _on_limit = 'reject' THEN
            RETURN QUERY SELECT 'rejected', _blocked_by,
                CASE _blocked_by WHEN 'team' THEN _team_limit WHEN 'key' THEN _key_limit
                                 WHEN 'limit' THEN _blocked_limit_max
                                 WHEN 'rate' THEN _rate_max
                                 ELSE _workflow_limit END,
                CASE WHEN _blocked_by = 'limit' THEN _blocked_by_limit END,
                -- Over the rate: whole seconds until the window admits one (at least 1).
                CASE WHEN _blocked_by = 'rate' THEN greatest(1, ceil(extract(epoch FROM
                    _rate_full_until - clock_timestamp())))::int END,
                NULL::timestamptz, NULL::bigint, NULL::uuid;
            RETURN;
        END IF;
        -- The strategies name the execution the newcomer supersedes; the caller ends it through
        -- the one terminal transition, in this transaction, under these locks, so no observer
        -- sees both or neither (services/admission.py).
        IF _blocked_by IN ('key', 'workflow') AND _on_limit = 'cancel_running' THEN
            -- The oldest slot holder of its key (of its workflow when unkeyed) makes room.
            -- None left of a full key: the one counted ended since, and under these locks slot
            -- holders can only leave, so the newcomer fits.
            SELECT e.id FROM executions_execution e
 WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
   AND e.status IN ('pending', 'running')
 ORDER BY e.created_at, e.id
 LIMIT 1 INTO _superseded;
            IF _superseded IS NOT NULL OR _blocked_by = 'key' THEN
                _blocked_by := NULL;
            END IF;
        ELSIF _blocked_by <> 'debounce' AND _on_limit = 'keep_latest' THEN
            -- At most one queued per key: the newcomer takes the place of the queued one.
            SELECT e.id FROM executions_execution e
 WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
   AND e.status = 'queued'
 ORDER BY e.created_at DESC, e.id DESC
 LIMIT 1 INTO _superseded;
        END IF;
        IF _blocked_by <> 'debounce' AND _max_queued > 0 THEN
            SELECT count(*) - (_superseded IS NOT NULL)::int >= _max_queued
  FROM (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
           AND e.status = 'queued'
         LIMIT _max_queued + 1) AS queued INTO _queue_full;
            IF _queue_full THEN
                RETURN QUERY SELECT 'rejected', 'queue_full', _max_queued, NULL::text,
                    NULL::int, NULL::timestamptz, NULL::bigint, NULL::uuid;
                RETURN;
            END IF;
        END IF;
        IF _blocked_by IS NOT NULL THEN
            _status := 'queued';
        END IF;
        IF _blocked_by IS DISTINCT FROM 'limit' THEN
            _blocked_by_limit := NULL;
        END IF;
    END IF;
    -- After the locks (not the calling statement's start): inserts under the lock are in
    -- created_at order.
    _created_at := clock_timestamp();
    IF _blocked_by = 'debounce' THEN
        _not_before := _created_at + make_interval(secs => _debounce);
    END IF;
    IF _status = 'pending' THEN
        PERFORM set_config('mantle.admitted', _id::text, true) AS admitted;
    END IF;
    INSERT INTO executions_execution
       (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, blocked_by,
        blocked_by_limit, named_limits, idempotency_key, concurrency_key, priority, key_limit,
        error, created_at, queued_at, pending_at, not_before)
VALUES (_id, _team_id, _workflow_id, _version_id, _status,
        _inputs, _trigger, _forced, _blocked_by, _blocked_by_limit,
        _named_limits, _idempotency_key, _concurrency_key, _priority,
        _evaluated_key_limit, '',
        _created_at,
        CASE WHEN _status = 'queued' THEN _created_at END,
        CASE WHEN _status = 'pending' THEN _created_at END, _not_before);
    IF _status = 'pending' THEN
        RETURN QUERY SELECT _status, NULL::text, NULL::int, NULL::text, NULL::int, _created_at,
            NULL::bigint, _superseded;
    ELSE
        RETURN QUERY SELECT _status, _blocked_by, NULL::int, _blocked_by_limit, NULL::int,
            _created_at,
            -- Its place once the superseded one (older: ahead unless of lower priority) is gone.
            (SELECT count(*) FROM executions_execution e
 WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
   AND e.status = 'queued'
   AND (e.priority > _priority
        OR e.priority = _priority AND (e.created_at, e.id) <= (_created_at, _id))) - (SELECT count(*) FROM executions_execution v
                                   WHERE v.id = _superseded AND v.priority >= _priority),
            _superseded;
    END IF;
END
$admit$
"""


class Migration(migrations.Migration):
    dependencies = [("executions", "0023_retention")]

    operations = [
        migrations.RunSQL(
            sql=f"DROP FUNCTION {OLD_SIGNATURE}", reverse_sql=PREVIOUS.ADMIT_FUNCTION
        ),
        migrations.AddField(
            model_name="execution",
            name="key_limit",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunSQL(sql=ADMIT_FUNCTION, reverse_sql=f"DROP FUNCTION {NEW_SIGNATURE}"),
    ]
