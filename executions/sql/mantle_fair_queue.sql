-- mantle_fair_queue: the next _limit (NULL: all) queued executions of a workflow in promotion
-- order, each with its rank in that order (from 1; the dashboard numbers the queue by it).
-- Installed from this file (docs/architecture.md, The data room); promotion reads it through
-- mantle_fair_heads (mantle_fair_heads.sql), which answers the same at a cost flat in the number
-- of keys, and falls back to this full ranking.
--
-- The order: its keys round-robin (unkeyed executions share the key ''), each round taking the
-- higher-priority heads first, then the key promoted least recently first (never: before all
-- others; ties: the oldest head first), within a key higher priority first and oldest first
-- among equals, a key at most its free slots (each queued execution's stored key_limit when
-- _stored_key_limits, else _per_key = max_parallel_per_key, 0 = unlimited) and, with a rate per
-- key, what its window has room for (mantle_room.sql). The order is derived from rows, each
-- key's latest promoted_at: no counter. The keys with a queue are found by a loose index scan
-- (one probe of execution_key_queue per key). _at: the moment rate windows are read at. LANGUAGE
-- sql and STABLE: inlined into the statement that calls it.

CREATE OR REPLACE FUNCTION mantle_fair_queue(
    _workflow_id bigint, _per_key int, _stored_key_limits boolean, _limit int,
    _rate_per_key boolean, _at timestamptz)
RETURNS TABLE(id uuid, priority smallint, created_at timestamptz, named_limits bigint[],
              rank bigint)
LANGUAGE sql STABLE
AS $fair_queue$
WITH RECURSIVE keys(key) AS (
    (SELECT concurrency_key FROM executions_execution
      WHERE workflow_id = _workflow_id AND status = 'queued'
      ORDER BY concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT e.concurrency_key FROM executions_execution e
             WHERE e.workflow_id = _workflow_id AND e.status = 'queued'
               AND e.concurrency_key > keys.key
             ORDER BY e.concurrency_key LIMIT 1)
      FROM keys WHERE keys.key IS NOT NULL
), state AS (
    SELECT k.key,
           k.stored,
           -- Its free slots under the workflow's count (NULL: none applies), when no queued
           -- execution of the key stored its own limit (each is then judged by its own below).
           CASE WHEN _per_key > 0 AND NOT k.stored THEN (
               SELECT r.free FROM mantle_key_room(_workflow_id, k.key, _per_key) r) END
             AS key_free,
           least(_limit,
                 -- A rate per key: what its window has room for (NULL, ignored, otherwise).
                 CASE WHEN _rate_per_key THEN (
                     SELECT r.room FROM mantle_rate_room(_workflow_id, k.key, _at) r) END)
             AS free,
           -- Never promoted: -infinity. Its key's turn (mantle_fair_heads.sql) remembers it
           -- after retention deleted the rows of its latest promotions.
           (SELECT coalesce(greatest(max(e.promoted_at),
                                     (SELECT t.last_promoted_at FROM executions_keyturn t
                                       WHERE t.workflow_id = _workflow_id
                                         AND t.concurrency_key = k.key)), '-infinity')
              FROM executions_execution e
             WHERE e.workflow_id = _workflow_id AND e.concurrency_key = k.key
               AND e.promoted_at IS NOT NULL) AS last_promoted
      FROM (SELECT keys.key,
                   -- Whether a queued execution of the key stored its own limit.
                   _stored_key_limits AND EXISTS (SELECT 1 FROM executions_execution e
                    WHERE e.workflow_id = _workflow_id AND e.concurrency_key = keys.key
                      AND e.status = 'queued' AND e.key_limit IS NOT NULL) AS stored
              FROM keys
             WHERE keys.key IS NOT NULL) k
)
SELECT q.id, q.priority, q.created_at, q.named_limits,
       row_number() OVER (ORDER BY q.round, q.priority DESC, s.last_promoted,
                                   q.created_at, q.id) AS rank
  FROM (SELECT state.*,
               least(state.free, state.key_free) AS bound
          FROM state) s
 CROSS JOIN LATERAL (
        -- The key's heads in order while each fits under its own key limit (its stored value,
        -- else the workflow's count; 0 = unlimited): those promoted before it within the key's
        -- free slots.
        SELECT h.id, h.priority, h.created_at, h.named_limits, h.round
          FROM (SELECT f.*, bool_and(f.fits) OVER (ORDER BY f.round) AS all_fit
                  FROM (SELECT e.id, e.priority, e.created_at, e.named_limits,
                               row_number() OVER w AS round,
                               e.limit_of_key = 0
                               OR row_number() OVER w <= CASE
                                   WHEN s.stored THEN (SELECT r.free
                                                         FROM mantle_key_room(_workflow_id, s.key,
                                                                              e.limit_of_key) r)
                                   ELSE s.key_free END AS fits
                          FROM (SELECT q.*, coalesce(CASE WHEN _stored_key_limits
                                                          THEN q.key_limit END,
                                                     _per_key) AS limit_of_key
                                  FROM executions_execution q) e
                         WHERE e.workflow_id = _workflow_id AND e.concurrency_key = s.key
                           AND e.status = 'queued'
                           AND (e.not_before IS NULL OR e.not_before <= now())
                        WINDOW w AS (ORDER BY e.priority DESC, e.created_at, e.id)
                         ORDER BY e.priority DESC, e.created_at, e.id
                         -- Read no further than its free slots (the workflow's count's,
                         -- when no queued execution of the key stored its own limit).
                         LIMIT CASE WHEN s.bound < 0 THEN 0 ELSE s.bound END) f) h
         WHERE h.all_fit) q
 ORDER BY rank
 LIMIT _limit
$fair_queue$
