-- A request's one-query resolution (executions/resolution.py; docs/architecture.md, One request's
-- walk). Each column is named "<model>.<field>" and loads into that model; a version's content
-- and spec are left out (they load when read, and admission keeps the spec parsed).
-- tests/structure/test_sql.py checks that every other field of these models is read.

-- name: api_key_with_workflow
-- An API key with its team, and the team's workflow %(name)s with its current version (NULLs
-- when it has none).
SELECT k.id AS "key.id", k.team_id AS "key.team_id", k.user_id AS "key.user_id",
       k.name AS "key.name", k.prefix AS "key.prefix", k.key_hash AS "key.key_hash",
       k.created_at AS "key.created_at", k.last_used_at AS "key.last_used_at",
       k.revoked_at AS "key.revoked_at",
       t.id AS "team.id", t.slug AS "team.slug", t.name AS "team.name",
       t.max_concurrent_executions AS "team.max_concurrent_executions",
       t.paused_at AS "team.paused_at", t.created_at AS "team.created_at", w.id AS "workflow.id",
       w.team_id AS "workflow.team_id", w.name AS "workflow.name",
       w.current_version_id AS "workflow.current_version_id",
       w.created_at AS "workflow.created_at", w.paused_at AS "workflow.paused_at",
       v.id AS "version.id", v.workflow_id AS "version.workflow_id", v.number AS "version.number",
       v.content_hash AS "version.content_hash",
       v.max_parallel_executions AS "version.max_parallel_executions",
       v.on_limit AS "version.on_limit", v.max_parallel_per_key AS "version.max_parallel_per_key",
       v.max_queued AS "version.max_queued", v.limits AS "version.limits",
       v.rate_max AS "version.rate_max", v.rate_period AS "version.rate_period",
       v.rate_per_key AS "version.rate_per_key", v.debounce AS "version.debounce",
       v.on_pause AS "version.on_pause", v.retention_completed AS "version.retention_completed",
       v.retention_failed AS "version.retention_failed", v.created_at AS "version.created_at"
  FROM teams_apikey k
  JOIN teams_team t ON t.id = k.team_id
  LEFT JOIN workflows_workflowdefinition w ON w.team_id = t.id AND w.name = %(name)s
  LEFT JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE k.key_hash = %(key_hash)s

-- name: webhook_by_path
-- The webhook trigger on %(path)s with its workflow, team and current version.
SELECT h.id AS "hook.id", h.path AS "hook.path", h.workflow_id AS "hook.workflow_id",
       h.secret AS "hook.secret", h.anonymous AS "hook.anonymous",
       t.id AS "team.id", t.slug AS "team.slug", t.name AS "team.name",
       t.max_concurrent_executions AS "team.max_concurrent_executions",
       t.paused_at AS "team.paused_at", t.created_at AS "team.created_at", w.id AS "workflow.id",
       w.team_id AS "workflow.team_id", w.name AS "workflow.name",
       w.current_version_id AS "workflow.current_version_id",
       w.created_at AS "workflow.created_at", w.paused_at AS "workflow.paused_at",
       v.id AS "version.id", v.workflow_id AS "version.workflow_id", v.number AS "version.number",
       v.content_hash AS "version.content_hash",
       v.max_parallel_executions AS "version.max_parallel_executions",
       v.on_limit AS "version.on_limit", v.max_parallel_per_key AS "version.max_parallel_per_key",
       v.max_queued AS "version.max_queued", v.limits AS "version.limits",
       v.rate_max AS "version.rate_max", v.rate_period AS "version.rate_period",
       v.rate_per_key AS "version.rate_per_key", v.debounce AS "version.debounce",
       v.on_pause AS "version.on_pause", v.retention_completed AS "version.retention_completed",
       v.retention_failed AS "version.retention_failed", v.created_at AS "version.created_at"
  FROM workflows_webhookpath h
  JOIN workflows_workflowdefinition w ON w.id = h.workflow_id
  JOIN teams_team t ON t.id = w.team_id
  JOIN workflows_workflowversion v ON v.id = w.current_version_id
 WHERE h.path = %(path)s
