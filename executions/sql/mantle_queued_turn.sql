-- mantle_queued_turn: the trigger function that keeps fair promotion's cursor no later than the
-- truth when an execution is queued (mantle_fair_heads.sql says why that is all it needs).
-- Installed with the others (docs/architecture.md, The data room), with its trigger
-- on executions_execution: after an insert or a status update that leaves a row queued, in that
-- statement's transaction (an admission's, under its workflow's lock).
--
-- The key's turn becomes the queued execution's place when that ranks before it (higher
-- priority, or as high and older); the key's latest promotion is kept (a new row reads it from
-- the key's promoted rows: one probe of execution_key_promoted).

CREATE OR REPLACE FUNCTION mantle_queued_turn() RETURNS trigger
LANGUAGE plpgsql VOLATILE
-- Generic plans, made once per connection, as mantle_admit's (whose queued admissions fire it).
SET plan_cache_mode = force_generic_plan
AS $turn$
BEGIN
    -- Almost always the newcomer is the youngest of its key's queue: its turn already ranks at
    -- or before it, and one probe of the turn's key says so (every writer of a turn holds the
    -- workflow's lock, as this admission does: the turn read cannot change before its commit).
    -- Without it, every queued admission paid the insert's conflict path and the read of the
    -- key's latest promotion (about 0.18 ms of a 1.6 ms queued admission; figure 9).
    PERFORM 1 FROM executions_keyturn t
     WHERE t.workflow_id = NEW.workflow_id AND t.concurrency_key = NEW.concurrency_key
       AND (-t.priority, t.created_at, t.execution_id) <= (-NEW.priority, NEW.created_at, NEW.id);
    IF FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO executions_keyturn AS t
           (workflow_id, concurrency_key, priority, last_promoted_at, created_at, execution_id)
    VALUES (NEW.workflow_id, NEW.concurrency_key, NEW.priority,
            (SELECT coalesce(max(e.promoted_at), '-infinity') FROM executions_execution e
              WHERE e.workflow_id = NEW.workflow_id AND e.concurrency_key = NEW.concurrency_key
                AND e.promoted_at IS NOT NULL),
            NEW.created_at, NEW.id)
    ON CONFLICT (workflow_id, concurrency_key) DO UPDATE
       SET priority = EXCLUDED.priority, created_at = EXCLUDED.created_at,
           execution_id = EXCLUDED.execution_id
     WHERE (-EXCLUDED.priority, EXCLUDED.created_at, EXCLUDED.execution_id)
           < (-t.priority, t.created_at, t.execution_id);
    RETURN NULL;
END
$turn$
