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
-- Lock keys come in as arguments (core.locks stays their single source). {name} is the named
-- query of that name with each %(param)s read from the variable _param.

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
    {admission_team_lock};
    -- Each named limit of the workflow, locked in name order, then counted under its lock: its
    -- slot holders can only leave until this transaction ends. The first one full (or with a
    -- queue waiting for it) blocks the newcomer.
    FOR _limit_id, _limit_name, _limit_max IN {workflow_named_limits} LOOP
        {admission_limit_lock};
        _named_limits := _named_limits || _limit_id;
        IF NOT _forced AND _blocked_by_limit IS NULL THEN
            {named_limit_state} INTO _limit_holders, _limit_has_queue;
            IF _limit_has_queue OR (_limit_max > 0 AND _limit_holders >= _limit_max) THEN
                _blocked_by_limit := _limit_name;
                _blocked_limit_max := _limit_max;
            END IF;
        END IF;
    END LOOP;
    {admission_flow_locks};
    -- Paused (docs/operations.md): queued whatever the limits, forced or not, or rejected.
    {admission_paused} INTO _paused_by, _on_pause, _max_queued;
    IF _paused_by IS NOT NULL THEN
        IF _on_pause = 'reject' THEN
            RETURN QUERY SELECT 'rejected', 'paused', NULL::int, nullif(_paused_by, ''),
                NULL::int, NULL::timestamptz, NULL::bigint, NULL::uuid;
            RETURN;
        END IF;
        IF _max_queued > 0 THEN
            {key_queue_full} INTO _queue_full;
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
        {admission_state}
          INTO _team_limit, _workflow_limit, _on_limit, _key_limit, _max_queued, _rate_max,
               _rate_period, _rate_per_key, _debounce, _team_holders,
               _workflow_holders, _key_holders, _workflow_has_blocked_queue, _key_has_queue,
               _team_has_blocked_queue;
        _team_limit := coalesce(_team_limit, _default_team_limit);
        IF _debounce > 0 THEN
            -- Debounced: queued until `debounce` passes with no newer execution of its key (then
            -- promoted like any queued one, under every other limit); it supersedes the one of
            -- its key still waiting.
            {debounced_key_queued} INTO _superseded;
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
                {rate_window_full_until} INTO _rate_full_until;
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
            {oldest_key_holder} INTO _superseded;
            IF _superseded IS NOT NULL OR _blocked_by = 'key' THEN
                _blocked_by := NULL;
            END IF;
        ELSIF _blocked_by <> 'debounce' AND _on_limit = 'keep_latest' THEN
            -- At most one queued per key: the newcomer takes the place of the queued one.
            {latest_key_queued} INTO _superseded;
        END IF;
        IF _blocked_by <> 'debounce' AND _max_queued > 0 THEN
            {key_queue_full} INTO _queue_full;
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
        {admitted_announced_after_commit};
    END IF;
    {admission_insert};
    IF _status = 'pending' THEN
        RETURN QUERY SELECT _status, NULL::text, NULL::int, NULL::text, NULL::int, _created_at,
            NULL::bigint, _superseded;
    ELSE
        RETURN QUERY SELECT _status, _blocked_by, NULL::int, _blocked_by_limit, NULL::int,
            _created_at,
            -- Its place once the superseded one (older: ahead unless of lower priority) is gone.
            ({queue_position}) - (SELECT count(*) FROM executions_execution v
                                   WHERE v.id = _superseded AND v.priority >= _priority),
            _superseded;
    END IF;
END
$admit$
