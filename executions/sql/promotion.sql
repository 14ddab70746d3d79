-- Promotion (services/promotion.py): queued → pending under the team's lock, then the locks of
-- the named limits its queue holds in name order, then those of its queued workflows in id
-- order, as admission takes them. A workflow's lock covers its keys: admission takes a key's
-- lock only after its workflow's.

-- name: queued_limit_sets
-- The team's queued workflows, each with every distinct set of named limits its queued
-- executions hold (one set unless its `limits` changed while some were queued).
SELECT DISTINCT workflow_id, named_limits FROM executions_execution
 WHERE team_id = %(team_id)s AND status = 'queued'

-- name: named_limits_in_lock_order
SELECT id FROM teams_namedlimit WHERE id = ANY(%(limit_ids)s) ORDER BY name

-- name: named_limits_state
-- Each of the named limits: its max and its slot holders across every workflow (at most its
-- max of them read: only the free slots matter), and whether it is paused (no free slot).
SELECT l.id, l.max,
       (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.named_limits @> ARRAY[l.id] AND e.status IN {slot_holding}
         LIMIT l.max) AS holders),
       l.paused_at IS NOT NULL
  FROM teams_namedlimit l
 WHERE l.id = ANY(%(limit_ids)s)

-- name: promotion_state
-- Per queued workflow of the team: its limit, slot holders and name; with the team's limit and
-- slot holders repeated on each row; then its rate limit and (not per key) the executions that
-- became pending in its window; then whether it or its team is paused (no free slot).
SELECT w.id, w.name, v.max_parallel_executions, v.max_parallel_per_key,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = w.team_id AND e.workflow_id = w.id
           AND e.status IN {slot_holding}),
       t.slug, t.max_concurrent_executions,
       (SELECT count(*) FROM executions_execution e
         WHERE e.team_id = t.id AND e.status IN {slot_holding}),
       v.rate_max, extract(epoch FROM v.rate_period)::float8, v.rate_per_key,
       (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
         WHERE e.workflow_id = w.id AND NOT v.rate_per_key
           AND e.pending_at > statement_timestamp() - v.rate_period
         LIMIT v.rate_max) AS in_window),
       w.paused_at IS NOT NULL OR t.paused_at IS NOT NULL
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
  JOIN teams_team t ON t.id = w.team_id
 WHERE w.id = ANY(%(workflow_ids)s)

-- name: fair_queue_heads
-- The next %(limit)s (NULL: all) queued executions of a workflow in promotion order, each with
-- its rank in that order (from 1; the dashboard numbers the queue by it): its keys
-- round-robin (unkeyed executions share the key ''), each round taking the higher-priority
-- heads first, then the key promoted least recently first (never: before all others; ties: the
-- oldest head first), within a key higher priority first and oldest first among equals, a key at
-- most its free slots (each queued execution's stored key_limit when %(stored_key_limits)s, else
-- %(per_key)s = max_parallel_per_key, 0 = unlimited) and, with a rate per key, what its window
-- has room for. The order is derived from rows, each key's latest promoted_at: no counter. The keys with a queue
-- are found by a loose index scan (one probe of execution_key_queue per key).
WITH RECURSIVE keys(key) AS (
    (SELECT concurrency_key FROM executions_execution
      WHERE workflow_id = %(workflow_id)s AND status = 'queued'
      ORDER BY concurrency_key LIMIT 1)
    UNION ALL
    SELECT (SELECT e.concurrency_key FROM executions_execution e
             WHERE e.workflow_id = %(workflow_id)s AND e.status = 'queued'
               AND e.concurrency_key > keys.key
             ORDER BY e.concurrency_key LIMIT 1)
      FROM keys WHERE keys.key IS NOT NULL
), state AS (
    SELECT k.key,
           k.stored,
           -- Its slot holders, counted only when a limit applies to the key: the workflow's
           -- count, or one a queued execution of the key evaluated.
           CASE WHEN %(per_key)s = 0 AND NOT k.stored THEN 0
                ELSE (SELECT count(*) FROM executions_execution e
                       WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = k.key
                         AND e.status IN {slot_holding}) END AS holders,
           least(%(limit)s,
                 -- A rate per key: what its window has room for (NULL, ignored, otherwise).
                 CASE WHEN %(rate_per_key)s THEN %(rate_max)s - (
                     SELECT count(*) FROM executions_execution e
                      WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = k.key
                        AND e.pending_at > statement_timestamp()
                                           - make_interval(secs => %(rate_period)s)) END)
             AS free,
           -- Never promoted: -infinity. Its key's turn (mantle_fair_heads.sql) remembers it
           -- after retention deleted the rows of its latest promotions.
           (SELECT coalesce(greatest(max(e.promoted_at),
                                     (SELECT t.last_promoted_at FROM executions_keyturn t
                                       WHERE t.workflow_id = %(workflow_id)s
                                         AND t.concurrency_key = k.key)), '-infinity')
              FROM executions_execution e
             WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = k.key
               AND e.promoted_at IS NOT NULL) AS last_promoted
      FROM (SELECT keys.key,
                   -- Whether a queued execution of the key stored its own limit.
                   %(stored_key_limits)s AND EXISTS (SELECT 1 FROM executions_execution e
                    WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = keys.key
                      AND e.status = 'queued' AND e.key_limit IS NOT NULL) AS stored
              FROM keys
             WHERE keys.key IS NOT NULL) k
)
SELECT q.id, q.priority, q.created_at, q.named_limits,
       row_number() OVER (ORDER BY q.round, q.priority DESC, s.last_promoted,
                                   q.created_at, q.id) AS rank
  FROM (SELECT state.*,
               least(state.free, CASE WHEN %(per_key)s > 0 AND NOT state.stored
                                      THEN %(per_key)s - state.holders END) AS bound
          FROM state) s
 CROSS JOIN LATERAL (
        -- The key's heads in order while each fits under its own key limit (its stored value,
        -- else the workflow's count; 0 = unlimited): the holders plus those promoted before it.
        SELECT h.id, h.priority, h.created_at, h.named_limits, h.round
          FROM (SELECT f.*, bool_and(f.fits) OVER (ORDER BY f.round) AS all_fit
                  FROM (SELECT e.id, e.priority, e.created_at, e.named_limits,
                               row_number() OVER w AS round,
                               e.limit_of_key = 0
                               OR s.holders + row_number() OVER w <= e.limit_of_key AS fits
                          FROM (SELECT q.*, coalesce(CASE WHEN %(stored_key_limits)s
                                                          THEN q.key_limit END,
                                                     %(per_key)s) AS limit_of_key
                                  FROM executions_execution q) e
                         WHERE e.workflow_id = %(workflow_id)s AND e.concurrency_key = s.key
                           AND e.status = 'queued'
                           AND (e.not_before IS NULL OR e.not_before <= now())
                        WINDOW w AS (ORDER BY e.priority DESC, e.created_at, e.id)
                         ORDER BY e.priority DESC, e.created_at, e.id
                         -- Read no further than its free slots (the workflow's count's,
                         -- when no queued execution of the key stored its own limit).
                         LIMIT CASE WHEN s.bound < 0 THEN 0 ELSE s.bound END) f) h
         WHERE h.all_fit) q
 ORDER BY rank
 LIMIT %(limit)s

