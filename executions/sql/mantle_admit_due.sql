-- mantle_admit_due: a batch of one team's due delayed runs admitted in the caller's transaction
-- (services/scheduled.py). Installed by the migrations from this file (docs/architecture.md, The
-- data room).
--
-- The runs are the caller's: it locked their scheduled rows (FOR UPDATE SKIP LOCKED), in
-- admission order, each of its workflow's current version, so the inputs and priority stored
-- when it was scheduled are what admission would compute now; the caller gives each one's key,
-- evaluated key limit and key lock (the three arrays NULL: every run is unkeyed, the key ''),
-- and cuts its batch after a run that may supersede another (it ends that one before the next
-- run is decided). Each run's scheduled row is deleted and the run admitted under its id
-- through mantle_admit, in order, except a FIFO tail: after a run is queued behind its team,
-- one of its named limits, its workflow or a pause (its workflow queueing when full, with no
-- max_queued), the runs that follow it in the batch with its workflow, key and key limit are
-- queued behind it, for the same reason, in one statement (docs/performance.md, Delayed runs in
-- one statement). That is mantle_admit's own decision for each: under the locks its leader
-- took and holds to the batch's commit, slot holders can only leave and no queue shrinks
-- (promotion and a pause take the same locks), the team's and the named limits' checks come
-- first and now see the leader's queue, and FIFO queues the rest behind it. Not after a run
-- queued behind its key: a holder of the key leaving meanwhile lets the next be labelled
-- `workflow`. A limit changed meanwhile without those locks (a team's or a global limit's max)
-- is decided as if it had committed after the batch.
--
-- Returns what the caller must still do something about: a run rejected (its scheduled row put
-- back; the caller fails it) or one that superseded another (the caller ends that one).

-- A FIFO tail queued behind its leader, as mantle_admit queued the leader: its blocked_by, the
-- named limit it waits for and the named limits it will hold, its key and key limit, and one
-- clock time per row in the batch's order (the queue's FIFO order). Its scheduled rows become
-- queued in place: the same ids, teams, workflows and versions, so no foreign key is checked
-- again at commit, as a delete and an insert of each would be.
CREATE OR REPLACE FUNCTION mantle_queue_behind(_leader executions_execution, _tail uuid[])
RETURNS void
LANGUAGE sql VOLATILE
AS $behind$
WITH timed AS MATERIALIZED (
    SELECT u.id, clock_timestamp() AS at
      FROM unnest(_tail) WITH ORDINALITY AS u(id, ord)
     ORDER BY u.ord
)
UPDATE executions_execution e
   SET status = 'queued', blocked_by = _leader.blocked_by,
       blocked_by_limit = _leader.blocked_by_limit, named_limits = _leader.named_limits,
       concurrency_key = _leader.concurrency_key, key_limit = _leader.key_limit, error = '',
       created_at = t.at, queued_at = t.at
  FROM timed t
 WHERE e.id = t.id AND e.status = 'scheduled'
$behind$;

CREATE OR REPLACE FUNCTION mantle_admit_due(
    _ids uuid[], _keys text[], _key_limits int[], _key_locks int[], _team_id bigint,
    _default_team_limit int, _team_namespace int, _limit_namespace int,
    _workflow_namespace int, _key_namespace int, _lock_timeout text)
RETURNS TABLE(id uuid, outcome text, scope text, scope_limit int, scope_name text,
              retry_after int, admitted_at timestamptz, queue_position bigint, superseded uuid)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
AS $due$
DECLARE
    _runs executions_execution[];
    _run executions_execution;
    _tail uuid[] := '{}';
    _leader executions_execution;
    _decision record;
    _pending boolean := false;
BEGIN
    SELECT array_agg(e ORDER BY r.ord) INTO _runs
      FROM unnest(_ids) WITH ORDINALITY AS r(id, ord)
      JOIN executions_execution e ON e.id = r.id AND e.status = 'scheduled';
    IF coalesce(array_length(_runs, 1), 0) <> coalesce(array_length(_ids, 1), 0) THEN
        RAISE EXCEPTION 'due runs no longer scheduled: the caller locks them first';
    END IF;
    FOR _i IN 1 .. coalesce(array_length(_runs, 1), 0) LOOP
        _run := _runs[_i];
        _run.concurrency_key := coalesce(_keys[_i], '');
        _run.key_limit := _key_limits[_i];
        IF _leader.id IS NOT NULL AND _run.workflow_id = _leader.workflow_id
           AND _run.concurrency_key = _leader.concurrency_key
           AND _run.key_limit IS NOT DISTINCT FROM _leader.key_limit THEN
            _tail := _tail || _run.id;
            CONTINUE;
        END IF;
        IF cardinality(_tail) > 0 THEN
            PERFORM mantle_queue_behind(_leader, _tail);
            _tail := '{}';
        END IF;
        _leader := NULL;
        -- Gone as a scheduled row before it is inserted again under its id.
        DELETE FROM executions_execution e WHERE e.id = _run.id;
        SELECT * INTO _decision
          FROM mantle_admit(_run.id, _team_id, _run.workflow_id, _run.version_id, _run.inputs,
                            _run.trigger, false, _run.idempotency_key, _run.concurrency_key,
                            _run.priority, _run.key_limit, _default_team_limit,
                            _team_namespace, _limit_namespace, _workflow_namespace,
                            _key_namespace, _key_locks[_i], _lock_timeout, false, _run.run_at,
                            _run.replay_of_id);
        IF _decision.outcome = 'pending' THEN
            _pending := true;
        ELSIF _decision.outcome = 'rejected' THEN
            INSERT INTO executions_execution SELECT (_run).*;  -- back: the caller fails it
        ELSIF _decision.scope IN ('team', 'limit', 'workflow', 'paused')
              AND _decision.superseded IS NULL THEN
            SELECT e.* INTO _leader
              FROM executions_execution e
              JOIN workflows_workflowdefinition w ON w.id = e.workflow_id
              JOIN workflows_workflowversion v ON v.id = w.current_version_id
             WHERE e.id = _run.id AND v.on_limit = 'queue' AND v.max_queued = 0;
        END IF;
        IF _decision.outcome = 'rejected' OR _decision.superseded IS NOT NULL THEN
            RETURN QUERY SELECT _run.id, _decision.outcome, _decision.scope,
                _decision.scope_limit, _decision.scope_name, _decision.retry_after,
                _decision.admitted_at, _decision.queue_position, _decision.superseded;
        END IF;
    END LOOP;
    IF cardinality(_tail) > 0 THEN
        PERFORM mantle_queue_behind(_leader, _tail);
    END IF;
    -- mantle_admit leaves announcing its pending rows to its caller (triggers.sql): at commit.
    IF _pending THEN
        PERFORM pg_notify('mantle_work', '');
    END IF;
END
$due$
