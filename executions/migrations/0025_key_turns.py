"""Fair promotion's cursor (docs/performance.md, Keys at scale): executions_keyturn, one row
per key of a workflow with a queue, read in round-robin order by mantle_fair_heads and kept no
later than the truth by the trigger function mantle_queued_turn when an execution is queued
(executions/sql/mantle_fair_heads.sql says why). Seeded with the keys queued now, each at its
head's place and its latest promotion.

The functions are frozen here as rendered from executions/sql/ when this migration was written
(tests/structure/test_migrations.py checks they are what executions/sql builds now).
"""

import django.db.models.deletion
from django.db import migrations, models

FAIR_HEADS_SIGNATURE = "mantle_fair_heads(bigint, int, boolean, int, boolean, int, float8)"

FAIR_HEADS_FUNCTION = r"""
CREATE OR REPLACE FUNCTION mantle_fair_heads(
    _workflow_id bigint, _per_key int, _stored_key_limits boolean, _limit int,
    _rate_per_key boolean, _rate_max int, _rate_period float8)
RETURNS TABLE(head uuid, head_priority smallint, head_created_at timestamptz,
              head_named_limits bigint[], head_rank bigint)
LANGUAGE plpgsql VOLATILE
AS $fair$
DECLARE
    _turn record;
    _head record;
    _last timestamptz;
    _stored boolean;
    _holders bigint;
    _bound bigint;
    _key_limit int;
    _found uuid[];
    _corrected boolean := true;
    _debouncing boolean := false;
BEGIN
    WHILE _limit IS NOT NULL AND _corrected AND NOT _debouncing LOOP
        _found := '{}';
        _corrected := false;
        FOR _turn IN SELECT t.concurrency_key, t.priority, t.last_promoted_at, t.created_at,
                            t.execution_id
                       FROM executions_keyturn t
                      WHERE t.workflow_id = _workflow_id
                      ORDER BY t.priority DESC, t.last_promoted_at, t.created_at, t.execution_id
        LOOP
            SELECT e.id, e.priority, e.created_at, e.named_limits, e.key_limit, e.not_before
              INTO _head
              FROM executions_execution e
             WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _turn.concurrency_key
               AND e.status = 'queued'
             ORDER BY e.priority DESC, e.created_at, e.id
             LIMIT 1;
            IF NOT FOUND THEN
                DELETE FROM executions_keyturn t
                 WHERE t.workflow_id = _workflow_id
                   AND t.concurrency_key = _turn.concurrency_key;
                CONTINUE;
            END IF;
            IF _head.not_before > now() THEN
                _debouncing := true;
                EXIT;
            END IF;
            SELECT coalesce(greatest(_turn.last_promoted_at, max(e.promoted_at)), '-infinity')
              INTO _last
              FROM executions_execution e
             WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _turn.concurrency_key
               AND e.promoted_at IS NOT NULL;
            IF (_head.priority, _last, _head.created_at, _head.id)
               IS DISTINCT FROM (_turn.priority, _turn.last_promoted_at, _turn.created_at,
                                 _turn.execution_id) THEN
                UPDATE executions_keyturn t
                   SET priority = _head.priority, last_promoted_at = _last,
                       created_at = _head.created_at, execution_id = _head.id
                 WHERE t.workflow_id = _workflow_id
                   AND t.concurrency_key = _turn.concurrency_key;
                _corrected := true;
                CONTINUE;
            END IF;
            -- The key's free slots as fair_queue_heads counts them: its head is promoted in
            -- the first round when at least one is free and it fits under its own key limit.
            _stored := _stored_key_limits AND EXISTS (SELECT 1 FROM executions_execution e
                WHERE e.workflow_id = _workflow_id AND e.concurrency_key = _turn.concurrency_key
                  AND e.status = 'queued' AND e.key_limit IS NOT NULL);
            IF _per_key = 0 AND NOT _stored THEN
                _holders := 0;
            ELSE
                SELECT count(*) INTO _holders FROM executions_execution e
                 WHERE e.workflow_id = _workflow_id
                   AND e.concurrency_key = _turn.concurrency_key
                   AND e.status IN ('pending', 'running');
            END IF;
            _bound := _limit;
            IF _rate_per_key THEN
                SELECT least(_bound, _rate_max - count(*)) INTO _bound
                  FROM executions_execution e
                 WHERE e.workflow_id = _workflow_id
                   AND e.concurrency_key = _turn.concurrency_key
                   AND e.pending_at > statement_timestamp() - make_interval(secs => _rate_period);
            END IF;
            IF _per_key > 0 AND NOT _stored THEN
                _bound := least(_bound, _per_key - _holders);
            END IF;
            _key_limit := coalesce(CASE WHEN _stored_key_limits THEN _head.key_limit END,
                                   _per_key);
            IF _bound >= 1 AND (_key_limit = 0 OR _holders + 1 <= _key_limit) THEN
                _found := _found || _head.id;
                EXIT WHEN cardinality(_found) >= _limit;
            END IF;
        END LOOP;
    END LOOP;
    IF _limit IS NOT NULL AND NOT _debouncing AND cardinality(_found) >= _limit THEN
        RETURN QUERY SELECT e.id, e.priority, e.created_at, e.named_limits, f.rank
                       FROM unnest(_found) WITH ORDINALITY AS f(id, rank)
                       JOIN executions_execution e ON e.id = f.id
                      ORDER BY f.rank;
        RETURN;
    END IF;
    RETURN QUERY WITH RECURSIVE keys(key) AS (
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
           -- Its slot holders, counted only when a limit applies to the key: the workflow's
           -- count, or one a queued execution of the key evaluated.
           CASE WHEN _per_key = 0 AND NOT k.stored THEN 0
                ELSE (SELECT count(*) FROM executions_execution e
                       WHERE e.workflow_id = _workflow_id AND e.concurrency_key = k.key
                         AND e.status IN ('pending', 'running')) END AS holders,
           least(_limit,
                 -- A rate per key: what its window has room for (NULL, ignored, otherwise).
                 CASE WHEN _rate_per_key THEN _rate_max - (
                     SELECT count(*) FROM executions_execution e
                      WHERE e.workflow_id = _workflow_id AND e.concurrency_key = k.key
                        AND e.pending_at > statement_timestamp()
                                           - make_interval(secs => _rate_period)) END)
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
               least(state.free, CASE WHEN _per_key > 0 AND NOT state.stored
                                      THEN _per_key - state.holders END) AS bound
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
 LIMIT _limit;
END
$fair$
"""