-- name: promotion_owed
-- Whether a terminal commit owes its team a promotion, without its lock
-- (mantle_promotion_owed.sql).
SELECT mantle_promotion_owed(%(team_id)s::bigint, %(team_namespace)s::int)

-- name: fair_heads
-- fair_queue_heads' answer at a cost flat in the number of the workflow's keys, through its
-- keys' turns (mantle_fair_heads.sql).
SELECT * FROM mantle_fair_heads(
    %(workflow_id)s::bigint, %(per_key)s::int, %(stored_key_limits)s::boolean, %(limit)s::int,
    %(rate_per_key)s::boolean, %(rate_max)s::int, %(rate_period)s::float8)

-- name: promote
-- The chosen ones become pending; their keys' turns (mantle_fair_heads.sql) move to this
-- promotion, in the same statement: the same statement_timestamp() as their promoted_at.
WITH promoted AS (
    UPDATE executions_execution
       SET status = 'pending', promoted_at = statement_timestamp(),
           pending_at = statement_timestamp(), blocked_by = NULL, blocked_by_limit = NULL
     WHERE id = ANY(%(ids)s) AND status = 'queued'
    RETURNING id, workflow_id, concurrency_key, promoted_at - queued_at AS waited
), turns AS (
    UPDATE executions_keyturn t SET last_promoted_at = statement_timestamp()
      FROM (SELECT DISTINCT workflow_id, concurrency_key FROM promoted) p
     WHERE t.workflow_id = p.workflow_id AND t.concurrency_key = p.concurrency_key
)
SELECT id, workflow_id, waited FROM promoted

