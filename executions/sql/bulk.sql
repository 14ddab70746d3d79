-- Bulk actions (services/bulk.py).

-- name: bulk_replays_link
-- A batch's replays linked to their originals (admit_batch inserts no link).
UPDATE executions_execution e SET replay_of_id = r.original
  FROM unnest(%(ids)s::uuid[], %(originals)s::uuid[]) AS r(id, original)
 WHERE e.id = r.id
