-- The triggers of the executions' tables, written whole and safe to run again (every statement
-- replaces what it creates). Installed by the executions app's migrations with the functions
-- mantle_admit.sql and mantle_claim_limited.sql (docs/architecture.md, The data room).

-- The work channel (executions.sql.WORK_CHANNEL): every row that becomes pending or waiting, by
-- whatever path (admission, promotion, the orchestrator, a retry), a limited step's units freed
-- and a named limit raised are announced at commit, and the step workers LISTEN on it.
-- mantle_admit announces its own pending rows after its commit itself and marks them in the
-- setting mantle.admitted, so that the trigger does not announce them twice.
CREATE OR REPLACE FUNCTION mantle_notify_work() RETURNS trigger LANGUAGE plpgsql AS $notify$
BEGIN
    PERFORM pg_notify('mantle_work', '');
    RETURN NULL;
END
$notify$;

CREATE OR REPLACE TRIGGER execution_pending_notify
    AFTER INSERT OR UPDATE OF status ON executions_execution
    FOR EACH ROW WHEN (NEW.status = 'pending'
                       AND NEW.id::text IS DISTINCT FROM current_setting('mantle.admitted', true))
    EXECUTE FUNCTION mantle_notify_work();

CREATE OR REPLACE TRIGGER step_pending_notify
    AFTER INSERT OR UPDATE OF status, not_before ON executions_stepexecution
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION mantle_notify_work();

CREATE OR REPLACE TRIGGER step_waiting_notify
    AFTER INSERT OR UPDATE OF status, not_before ON executions_stepexecution
    FOR EACH ROW WHEN (NEW.status = 'waiting') EXECUTE FUNCTION mantle_notify_work();

CREATE OR REPLACE TRIGGER step_limit_freed_notify
    AFTER UPDATE OF status ON executions_stepexecution
    FOR EACH ROW WHEN (OLD.status = 'running' AND NEW.status <> 'running'
                       AND NEW.limit_ids <> '{}') EXECUTE FUNCTION mantle_notify_work();

CREATE OR REPLACE TRIGGER named_limit_raised_notify
    AFTER UPDATE OF max ON teams_namedlimit
    FOR EACH ROW WHEN (NEW.max = 0 OR NEW.max > OLD.max) EXECUTE FUNCTION mantle_notify_work();

-- Each step row carries its execution's team and priority, copied on insert whatever the row's
-- path (neither ever changes), so that pending and waiting steps are indexed per team in claim
-- order (docs/performance.md, Claims and Step-scope hand-off).
CREATE OR REPLACE FUNCTION mantle_step_team() RETURNS trigger LANGUAGE plpgsql AS $team$
BEGIN
    SELECT e.team_id, e.priority INTO NEW.team_id, NEW.priority
      FROM executions_execution e WHERE e.id = NEW.execution_id;
    RETURN NEW;
END
$team$;

CREATE OR REPLACE TRIGGER step_team BEFORE INSERT ON executions_stepexecution
    FOR EACH ROW EXECUTE FUNCTION mantle_step_team();

-- Fair promotion's cursor kept no later than the truth when an execution is queued
-- (mantle_queued_turn.sql, mantle_fair_heads.sql).
CREATE OR REPLACE TRIGGER execution_queued_turn
    AFTER INSERT OR UPDATE OF status ON executions_execution
    FOR EACH ROW WHEN (NEW.status = 'queued') EXECUTE FUNCTION mantle_queued_turn();