-- name: relabel_queue
-- What blocks the executions still queued: its debounce while it lasts; else a pause (its team's
-- or workflow's, or its first paused named limit by name: blocked_by_limit); (not_before cleared
-- once it has passed: by now(), the transaction's time, as fair_queue_heads judged it, so none
-- is cleared that was not yet due when the heads were chosen); else the team when it is full
-- (%(team_full)s); else the
-- first (by name) of their named limits that is full; else their key when it holds all its
-- slots (the queued one's stored key_limit, else max_parallel_per_key of its workflow's current
-- version); else their rate window when
-- it is full; else their workflow.
-- The three sets are MATERIALIZED: inlined, the planner (which guesses one queued row for a
-- team) re-ran them for every queued row, O(queue²): 420 ms with 1,000 queued, 17 ms once each.
WITH full_limits AS MATERIALIZED (
    SELECT l.id, l.name
      FROM teams_namedlimit l
     WHERE l.team_id = %(team_id)s AND l.max > 0
       AND (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
             WHERE e.named_limits @> ARRAY[l.id] AND e.status IN {slot_holding}
             LIMIT l.max) AS holders) >= l.max
), full_rates AS MATERIALIZED (
    -- The (workflow, key) pairs of the queue whose rate window is full (the workflow's window
    -- when its rate is not per key).
    SELECT k.workflow_id, k.concurrency_key
      FROM (SELECT DISTINCT q.workflow_id, q.concurrency_key FROM executions_execution q
             WHERE q.team_id = %(team_id)s AND q.status = 'queued') k
      JOIN workflows_workflowdefinition w ON w.id = k.workflow_id
      JOIN workflows_workflowversion v ON v.id = w.current_version_id
     WHERE v.rate_max > 0
       AND (SELECT count(*) FROM (SELECT 1 FROM executions_execution e
             WHERE e.workflow_id = k.workflow_id
               AND (NOT v.rate_per_key OR e.concurrency_key = k.concurrency_key)
               AND e.pending_at > statement_timestamp() - v.rate_period
             LIMIT v.rate_max) AS in_window) >= v.rate_max
), key_holders AS MATERIALIZED (
    -- The slot holders of each key of the team, with its workflow's count.
    SELECT e.workflow_id, e.concurrency_key, v.max_parallel_per_key AS per_key,
           count(*) AS holders
      FROM executions_execution e
      JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
      JOIN workflows_workflowversion v ON v.id = w.current_version_id
     WHERE e.team_id = %(team_id)s AND e.status IN {slot_holding}
     GROUP BY e.workflow_id, e.concurrency_key, v.max_parallel_per_key
), paused AS MATERIALIZED (
    SELECT w.id AS workflow_id,
           w.paused_at IS NOT NULL OR t.paused_at IS NOT NULL AS paused,
           (SELECT coalesce(array_agg(l.id ORDER BY l.name), '{}') FROM teams_namedlimit l
             WHERE l.team_id = t.id AND l.paused_at IS NOT NULL) AS limit_ids
      FROM workflows_workflowdefinition w JOIN teams_team t ON t.id = w.team_id
     WHERE t.id = %(team_id)s
), labels AS (
    SELECT q.id,
           CASE WHEN q.not_before > now() THEN 'debounce'
                WHEN p.paused OR pl.name IS NOT NULL THEN 'paused'
                WHEN %(team_full)s THEN 'team'
                WHEN l.name IS NOT NULL THEN 'limit'
                WHEN coalesce(q.key_limit, f.per_key) > 0
                     AND f.holders >= coalesce(q.key_limit, f.per_key) THEN 'key'
                WHEN r.workflow_id IS NOT NULL THEN 'rate'
                ELSE 'workflow' END AS blocked_by,
           CASE WHEN q.not_before > now() OR p.paused THEN NULL
                WHEN pl.name IS NOT NULL THEN pl.name
                WHEN NOT %(team_full)s THEN l.name END AS blocked_by_limit,
           CASE WHEN q.not_before > now() THEN q.not_before END AS not_before
      FROM executions_execution q
      JOIN paused p ON p.workflow_id = q.workflow_id
      LEFT JOIN LATERAL (SELECT n.name FROM teams_namedlimit n
                          WHERE n.id = ANY(q.named_limits) AND n.id = ANY(p.limit_ids)
                          ORDER BY n.name LIMIT 1) pl ON true
      LEFT JOIN key_holders f
        ON f.workflow_id = q.workflow_id AND f.concurrency_key = q.concurrency_key
      LEFT JOIN full_rates r
        ON r.workflow_id = q.workflow_id AND r.concurrency_key = q.concurrency_key
      LEFT JOIN LATERAL (SELECT fl.name FROM full_limits fl
                          WHERE fl.id = ANY(q.named_limits)
                          ORDER BY fl.name LIMIT 1) l ON true
     WHERE q.team_id = %(team_id)s AND q.status = 'queued'
)
UPDATE executions_execution e
   SET blocked_by = labels.blocked_by, blocked_by_limit = labels.blocked_by_limit,
       not_before = labels.not_before
  FROM labels
 WHERE e.id = labels.id
   AND (e.blocked_by IS DISTINCT FROM labels.blocked_by
        OR e.blocked_by_limit IS DISTINCT FROM labels.blocked_by_limit
        OR e.not_before IS DISTINCT FROM labels.not_before)

-- name: teams_with_queue
SELECT DISTINCT team_id FROM executions_execution WHERE status = 'queued'

-- name: teams_waiting_for_time
-- The teams with a queue in a workflow that has a rate limit (one probe of execution_key_queue
-- per such workflow; not by blocked_by: a label written a moment before the window moved may
-- say "workflow" of one that waits for its window), and those with a debounced execution now
-- due (promotion's relabel clears not_before once due).
SELECT w.team_id
  FROM workflows_workflowdefinition w
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE v.rate_max > 0
   AND EXISTS (SELECT 1 FROM executions_execution e
                WHERE e.workflow_id = w.id AND e.status = 'queued')
UNION
SELECT e.team_id FROM executions_execution e
 WHERE e.status = 'queued' AND e.not_before <= now()
