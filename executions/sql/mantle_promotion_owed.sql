-- mantle_promotion_owed: whether a terminal commit of the team owes it a promotion, decided
-- without taking the team's lock (services/promotion.py, queue_promote_after_terminal; docs/
-- architecture.md, Promotion). Installed with the others (docs/architecture.md, The data
-- room). False only when no execution of the team is queued, nor can be about to be by
-- an admission that counted the finished execution as a slot holder:
--   - such an admission read its state under the team's lock before the finish committed, and
--     holds that lock until its own commit (mantle_admit);
--   - this function runs after the finish's commit. Its first statement sees no granted hold of
--     the team's lock, so every admission that read before that moment has committed; its
--     second statement, with a snapshot taken after the first (each statement of a VOLATILE
--     function takes its own in READ COMMITTED), sees their queued rows.
-- An admission granted the lock after the first statement reads after the finish's commit: it
-- never counts the finished execution, so whatever it queues is not owed to this finish (the
-- promotion of its own blocker is). A waiting request is not a hold (only `granted` counts).
-- When the lock is held the answer is true: the caller waits for the lock as before.

CREATE OR REPLACE FUNCTION mantle_promotion_owed(_team_id bigint, _team_namespace int)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
-- Generic plans, made once per connection, as mantle_promote's.
SET plan_cache_mode = force_generic_plan
AS $owed$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted
                  AND l.database = (SELECT d.oid FROM pg_database d
                                     WHERE d.datname = current_database())
                  AND l.classid = _team_namespace::oid AND l.objid = _team_id::oid
                  AND l.objsubid = 2) THEN
        RETURN true;
    END IF;
    RETURN EXISTS (SELECT 1 FROM executions_execution e
                    WHERE e.team_id = _team_id AND e.status = 'queued');
END
$owed$
