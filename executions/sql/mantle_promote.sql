-- mantle_promote: one team's promotion, queued -> pending, as far as its free team, named
-- limit, workflow and key slots and its rate windows allow; then what still blocks each of its
-- queued executions (blocked_by). Called by services/promotion.py after every terminal commit,
-- when a limit is raised, from the engine clock, from a resume and from the backup poller.
-- Installed from this file (docs/architecture.md, The data room).
--
-- The room of every limit is read from mantle_room.sql, as admission reads it: the rules are
-- written once (docs/architecture.md, Where the rules live). Within a workflow its keys
-- round-robin (mantle_fair_heads.sql); across the team's workflows the higher priority, then
-- the older, first; each execution takes a free slot of every named limit it holds (one that
-- finds one full is passed over: one of another workflow may still fit). A paused team, workflow
-- or named limit has no free slot (docs/operations.md, Pausing during an incident).
--
-- Locks, as admission takes them (docs/architecture.md, Lock order): the team's (with
-- lock_timeout), then the named limits its queue holds in name order, then its queued workflows
-- in id order; a workflow's lock covers its keys (admission takes a key's after its
-- workflow's). Every state below is read after them: each statement of a VOLATILE function
-- takes a fresh snapshot in READ COMMITTED, so it sees every commit made before they were
-- granted, and slot holders can only leave until this transaction ends. No execution joins the
-- queue meanwhile (admission takes the team's lock first); one may leave it (a cancel), which
-- the promote statement checks again (status = 'queued').

CREATE OR REPLACE FUNCTION mantle_promote(
    _team_id bigint, _default_team_limit int, _team_namespace int, _limit_namespace int,
    _workflow_namespace int, _lock_timeout text)
RETURNS TABLE(id uuid, workflow_id bigint, workflow_name text, team_slug text,
              waited interval)
LANGUAGE plpgsql VOLATILE
-- Generic plans, made once per connection, as mantle_admit's (docs/performance.md, Admission):
-- with PL/pgSQL's default, every statement here was planned again on every call for its
-- parameters' values, half of a promotion's time.
SET plan_cache_mode = force_generic_plan
AS $promote$
#variable_conflict use_column
DECLARE
    _workflow_ids bigint[];
    -- Beside _workflow_ids: how many distinct sets of named limits its queue holds.
    _workflow_sets int[];
    _limit_ids bigint[];
    -- Beside _limit_ids: each one's free slots (NULL: unlimited), taken as executions are chosen.
    _limit_free bigint[];
    _lock_id bigint;
    _slot int;
    _team_free bigint;
    _team_paused boolean;
    _team_slug text;
    _flow record;
    _room bigint;
    _take bigint;
    _head record;
    _max_priority int;
    _max_created_at timestamptz;
    _max_id uuid;
    -- The candidates of every workflow, each in its fair order, with the largest merge key
    -- (lower priority, then younger, then its id) of its workflow's order up to it.
    _candidates uuid[] := '{}';
    _merge_priorities int[] := '{}';
    _merge_created_at timestamptz[] := '{}';
    _merge_ids uuid[] := '{}';
    _candidate record;
    _fits boolean;
    _chosen uuid[] := '{}';
    _promoted uuid[];
    _team_full boolean;
    _relabel_all boolean := false;
    -- Each queued workflow in turn, with its key limit, for the relabel by keys.
    _relabel_workflow_id bigint;
    _relabel_per_key int;
    -- Its keys to relabel: those that hold all their slots, those that do not, and those with
    -- a queued execution that stored its own key limit (each of their queue judged by its own).
    _full_keys text[];
    _open_keys text[];
    _stored_keys text[];
    _now timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(_team_namespace, _team_id::int)
       FROM (SELECT set_config('lock_timeout', _lock_timeout, true)) AS bounded;
    -- Its workflows with a queue (one probe of execution_key_queue each), each with how many
    -- distinct sets of named limits its queue holds (mantle_queued_limit_sets).
    SELECT array_agg(w.id ORDER BY w.id),
           array_agg(s.sets + (s.sets = 0
                               OR (SELECT true FROM executions_execution q
                                    WHERE q.workflow_id = w.id AND q.status = 'queued'
                                      AND q.named_limits = '{}'
                                    ORDER BY q.concurrency_key LIMIT 1) IS NOT NULL)::int
                     ORDER BY w.id)
      INTO _workflow_ids, _workflow_sets
      FROM workflows_workflowdefinition w
     -- (In execution_key_queue's order: a probe of it, whatever the planner guesses of how
     -- many rows are queued.)
     CROSS JOIN LATERAL (SELECT 1 FROM executions_execution q
                          WHERE q.workflow_id = w.id AND q.status = 'queued'
                          ORDER BY q.concurrency_key LIMIT 1) AS queued
     CROSS JOIN LATERAL (SELECT count(*) AS sets FROM mantle_queued_limit_sets(w.id)) s
     WHERE w.team_id = _team_id;
    IF _workflow_ids IS NULL THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(l.id ORDER BY l.name), '{}') INTO _limit_ids
      FROM teams_namedlimit l
     WHERE l.id IN (SELECT unnest(s.named_limits) FROM unnest(_workflow_ids) AS f(workflow_id)
                     CROSS JOIN LATERAL mantle_queued_limit_sets(f.workflow_id) s);
    FOREACH _lock_id IN ARRAY _limit_ids LOOP
        PERFORM pg_advisory_xact_lock(_limit_namespace, _lock_id::int);
    END LOOP;
    FOREACH _lock_id IN ARRAY _workflow_ids LOOP
        PERFORM pg_advisory_xact_lock(_workflow_namespace, _lock_id::int);
    END LOOP;
    -- The moment of this promotion, once its locks are held: promotions of a team take it in
    -- the order they hold its lock, so promoted_at and the keys' turns follow the order of the
    -- promotions, and rate windows are read when nothing else of the workflow can promote.
    _now := clock_timestamp();

    SELECT coalesce(array_agg(CASE WHEN r.paused THEN 0 ELSE r.free END ORDER BY o.n), '{}')
      INTO _limit_free
      FROM unnest(_limit_ids) WITH ORDINALITY AS o(limit_id, n)
     CROSS JOIN LATERAL mantle_limit_room(o.limit_id) r;
    SELECT r.free, r.paused, t.slug INTO _team_free, _team_paused, _team_slug
      FROM teams_team t CROSS JOIN LATERAL mantle_team_room(t.id, _default_team_limit) r
     WHERE t.id = _team_id;

    FOR _flow IN
        SELECT w.id, v.max_parallel_per_key AS per_key,
               v.rate_max > 0 AND v.rate_per_key AS rate_per_key,
               CASE WHEN r.paused OR _team_paused THEN 0 ELSE r.free END AS free,
               -- A rate not per key bounds the workflow by the room in its window.
               (SELECT rr.room FROM mantle_rate_room(w.id, NULL, _now) rr)
                 AS rate_room,
               r.paused OR v.rate_max > 0 AS timed_or_paused, f.sets,
               -- Its one set when it has one (NULL: none held).
               (SELECT min(q.named_limits) FROM executions_execution q
                 WHERE q.workflow_id = w.id AND q.status = 'queued'
                   AND q.named_limits <> '{}') AS held
          FROM unnest(_workflow_ids, _workflow_sets) AS f(workflow_id, sets)
          JOIN workflows_workflowdefinition w ON w.id = f.workflow_id
          JOIN workflows_workflowversion v ON v.id = w.current_version_id
         CROSS JOIN LATERAL mantle_workflow_room(w.id) r
         ORDER BY w.id
    LOOP
        -- How many of its queue in fair order can matter: when its queued executions all hold
        -- the same named limits, the smallest free of them. Exact, not a guess: below, one is
        -- passed over only when one of its limits has no free slot left, and free slots only
        -- fall, so with one set what is taken of a workflow is a prefix of its order no longer
        -- than that; with different sets, one passed over for a limit the next does not hold
        -- does not stop the next, so no prefix is enough.
        _relabel_all := _relabel_all OR _flow.timed_or_paused;
        _room := NULL;
        IF _flow.sets = 1 THEN
            SELECT min(_limit_free[array_position(_limit_ids, h.limit_id)]) INTO _room
              FROM unnest(_flow.held) AS h(limit_id);
        END IF;
        -- least() ignores NULL (unlimited); all NULL: no bound.
        _take := least(_flow.free, _flow.rate_room, _team_free, _room);
        CONTINUE WHEN _take <= 0;
        _max_priority := NULL;
        FOR _head IN SELECT h.head, h.head_priority, h.head_created_at
                       FROM mantle_fair_heads(_flow.id, _flow.per_key, true, _take::int,
                                              _flow.rate_per_key, _now) h
                      ORDER BY h.head_rank
        LOOP
            IF _max_priority IS NULL
               OR (-_head.head_priority, _head.head_created_at, _head.head)
                  > (_max_priority, _max_created_at, _max_id) THEN
                _max_priority := -_head.head_priority;
                _max_created_at := _head.head_created_at;
                _max_id := _head.head;
            END IF;
            _candidates := _candidates || _head.head;
            _merge_priorities := _merge_priorities || _max_priority;
            _merge_created_at := _merge_created_at || _max_created_at;
            _merge_ids := _merge_ids || _max_id;
        END LOOP;
    END LOOP;

    -- The workflows' orders merged as a merge of sorted lists takes them: repeatedly the
    -- smallest head (higher priority, then older, then id) of any workflow, each keeping its
    -- fair order. That is the order of the largest merge key so far within each workflow (a
    -- workflow's candidates after its largest key so far follow it at once: every other
    -- workflow's head is larger), its fair order among equals. At most the team's free slots.
    FOR _candidate IN
        SELECT c.id, e.named_limits
          FROM unnest(_candidates, _merge_priorities, _merge_created_at, _merge_ids)
               WITH ORDINALITY AS c(id, merge_priority, merge_created_at, merge_id, n)
          JOIN executions_execution e ON e.id = c.id
         ORDER BY c.merge_priority, c.merge_created_at, c.merge_id, c.n
    LOOP
        EXIT WHEN cardinality(_chosen) >= _team_free;
        _fits := true;
        FOREACH _lock_id IN ARRAY _candidate.named_limits LOOP
            _slot := array_position(_limit_ids, _lock_id);
            IF _limit_free[_slot] <= 0 THEN
                _fits := false;
            END IF;
        END LOOP;
        CONTINUE WHEN NOT _fits;
        FOREACH _lock_id IN ARRAY _candidate.named_limits LOOP
            _slot := array_position(_limit_ids, _lock_id);
            IF _slot IS NOT NULL THEN
                _limit_free[_slot] := _limit_free[_slot] - 1;
            END IF;
        END LOOP;
        _chosen := _chosen || _candidate.id;
    END LOOP;

    -- The chosen ones become pending; their keys' turns (mantle_fair_heads.sql) move to this
    -- promotion, in the same statement: the same moment as their promoted_at.
    WITH promoted AS (
        UPDATE executions_execution
           SET status = 'pending', promoted_at = _now, pending_at = _now, blocked_by = NULL,
               blocked_by_limit = NULL
         WHERE id = ANY(_chosen) AND status = 'queued'
        RETURNING id, workflow_id, concurrency_key
    ), turns AS (
        UPDATE executions_keyturn t SET last_promoted_at = _now
          FROM (SELECT DISTINCT p.workflow_id, p.concurrency_key FROM promoted p) p
         WHERE t.workflow_id = p.workflow_id AND t.concurrency_key = p.concurrency_key
    )
    SELECT coalesce(array_agg(p.id), '{}') INTO _promoted FROM promoted p;
    _team_full := coalesce(_team_free - cardinality(_promoted) <= 0, false);

    -- What blocks the executions still queued, relabelled at a cost proportional to the keys
    -- that hold a slot (docs/performance.md, Keys at scale), not to their queues, when every
    -- label the full relabel below would write is 'key' or 'workflow': the team is not full nor
    -- paused, no queued workflow is paused or has a rate, its queue holds no named limit, and
    -- none of it is labelled otherwise (a debounce, a pause, ...; execution_queue_labelled).
    -- Each then is 'key' exactly when its key holds all its slots, which takes a slot holder of
    -- its key: only the keys with an execution labelled 'key' now (found by a loose index scan
    -- of execution_key_blocked, one probe a key) and the keys holding a slot can change; every
    -- other one is labelled 'workflow' and stays so. Such a key is judged once, by its room
    -- under its workflow's key limit, and only its executions labelled otherwise are read and
    -- written (execution_key_blocked, execution_workflow_blocked: one probe when none is); a
    -- key with a queued execution that stored its own key limit has each of its queue judged
    -- under its own. The same labels as the full relabel, from the same reads.
    _relabel_all := _relabel_all OR _team_full OR _team_paused OR _limit_ids <> '{}'
        OR EXISTS (SELECT 1 FROM executions_execution q
                    WHERE q.team_id = _team_id AND q.status = 'queued'
                      AND q.blocked_by IN ('team', 'limit', 'rate', 'debounce', 'paused'));
    IF NOT _relabel_all THEN
        FOR _relabel_workflow_id, _relabel_per_key IN
            SELECT w.id, v.max_parallel_per_key
              FROM unnest(_workflow_ids) AS f(workflow_id)
              JOIN workflows_workflowdefinition w ON w.id = f.workflow_id
              JOIN workflows_workflowversion v ON v.id = w.current_version_id
             ORDER BY w.id
        LOOP
            WITH RECURSIVE labelled(key) AS (
                (SELECT q.concurrency_key FROM executions_execution q
                  WHERE q.workflow_id = _relabel_workflow_id AND q.status = 'queued'
                    AND q.blocked_by = 'key'
                  ORDER BY q.concurrency_key LIMIT 1)
                UNION ALL
                SELECT (SELECT q.concurrency_key FROM executions_execution q
                         WHERE q.workflow_id = _relabel_workflow_id AND q.status = 'queued'
                           AND q.blocked_by = 'key' AND q.concurrency_key > l.key
                         ORDER BY q.concurrency_key LIMIT 1)
                  FROM labelled l WHERE l.key IS NOT NULL
            ), keys AS MATERIALIZED (
                SELECT l.key FROM labelled l WHERE l.key IS NOT NULL
                UNION
                SELECT h.concurrency_key FROM mantle_holding_keys(_team_id) h
                 WHERE h.workflow_id = _relabel_workflow_id
            ), judged AS (
                SELECT k.key, s.stored, coalesce(r.free = 0, false) AS full
                  FROM keys k
                 CROSS JOIN LATERAL (
                        SELECT EXISTS (SELECT 1 FROM executions_execution q
                                        WHERE q.workflow_id = _relabel_workflow_id
                                          AND q.concurrency_key = k.key AND q.status = 'queued'
                                          AND q.key_limit IS NOT NULL) AS stored) s
                 CROSS JOIN LATERAL mantle_key_room(_relabel_workflow_id, k.key,
                                                    _relabel_per_key) r
            )
            SELECT coalesce(array_agg(j.key) FILTER (WHERE j.full AND NOT j.stored), '{}'),
                   coalesce(array_agg(j.key) FILTER (WHERE NOT j.full AND NOT j.stored), '{}'),
                   coalesce(array_agg(j.key) FILTER (WHERE j.stored), '{}')
              INTO _full_keys, _open_keys, _stored_keys
              FROM judged j;
            -- (By key in an array, not joined: one probe of the index a key, whatever the
            -- planner guesses of how many executions a key has.)
            UPDATE executions_execution e SET blocked_by = 'key'
             WHERE e.workflow_id = _relabel_workflow_id
               AND e.concurrency_key = ANY(_full_keys) AND e.status = 'queued'
               AND e.blocked_by = 'workflow';
            UPDATE executions_execution e SET blocked_by = 'workflow'
             WHERE e.workflow_id = _relabel_workflow_id
               AND e.concurrency_key = ANY(_open_keys) AND e.status = 'queued'
               AND e.blocked_by = 'key';
            CONTINUE WHEN _stored_keys = '{}';
            UPDATE executions_execution e SET blocked_by = s.label
              FROM (SELECT q.id, q.blocked_by,
                           CASE WHEN r.free = 0 THEN 'key' ELSE 'workflow' END AS label
                      FROM executions_execution q
                     CROSS JOIN LATERAL mantle_key_room(_relabel_workflow_id, q.concurrency_key,
                                                        coalesce(q.key_limit,
                                                                 _relabel_per_key)) r
                     WHERE q.workflow_id = _relabel_workflow_id
                       AND q.concurrency_key = ANY(_stored_keys) AND q.status = 'queued') s
             WHERE e.id = s.id AND s.blocked_by IS DISTINCT FROM s.label;
        END LOOP;
    ELSE
        -- Else, what blocks each execution still queued: its debounce while it lasts
        -- (not_before cleared once it has passed: by now(), the transaction's time, as
        -- mantle_fair_heads judged it, so none is cleared that was not yet due when the heads
        -- were chosen); else a pause (its team's or workflow's, or its first paused named limit
        -- by name: blocked_by_limit); else the team when it is full; else the first (by name) of
        -- their named limits that is full; else their key when it holds all its slots (the
        -- queued one's stored key_limit, else max_parallel_per_key of its workflow's current
        -- version); else their rate window when it is full; else their workflow.
        -- A label depends on an execution only through its class (workflow, key, named limits,
        -- stored key limit, debounce lasting): decided once a class, then joined to each queued
        -- execution (hash joins: key limits compared through coalesce); only changes written.
        -- The sets are MATERIALIZED: inlined, the planner re-ran them for every queued row.
        WITH classes AS MATERIALIZED (
            SELECT DISTINCT q.workflow_id, q.concurrency_key, q.named_limits, q.key_limit,
                   coalesce(q.not_before > now(), false) AS debounced
              FROM executions_execution q
             WHERE q.team_id = _team_id AND q.status = 'queued'
        ), full_limits AS MATERIALIZED (
            SELECT l.id, l.name
              FROM teams_namedlimit l CROSS JOIN LATERAL mantle_limit_room(l.id) r
             WHERE l.team_id = _team_id AND r.free = 0
        ), full_rates AS MATERIALIZED (
            -- The (workflow, key) pairs of the queue whose rate window is full (the workflow's
            -- window when its rate is not per key).
            SELECT k.workflow_id, k.concurrency_key
              FROM (SELECT DISTINCT c.workflow_id, c.concurrency_key FROM classes c) k
             CROSS JOIN LATERAL mantle_rate_room(k.workflow_id, k.concurrency_key,
                                                 _now) r
             WHERE r.room = 0
        ), full_keys AS MATERIALIZED (
            -- The keys of the queue that hold all their slots, under each key limit a queued
            -- execution of theirs is judged by (its stored key_limit, else max_parallel_per_key of
            -- its workflow's current version).
            SELECT k.workflow_id, k.concurrency_key, k.key_limit
              FROM (SELECT DISTINCT c.workflow_id, c.concurrency_key,
                           coalesce(c.key_limit, v.max_parallel_per_key) AS key_limit
                      FROM classes c
                      JOIN workflows_workflowdefinition w ON w.id = c.workflow_id
                      JOIN workflows_workflowversion v ON v.id = w.current_version_id) k
             CROSS JOIN LATERAL mantle_key_room(k.workflow_id, k.concurrency_key, k.key_limit) r
             WHERE r.free = 0
        ), paused AS MATERIALIZED (
            SELECT w.id AS workflow_id, v.max_parallel_per_key AS per_key,
                   w.paused_at IS NOT NULL OR t.paused_at IS NOT NULL AS paused,
                   (SELECT coalesce(array_agg(l.id ORDER BY l.name), '{}') FROM teams_namedlimit l
                     WHERE l.team_id = t.id AND l.paused_at IS NOT NULL) AS limit_ids
              FROM workflows_workflowdefinition w
              JOIN workflows_workflowversion v ON v.id = w.current_version_id
              JOIN teams_team t ON t.id = w.team_id
             WHERE t.id = _team_id
        ), labels AS MATERIALIZED (
            SELECT c.workflow_id, c.concurrency_key, c.named_limits,
                   coalesce(c.key_limit, -1) AS key_limit, c.debounced,
                   CASE WHEN c.debounced THEN 'debounce'
                        WHEN p.paused OR pl.name IS NOT NULL THEN 'paused'
                        WHEN _team_full THEN 'team'
                        WHEN l.name IS NOT NULL THEN 'limit'
                        WHEN f.workflow_id IS NOT NULL THEN 'key'
                        WHEN r.workflow_id IS NOT NULL THEN 'rate'
                        ELSE 'workflow' END AS blocked_by,
                   CASE WHEN c.debounced OR p.paused THEN NULL
                        WHEN pl.name IS NOT NULL THEN pl.name
                        WHEN NOT _team_full THEN l.name END AS blocked_by_limit
              FROM classes c
              JOIN paused p ON p.workflow_id = c.workflow_id
              LEFT JOIN LATERAL (SELECT n.name FROM teams_namedlimit n
                                  WHERE n.id = ANY(c.named_limits) AND n.id = ANY(p.limit_ids)
                                  ORDER BY n.name LIMIT 1) pl ON true
              LEFT JOIN full_keys f
                ON f.workflow_id = c.workflow_id AND f.concurrency_key = c.concurrency_key
               AND f.key_limit = coalesce(c.key_limit, p.per_key)
              LEFT JOIN full_rates r
                ON r.workflow_id = c.workflow_id AND r.concurrency_key = c.concurrency_key
              LEFT JOIN LATERAL (SELECT fl.name FROM full_limits fl
                                  WHERE fl.id = ANY(c.named_limits)
                                  ORDER BY fl.name LIMIT 1) l ON true
        )
        UPDATE executions_execution e
           SET blocked_by = labels.blocked_by, blocked_by_limit = labels.blocked_by_limit,
               not_before = CASE WHEN labels.debounced THEN e.not_before END
          FROM labels
         WHERE e.team_id = _team_id AND e.status = 'queued'
           AND e.workflow_id = labels.workflow_id AND e.concurrency_key = labels.concurrency_key
           AND e.named_limits = labels.named_limits
           AND coalesce(e.key_limit, -1) = labels.key_limit
           AND coalesce(e.not_before > now(), false) = labels.debounced
           AND (e.blocked_by IS DISTINCT FROM labels.blocked_by
                OR e.blocked_by_limit IS DISTINCT FROM labels.blocked_by_limit
                OR (NOT labels.debounced AND e.not_before IS NOT NULL));
    END IF;

    RETURN QUERY
        SELECT e.id, e.workflow_id, w.name::text, _team_slug::text, e.promoted_at - e.queued_at
          FROM unnest(_promoted) AS p(id)
          JOIN executions_execution e ON e.id = p.id
          JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
          JOIN unnest(_chosen) WITH ORDINALITY AS c(id, n) ON c.id = p.id
         ORDER BY c.n;
END
$promote$