QUEUED_TURN_FUNCTION = r"""
CREATE OR REPLACE FUNCTION mantle_queued_turn() RETURNS trigger
LANGUAGE plpgsql VOLATILE
AS $turn$
BEGIN
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
"""

QUEUED_TURN_TRIGGER = """
CREATE TRIGGER execution_queued_turn
AFTER INSERT OR UPDATE OF status ON executions_execution
FOR EACH ROW WHEN (NEW.status = 'queued')
EXECUTE FUNCTION mantle_queued_turn()
"""

SEED_TURNS = """
INSERT INTO executions_keyturn
       (workflow_id, concurrency_key, priority, last_promoted_at, created_at, execution_id)
SELECT DISTINCT ON (q.workflow_id, q.concurrency_key)
       q.workflow_id, q.concurrency_key, q.priority,
       (SELECT coalesce(max(e.promoted_at), '-infinity') FROM executions_execution e
         WHERE e.workflow_id = q.workflow_id AND e.concurrency_key = q.concurrency_key
           AND e.promoted_at IS NOT NULL),
       q.created_at, q.id
  FROM executions_execution q
 WHERE q.status = 'queued'
 ORDER BY q.workflow_id, q.concurrency_key, q.priority DESC, q.created_at, q.id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0024_per_key_limit_expressions"),
        ("workflows", "0011_retention"),
    ]

    operations = [
        migrations.CreateModel(
            name="KeyTurn",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("concurrency_key", models.CharField(max_length=200)),
                ("priority", models.PositiveSmallIntegerField()),
                ("last_promoted_at", models.DateTimeField()),
                ("created_at", models.DateTimeField()),
                ("execution_id", models.UUIDField()),
                (
                    "workflow",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="workflows.workflowdefinition",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=[
                            "workflow",
                            "-priority",
                            "last_promoted_at",
                            "created_at",
                            "execution_id",
                        ],
                        name="keyturn_order",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("workflow", "concurrency_key"), name="keyturn_key"
                    )
                ],
            },
        ),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("key_limit__isnull", False), ("status", "queued")),
                fields=["workflow", "concurrency_key"],
                name="execution_key_limit_queued",
            ),
        ),
        migrations.RunSQL(
            sql=QUEUED_TURN_FUNCTION, reverse_sql="DROP FUNCTION mantle_queued_turn()"
        ),
        migrations.RunSQL(
            sql=QUEUED_TURN_TRIGGER,
            reverse_sql="DROP TRIGGER execution_queued_turn ON executions_execution",
        ),
        migrations.RunSQL(sql=SEED_TURNS, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(
            sql=FAIR_HEADS_FUNCTION, reverse_sql=f"DROP FUNCTION {FAIR_HEADS_SIGNATURE}"
        ),
    ]
