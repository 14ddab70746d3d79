-- Admission in batches (services/batch_admission.py): many executions of one team, each
-- decided by mantle_admit as one admission is, in one statement of the caller's transaction
-- (the engine clock's delayed runs and bulk replays).

-- name: admit_batch
-- Each execution of the batch through mantle_admit, in the batch's order (its ordinality), in
-- this one statement: the team's admission locks are taken by the first and held to the batch's
-- commit, so the batch is admitted as its executions would be one after another, limits decided
-- then. Each row carries its run_at (a delayed run's) and replay_of (a replay's), NULL if none.
SELECT a.*
  FROM unnest(%(ids)s::uuid[], %(workflow_ids)s::bigint[], %(version_ids)s::bigint[],
              %(inputs)s::jsonb[], %(triggers)s::jsonb[], %(idempotency_keys)s::text[],
              %(concurrency_keys)s::text[], %(priorities)s::int[], %(key_limits)s::int[],
              %(key_locks)s::int[], %(run_ats)s::timestamptz[], %(replay_ofs)s::uuid[])
       WITH ORDINALITY AS r(id, workflow_id, version_id, inputs, trigger, idempotency_key,
                            concurrency_key, priority, key_limit, key_lock, run_at, replay_of,
                            ord)
 CROSS JOIN LATERAL mantle_admit(
    r.id, %(team_id)s, r.workflow_id, r.version_id, r.inputs, r.trigger, false,
    r.idempotency_key, r.concurrency_key, r.priority, r.key_limit, %(default_team_limit)s,
    %(team_namespace)s, %(limit_namespace)s, %(workflow_namespace)s, %(key_namespace)s,
    r.key_lock, %(lock_timeout)s, false, r.run_at, r.replay_of) AS a
 ORDER BY r.ord

-- name: admit_batch_wake_workers
-- The batch's pending executions announced at its commit (mantle_admit marks each as announced
-- after commit instead, which a batch does not do one by one).
SELECT pg_notify('mantle_work', '')
