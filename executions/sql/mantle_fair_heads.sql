-- mantle_fair_heads: the next _limit queued executions of a workflow in fair promotion order,
-- exactly as mantle_fair_queue (mantle_fair_queue.sql) ranks them, at a cost that does not grow with the
-- number of the workflow's keys (docs/performance.md, Keys at scale). Installed from this
-- file (docs/architecture.md, The data room).
--
-- The first round of fair_queue_heads' order is each key's head, ranked (higher priority, the
-- key promoted least recently, the older head, its id). executions_keyturn holds one row per
-- key with a queue, its `turn`: that tuple as last known, read here in that order from its
-- index. The turn is a fairness cursor, never a slot count: the limits are still decided by
-- counting executions (each key's room and its rate window's, mantle_room.sql, under its head's
-- key limit), here as in mantle_fair_queue. Its drift cannot change a decision, because a turn is never later than its
-- key's true place:
--   - an admission that queues an execution lowers its key's turn to that execution's place
--     when it ranks before it (execution_queued_turn in triggers.sql, in the admission's
--     transaction, under its workflow's lock; a key without a row gets one, its latest promotion read from
--     its rows);
--   - a promotion raises the turns of the keys it promoted to its own time, which is their
--     latest promotion (the promote statement, in the promotion's transaction);
--   - every other change of a queue (a queued execution cancelled, superseded, timed out) only
--     removes executions, which can only move a key's true place later.
-- So, read in turn order, a key whose turn equals its true place (checked below from its rows)
-- ranks before every key not yet read. A pass that meets a key whose turn is early corrects it
-- (it moves later in the index) and the pass is done again: the heads a pass returns are those
-- of a pass that met no correction, each exact and in order. A pass that finds fewer than
-- _limit heads, a limit of NULL (all), or a key whose first execution is waiting out its
-- debounce (its head is then not its first row) answers with mantle_fair_queue itself.
-- A key whose queue is empty loses its row here, under the workflow's lock that every admission
-- takes before it queues: no admission of that key can queue meanwhile.

-- _at: the moment its rate windows are read at (the promotion's, once its locks are held).

CREATE OR REPLACE FUNCTION mantle_fair_heads(
    _workflow_id bigint, _per_key int, _stored_key_limits boolean, _limit int,
    _rate_per_key boolean, _at timestamptz)
RETURNS TABLE(head uuid, head_priority smallint, head_created_at timestamptz,
              head_named_limits bigint[], head_rank bigint)
LANGUAGE plpgsql VOLATILE
-- Generic plans, made once per connection, as mantle_promote's.
SET plan_cache_mode = force_generic_plan
AS $fair$
DECLARE
    _turn record;
    _head record;
    _last timestamptz;
    _stored boolean;
    _free bigint;
    _bound bigint;
    _found uuid[];
    _corrected boolean := true;
    _debouncing boolean := false;
BEGIN
    WHILE _limit IS NOT NULL AND _corrected AND NOT _debouncing LOOP
        _found := '{}';
        _corrected := false;
        FOR _turn IN SELECT t.concurrency_key, t.priority, t.last_promoted_at, t.created_at,
                            t.execution_id
                       FROM executions_keyturn t
                      WHERE t.workflow_id = _workflow_id
                      ORDER BY t.priority DESC, t.last_promoted_at, t.created_at, t.execution_id
        LOOP
            SELECT e.id, e.priority, e.created_at, e.named_limits, e.key_limit, e.not_before
              INTO _head
              FROM executions_execution e
             WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _turn.concurrency_key
               AND e.status = 'queued'
             ORDER BY e.priority DESC, e.created_at, e.id
             LIMIT 1;
            IF NOT FOUND THEN
                DELETE FROM executions_keyturn t
                 WHERE t.workflow_id = _workflow_id
                   AND t.concurrency_key = _turn.concurrency_key;
                CONTINUE;
            END IF;
            IF _head.not_before > now() THEN
                _debouncing := true;
                EXIT;
            END IF;
            SELECT coalesce(greatest(_turn.last_promoted_at, max(e.promoted_at)), '-infinity')
              INTO _last
              FROM executions_execution e
             WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _turn.concurrency_key
               AND e.promoted_at IS NOT NULL;
            IF (_head.priority, _last, _head.created_at, _head.id)
               IS DISTINCT FROM (_turn.priority, _turn.last_promoted_at, _turn.created_at,
                                 _turn.execution_id) THEN
                UPDATE executions_keyturn t
                   SET priority = _head.priority, last_promoted_at = _last,
                       created_at = _head.created_at, execution_id = _head.id
                 WHERE t.workflow_id = _workflow_id
                   AND t.concurrency_key = _turn.concurrency_key;
                _corrected := true;
                CONTINUE;
            END IF;
            -- The key's free slots as mantle_fair_queue counts them: its head is promoted in
            -- the first round when its key has a free slot under the head's own key limit, and
            -- its rate window (per key) room for one.
            _stored := _stored_key_limits AND EXISTS (SELECT 1 FROM executions_execution e
                WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _turn.concurrency_key
                  AND e.status = 'queued' AND e.key_limit IS NOT NULL);
            SELECT r.free INTO _free
              FROM mantle_key_room(_workflow_id, _turn.concurrency_key,
                                   coalesce(CASE WHEN _stored THEN _head.key_limit END,
                                            _per_key)) r;
            _bound := _limit;
            IF _rate_per_key THEN
                _bound := least(_bound, (SELECT r.room
                                           FROM mantle_rate_room(_workflow_id,
                                                                 _turn.concurrency_key,
                                                                 _at) r));
            END IF;
            IF _bound >= 1 AND (_free IS NULL OR _free >= 1) THEN
                _found := _found || _head.id;
                EXIT WHEN cardinality(_found) >= _limit;
            END IF;
        END LOOP;
    END LOOP;
    IF _limit IS NOT NULL AND NOT _debouncing AND cardinality(_found) >= _limit THEN
        RETURN QUERY SELECT e.id, e.priority, e.created_at, e.named_limits, f.rank
                       FROM unnest(_found) WITH ORDINALITY AS f(id, rank)
                       JOIN executions_execution e ON e.id = f.id
                      ORDER BY f.rank;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM mantle_fair_queue(_workflow_id, _per_key, _stored_key_limits,
                                                 _limit, _rate_per_key, _at);
END
$fair$
