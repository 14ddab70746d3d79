-- The health probe's read (api/health.py, through executions.selectors.database_read_only).

-- name: database_read_only
-- Whether the server takes no writes: a standby, such as a primary demoted by a failover
-- (docs/operations.md, Database failover).
SELECT current_setting('transaction_read_only') = 'on' AS read_only
