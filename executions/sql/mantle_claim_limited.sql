-- mantle_claim_limited: the limit-aware step claim, one statement (engine/dispatch.py). Steps
-- with step-scope limits are created `waiting`, never `pending`, so the plain claim
-- (steps_claim) never sees them; this function alone makes them running (docs/limits.md, Step
-- scope). Installed from this file (docs/architecture.md, The data room).
--
-- Locks: the named limits of every waiting step, in name order (then id: a team's limit and
-- a global one may share a name), then the named rates they name, in name order, and nothing
-- before or after them in this transaction. A rate counts the units of the claims (started_at)
-- in its trailing period, of one key value when it is per key. One
-- claim may take several steps with different limits, so it locks them all up front: locking
-- per step would take them out of order. Each statement of a VOLATILE function takes a fresh
-- snapshot in READ COMMITTED: the units counted after the locks see every claim committed before
-- they were granted, and no other claim can make a step running under these limits until this
-- one commits. A step ending (completed, failed, cancelled, its lease lost) only frees units, so
-- it needs no lock: its commit NOTIFYs (triggers.sql) and the claimer comes back.
--
-- Order: the teams in turn (each team's first waiting step by execution priority then age, then
-- each team's second, ...; within a turn the team holding fewest units of these limits first),
-- then execution priority, then FIFO. A step that does not fit closes the limits it lacked room
-- in for every step behind it: nothing overtakes it there, so a step of 2 units is not starved
-- by steps of 1. Up to _room steps (the worker's free slots).
-- The locks are keyed as every advisory lock is (core/locks.py): (namespace, id), the namespaces
-- NAMED_LIMIT and NAMED_RATE passed in as _limit_namespace and _rate_namespace, the same keys
-- admission locks a named limit with. tests/concurrency runs this function without its two
-- PERFORM pg_advisory_xact_lock statements (executions.sql.CLAIM_LOCKS_IN_FUNCTION) and sees
-- limits broken.

CREATE OR REPLACE FUNCTION mantle_claim_limited(
    _owner text, _lease float8, _room int, _limit_namespace int, _rate_namespace int)
RETURNS TABLE(step_id bigint, step_attempt int, step_name text, step_fanout_index int,
              step_execution_id uuid, execution_version_id bigint,
              execution_started_at timestamptz)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $claim$
DECLARE
    _limit_id bigint;
    _locked bigint[] := '{}';
    _free jsonb;  -- limit id -> units free; a limit of max 0 (unlimited) is absent
    _closed bigint[] := '{}';
    _short bigint[];
    _step record;
    _i int;
    _rate_id bigint;
    _rates_locked bigint[] := '{}';
    _closed_rates text[] := '{}';  -- 'rate id:key' windows a step did not fit in
    _rate record;
    _window text;
    _limited bigint[];  -- the locked limits with a max (absent from _free: unlimited)
    _team_units jsonb;  -- team id -> units its running steps hold of the locked limits
    _waiting_limits bigint[];
    _waiting_rates bigint[];
    _depth int;  -- the most steps this claim can take
    _phase int;
    _steps refcursor;
    _read bigint[] := '{}';  -- the steps the first phase read
    _done boolean := false;
    _bounded boolean;
BEGIN
    IF _room <= 0 THEN
        RETURN;
    END IF;
    -- The limits and rates named by the waiting steps: a loose index scan of
    -- step_waiting_limits, one probe per distinct set, however many steps wait (those not yet
    -- due included: locking more of them, in the same order, changes no count).
    WITH RECURSIVE sets(limit_ids, rate_id) AS (
        (SELECT w.limit_ids, coalesce(w.rate_id, 0) FROM executions_stepexecution w
          WHERE w.status = 'waiting'
          ORDER BY w.limit_ids, coalesce(w.rate_id, 0) LIMIT 1)
      UNION ALL
        SELECT n.limit_ids, n.rate_id FROM sets s CROSS JOIN LATERAL (
               SELECT w.limit_ids, coalesce(w.rate_id, 0) AS rate_id
                 FROM executions_stepexecution w
                WHERE w.status = 'waiting'
                  AND (w.limit_ids, coalesce(w.rate_id, 0)) > (s.limit_ids, s.rate_id)
                ORDER BY w.limit_ids, coalesce(w.rate_id, 0) LIMIT 1) n
    )
    SELECT ARRAY(SELECT DISTINCT unnest(s.limit_ids) FROM sets s),
           ARRAY(SELECT DISTINCT s.rate_id FROM sets s WHERE s.rate_id <> 0)
      INTO _waiting_limits, _waiting_rates;
    FOR _limit_id IN
        SELECT l.id FROM teams_namedlimit l WHERE l.id = ANY(_waiting_limits)
         ORDER BY l.name, l.id
    LOOP
        PERFORM pg_advisory_xact_lock(_limit_namespace, _limit_id::int);
        _locked := _locked || _limit_id;
    END LOOP;
    -- Then the rates they name, in name order: a step claim holds its limits', then its rates'.
    FOR _rate_id IN
        SELECT r.id FROM teams_namedrate r WHERE r.id = ANY(_waiting_rates)
         ORDER BY r.name, r.id
    LOOP
        PERFORM pg_advisory_xact_lock(_rate_namespace, _rate_id::int);
        _rates_locked := _rates_locked || _rate_id;
    END LOOP;
    IF cardinality(_locked) = 0 AND cardinality(_rates_locked) = 0 THEN
        RETURN;
    END IF;
    SELECT coalesce(jsonb_object_agg(l.id::text, l.max - coalesce(held.units, 0)), '{}')
      INTO _free
      FROM teams_namedlimit l
      LEFT JOIN LATERAL (
          SELECT sum(s.limit_units[array_position(s.limit_ids, l.id)]) AS units
            FROM executions_stepexecution s
           WHERE s.status = 'running' AND s.limit_ids @> ARRAY[l.id]) held ON true
     WHERE l.id = ANY(_locked) AND l.max > 0;
    _limited := ARRAY(SELECT jsonb_object_keys(_free)::bigint);
    -- Every locked limit has a max and no rate is locked: a step fits only where units are free.
    _bounded := cardinality(_rates_locked) = 0 AND cardinality(_limited) = cardinality(_locked);
    -- No unit free in any of them (each has a max) and no rate: no step fits. Returning here
    -- skips the ordering of every waiting step below, which a claimer woken while the limits are
    -- full would otherwise pay under their locks, holding up the claim of a unit just freed.
    IF _bounded AND NOT EXISTS (SELECT 1 FROM jsonb_each_text(_free) f WHERE f.value::int > 0)
    THEN
        RETURN;
    END IF;
    SELECT coalesce(jsonb_object_agg(held.team_id::text, held.units), '{}')
      INTO _team_units
      FROM (SELECT r.team_id, sum(h.units) AS units
              FROM executions_stepexecution s
              JOIN executions_execution r ON r.id = s.execution_id
             CROSS JOIN LATERAL unnest(s.limit_ids, s.limit_units) AS h(id, units)
             WHERE s.status = 'running' AND s.limit_ids && _locked AND h.id = ANY(_locked)
             GROUP BY r.team_id) held;
    -- The waiting steps in claim order, in two phases that read them in that one order. A claim
    -- takes at most _depth steps: _room, or when every locked limit has a max and no rate is
    -- locked, the units free in all of them (each step takes at least one). So the first
    -- phase reads each team's first _depth steps (by index probes, step_waiting_order); only
    -- when steps it read did not fit and it ran out does the second read the rest, every
    -- other waiting step, ranked as the whole backlog is. Each team with rows there had
    -- _depth in the first, so their ranks there are all _depth lower and the order of the two
    -- together is the backlog's (docs/performance.md, Step-scope hand-off). A step arriving
    -- between the phases is ranked in the second.
    -- Each waiting step's execution is read by its key, one probe of the primary key per step:
    -- OFFSET 0 keeps the planner from flattening it into a join, and its status is checked
    -- outside, so that no partial index of running executions can serve it. Misled by
    -- statistics older than the backlog, the planner ran either as a loop over every running
    -- execution per waiting step (quadratic: seconds per claim with a thousand steps waiting,
    -- every hand-off that late; figure 10 at 0.58 of its ideal after figure 8's rows).
    _depth := CASE WHEN _bounded
                   THEN least(_room, (SELECT sum(greatest(f.value::int, 0))
                                      FROM jsonb_each_text(_free) f))
                   ELSE _room END;
    <<phases>>
    FOR _phase IN 1 .. 2 LOOP
        OPEN _steps FOR  -- the second phase without a LIMIT
        WITH RECURSIVE teams(team_id) AS (
            (SELECT w.team_id FROM executions_stepexecution w WHERE w.status = 'waiting'
              ORDER BY w.team_id LIMIT 1)
          UNION ALL
            SELECT (SELECT w.team_id FROM executions_stepexecution w
                     WHERE w.status = 'waiting' AND w.team_id > teams.team_id
                     ORDER BY w.team_id LIMIT 1)
              FROM teams WHERE teams.team_id IS NOT NULL
        )
        SELECT c.id, c.limit_ids, c.limit_units, c.rate_id, c.rate_units, c.rate_key
          FROM teams CROSS JOIN LATERAL (
               SELECT w.id, w.team_id, w.priority, w.limit_ids, w.limit_units, w.rate_id,
                      w.rate_units, w.rate_key
                 FROM executions_stepexecution w
                CROSS JOIN LATERAL (SELECT r.status FROM executions_execution r
                                     WHERE r.id = w.execution_id OFFSET 0) e
                WHERE w.team_id = teams.team_id AND w.status = 'waiting'
                  AND e.status = 'running' AND w.limit_ids <@ _locked
                  AND (w.rate_id IS NULL OR w.rate_id = ANY(_rates_locked))
                  AND (w.not_before IS NULL OR w.not_before <= now())
                  AND w.id <> ALL(_read)
                ORDER BY w.priority DESC, w.id
                LIMIT CASE WHEN _phase = 1 THEN _depth END) c
         ORDER BY row_number() OVER (PARTITION BY c.team_id ORDER BY c.priority DESC, c.id),
                  coalesce((_team_units ->> c.team_id::text)::bigint, 0), c.priority DESC,
                  c.id;
        LOOP
            FETCH _steps INTO _step;
            EXIT WHEN NOT FOUND;
            IF _phase = 1 THEN
                _read := _read || _step.id;
            END IF;
            _short := ARRAY(SELECT u.id
                              FROM unnest(_step.limit_ids, _step.limit_units) AS u(id, units)
                             WHERE u.id = ANY(_closed) OR (_free ->> u.id::text)::int < u.units);
            IF cardinality(_short) > 0 THEN
                _closed := _closed || _short;
                -- Every limit closed: no step behind can be claimed.
                _done := _bounded AND _limited <@ _closed;
                EXIT WHEN _done;
                CONTINUE;
            END IF;
            IF _step.rate_id IS NOT NULL THEN
                -- The units claimed in the rate's trailing window (this claim's own included: a
                -- transaction sees its writes), of the step's key when the rate is per key.
                _window := _step.rate_id || ':' || _step.rate_key;
                IF _window = ANY(_closed_rates) THEN
                    CONTINUE;
                END IF;
                SELECT r.max, r.period, r.per_key,
                       (SELECT coalesce(sum(c.rate_units), 0) FROM executions_stepexecution c
                         WHERE c.rate_id = r.id AND (NOT r.per_key OR c.rate_key = _step.rate_key)
                           AND c.started_at > now() - r.period) AS used
                  INTO _rate
                  FROM teams_namedrate r WHERE r.id = _step.rate_id;
                IF _rate.used + _step.rate_units > _rate.max THEN
                    _closed_rates := _closed_rates || _window;
                    CONTINUE;
                END IF;
            END IF;
            RETURN QUERY
            UPDATE executions_stepexecution s
               SET status = 'running', lease_owner = _owner, started_at = now(),
                   lease_expires_at = now() + make_interval(secs => _lease)
              FROM executions_execution e
             WHERE s.id = _step.id AND s.status = 'waiting' AND e.id = s.execution_id
            RETURNING s.id, s.attempt::int, s.name::text, s.fanout_index::int, s.execution_id,
                      e.version_id, e.started_at;
            IF FOUND THEN
                FOR _i IN 1 .. cardinality(_step.limit_ids) LOOP
                    IF _free ? _step.limit_ids[_i]::text THEN
                        _free := jsonb_set(_free, ARRAY[_step.limit_ids[_i]::text],
                            to_jsonb((_free ->> _step.limit_ids[_i]::text)::int
                                     - _step.limit_units[_i]));
                    END IF;
                END LOOP;
                _room := _room - 1;
                -- No room left, or no unit left in any limit: no step behind can be claimed.
                _done := _room = 0 OR _bounded AND NOT EXISTS (
                    SELECT 1 FROM jsonb_each_text(_free) f WHERE f.value::int > 0);
                EXIT WHEN _done;
            END IF;
        END LOOP;
        CLOSE _steps;
        EXIT phases WHEN _done;
    END LOOP;
END
$claim$;
