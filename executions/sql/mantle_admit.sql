-- mantle_admit: the whole locked part of an admission, one statement (services/admission.py).
-- Installed by the migrations from this file (docs/architecture.md, The data room).
--
-- The decision: FIFO, a newcomer never overtakes a queued execution of its key (of its workflow
-- when unkeyed: every execution then has the key ''), nor one that waits for a slot of its
-- workflow, of one of its named limits or of its team (it queues, and its priority places it in
-- its queue); the team is checked first, then the named limits by name, then the key, then the
-- workflow, then its rate window; `forced` skips the checks (a forced execution still holds its
-- named limits and counts in its rate window). Each statement of a VOLATILE function takes a
-- fresh snapshot in READ COMMITTED: the state read after the locks sees every commit made before
-- they were granted.
-- The room of each limit is read from mantle_room.sql, as promotion reads it: the rules are
-- written once (docs/architecture.md, Where the rules live). Lock namespaces come in as
-- arguments (core.locks stays their single source). `_run_at` (a delayed run's time) and
-- `_replay_of` (a replay's original) are only stored: the batch callers set them in the insert
-- instead of updating each row after it (docs/performance.md, figure 11).

CREATE OR REPLACE FUNCTION mantle_admit(
    _id uuid, _team_id bigint, _workflow_id bigint, _version_id bigint, _inputs jsonb,
    _trigger jsonb, _forced boolean, _idempotency_key text, _concurrency_key text,
    _priority int, _evaluated_key_limit int, _default_team_limit int, _team_namespace int, _limit_namespace int,
    _workflow_namespace int, _key_namespace int, _key_lock int, _lock_timeout text,
    _with_position boolean, _run_at timestamptz, _replay_of uuid)
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
    _rate_full_until timestamptz;
    _now timestamptz;
    _debounce float8;
    _not_before timestamptz;
    _queue_full boolean;
    _team_free bigint;
    _workflow_free bigint;
    _key_free bigint;
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
    _limit_free bigint;
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
    -- (Read under the team's lock, which every change of a team's named limits and of its
    -- workflows' versions takes.)
    FOR _limit_id, _limit_name, _limit_max IN
        SELECT l.id, l.name, l.max
          FROM workflows_workflowdefinition w
          JOIN workflows_workflowversion v ON v.id = w.current_version_id
          JOIN teams_namedlimit l ON l.team_id = w.team_id AND l.name = ANY(v.limits)
         WHERE w.id = _workflow_id
         ORDER BY l.name
    LOOP
        PERFORM pg_advisory_xact_lock(_limit_namespace, _limit_id::int);
        _named_limits := _named_limits || _limit_id;
        IF NOT _forced AND _blocked_by_limit IS NULL THEN
            -- Its room, and whether a queued execution waits for it (a newcomer queues behind
            -- it).
            SELECT r.free,
                   EXISTS (SELECT 1 FROM executions_execution e
                            WHERE e.team_id = _team_id AND e.status = 'queued'
                              AND e.blocked_by = 'limit' AND e.blocked_by_limit = _limit_name)
              INTO _limit_free, _limit_has_queue
              FROM mantle_limit_room(_limit_id) r;
            IF _limit_has_queue OR _limit_free = 0 THEN
                _blocked_by_limit := _limit_name;
                _blocked_limit_max := _limit_max;
            END IF;
        END IF;
    END LOOP;
    -- The workflow's lock, then the key's in the same statement (a target list is evaluated left
    -- to right). Unkeyed, _key_lock is NULL: pg_advisory_xact_lock is strict, no key is locked.
    PERFORM pg_advisory_xact_lock(_workflow_namespace, _workflow_id::int),
            pg_advisory_xact_lock(_key_namespace, _key_lock);
    -- Paused (docs/operations.md, Pausing during an incident): queued whatever the limits,
    -- forced or not, or rejected. _paused_by: '' for its team's or its workflow's own pause,
    -- else the name of the first (by name) paused named limit it holds, NULL when none. A pause
    -- takes these locks too: one committed before they were granted is seen, and none commits
    -- until this admission has.
    SELECT CASE WHEN tr.paused OR wr.paused THEN ''
                ELSE (SELECT min(l.name) FROM teams_namedlimit l
                       CROSS JOIN LATERAL mantle_limit_room(l.id) lr
                       WHERE l.id = ANY(_named_limits) AND lr.paused) END,
           v.on_pause, v.max_queued
      INTO _paused_by, _on_pause, _max_queued
      FROM workflows_workflowdefinition w
      JOIN workflows_workflowversion v ON v.id = w.current_version_id
     CROSS JOIN LATERAL mantle_team_room(_team_id, _default_team_limit) tr
     CROSS JOIN LATERAL mantle_workflow_room(w.id) wr
     WHERE w.id = _workflow_id;
    IF _paused_by IS NOT NULL THEN
        IF _on_pause = 'reject' THEN
            RETURN QUERY SELECT 'rejected', 'paused', NULL::int, nullif(_paused_by, ''),
                NULL::int, NULL::timestamptz, NULL::bigint, NULL::uuid;
            RETURN;
        END IF;
        IF _max_queued > 0 THEN
            -- max_queued: whether its queue (its key's) already holds that many, not counting one it
            -- supersedes; counts at most that many rows.
            SELECT count(*) - (_superseded IS NOT NULL)::int >= _max_queued INTO _queue_full
              FROM (SELECT 1 FROM executions_execution e
                     WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
                       AND e.status = 'queued'
                     LIMIT _max_queued + 1) AS queued;
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
        -- The live state the newcomer is judged against: the room of its team, its workflow
        -- and its key (its key limit: the one it evaluated when the workflow gives it by an
        -- expression, else its version's count), and the FIFO queues ahead: what waits for a
        -- team slot, for a slot of the workflow, and its own key's queue (unkeyed executions
        -- share the key '', so for them that is the workflow's whole queue).
        SELECT tr.room_limit, wr.room_limit, v.on_limit, k.key_limit, v.max_queued,
               v.rate_max, extract(epoch FROM v.debounce)::float8, tr.free, wr.free, kr.free,
               EXISTS (SELECT 1 FROM executions_execution e
                        WHERE e.workflow_id = _workflow_id AND e.status = 'queued'
                          AND e.blocked_by = 'workflow'),
               EXISTS (SELECT 1 FROM executions_execution e
                        WHERE e.workflow_id = _workflow_id
                          AND e.concurrency_key = _concurrency_key AND e.status = 'queued'),
               -- A scalar subquery ordered as execution_queue_labelled is: an EXISTS drops
               -- its ORDER BY, and its generic plan, made on a table without statistics (a
               -- new database), read the whole queue by another index instead (figure 11).
               (SELECT true FROM executions_execution e
                 WHERE e.team_id = _team_id AND e.status = 'queued' AND e.blocked_by = 'team'
                 ORDER BY e.blocked_by_limit LIMIT 1) IS NOT NULL
          INTO _team_limit, _workflow_limit, _on_limit, _key_limit, _max_queued, _rate_max,
               _debounce, _team_free, _workflow_free, _key_free, _workflow_has_blocked_queue,
               _key_has_queue, _team_has_blocked_queue
          FROM workflows_workflowdefinition w
          JOIN workflows_workflowversion v ON v.id = w.current_version_id
         CROSS JOIN LATERAL (SELECT coalesce(_evaluated_key_limit, v.max_parallel_per_key)
                               AS key_limit) k
         CROSS JOIN LATERAL mantle_team_room(_team_id, _default_team_limit) tr
         CROSS JOIN LATERAL mantle_workflow_room(w.id) wr
         CROSS JOIN LATERAL mantle_key_room(w.id, _concurrency_key, k.key_limit) kr
         WHERE w.id = _workflow_id;
        IF _debounce > 0 THEN
            -- Debounced: queued until `debounce` passes with no newer execution of its key (then
            -- promoted like any queued one, under every other limit); it supersedes the one of
            -- its key still waiting.
            SELECT e.id INTO _superseded FROM executions_execution e
             WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
               AND e.status = 'queued' AND e.blocked_by = 'debounce'
             ORDER BY e.created_at DESC, e.id DESC
             LIMIT 1;
            _blocked_by := 'debounce';
        ELSIF _team_has_blocked_queue OR _team_free = 0 THEN
            _blocked_by := 'team';
        ELSIF _blocked_by_limit IS NOT NULL THEN
            _blocked_by := 'limit';
        ELSIF _key_free = 0 THEN
            _blocked_by := 'key';
        ELSIF _workflow_has_blocked_queue OR _workflow_free = 0 THEN
            _blocked_by := 'workflow';
        ELSE
            IF _rate_max > 0 THEN
                -- The rate window: rows that became pending, counted under the workflow's lock
                -- (the key's when per key; promotion takes the workflow's, covering its keys).
                _now := clock_timestamp();
                SELECT r.full_until INTO _rate_full_until
                  FROM mantle_rate_room(_workflow_id, _concurrency_key, _now) r;
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
            SELECT h.id INTO _superseded
              FROM mantle_oldest_key_holder(_workflow_id, _concurrency_key) h;
            IF _superseded IS NOT NULL OR _blocked_by = 'key' THEN
                _blocked_by := NULL;
            END IF;
        ELSIF _blocked_by <> 'debounce' AND _on_limit = 'keep_latest' THEN
            -- At most one queued per key: the newcomer takes the place of the queued one.
            SELECT e.id INTO _superseded FROM executions_execution e
             WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
               AND e.status = 'queued'
             ORDER BY e.created_at DESC, e.id DESC
             LIMIT 1;
        END IF;
        IF _blocked_by <> 'debounce' AND _max_queued > 0 THEN
            -- max_queued: whether its queue (its key's) already holds that many, not counting one it
            -- supersedes; counts at most that many rows.
            SELECT count(*) - (_superseded IS NOT NULL)::int >= _max_queued INTO _queue_full
              FROM (SELECT 1 FROM executions_execution e
                     WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
                       AND e.status = 'queued'
                     LIMIT _max_queued + 1) AS queued;
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
        -- Marks the pending execution this transaction admits: the trigger that announces a
        -- row that becomes pending at its commit (triggers.sql) passes it over, and the
        -- admission announces it right after its commit instead (services/admission.py).
        PERFORM set_config('mantle.admitted', _id::text, true);
    END IF;
    -- created_at and (when queued) queued_at are the same clock time, taken after the locks
    -- were granted: the FIFO order of the queue is the order of the inserts.
    INSERT INTO executions_execution
           (id, team_id, workflow_id, version_id, status, inputs, trigger, forced, blocked_by,
            blocked_by_limit, named_limits, idempotency_key, concurrency_key, priority,
            key_limit, error, created_at, queued_at, pending_at, not_before, run_at,
            replay_of_id)
    VALUES (_id, _team_id, _workflow_id, _version_id, _status, _inputs, _trigger, _forced,
            _blocked_by, _blocked_by_limit, _named_limits, _idempotency_key, _concurrency_key,
            _priority, _evaluated_key_limit, '', _created_at,
            CASE WHEN _status = 'queued' THEN _created_at END,
            CASE WHEN _status = 'pending' THEN _created_at END, _not_before, _run_at,
            _replay_of);
    IF _status = 'pending' THEN
        RETURN QUERY SELECT _status, NULL::text, NULL::int, NULL::text, NULL::int, _created_at,
            NULL::bigint, _superseded;
    ELSE
        RETURN QUERY SELECT _status, _blocked_by, NULL::int, _blocked_by_limit, NULL::int,
            _created_at,
            -- Its place once the superseded one (older: ahead unless of lower priority) is gone.
            -- Its place in its key's queue (its workflow's when unkeyed), in promotion order:
            -- higher priority first, FIFO among equals. A count of the queue ahead of it, so
            -- only when the caller answers with it (not a batch: docs/performance.md, figure 11).
            CASE WHEN _with_position THEN
            (SELECT count(*) FROM executions_execution e
              WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _concurrency_key
                AND e.status = 'queued'
                AND (e.priority > _priority
                     OR e.priority = _priority AND (e.created_at, e.id) <= (_created_at, _id)))
            - (SELECT count(*) FROM executions_execution v
                WHERE v.id = _superseded AND v.priority >= _priority)
            END,
            _superseded;
    END IF;
END
$admit$
