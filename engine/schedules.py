"""django-q2 schedules, declared here and upserted idempotently at start-up (`mantle serve`).

`mantle-engine-clock` runs one pass of the engine clock (engine/clock.py) every minute, for a
cluster without step workers; where step workers run, their clock ticks every 0.25 s and this
pass finds the clock's lock held and does nothing. `mantle-prune` runs the retention pass
every hour (executions/services/retention.py).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule

from core import locks

SCHEDULES = {
    "mantle-engine-clock": {
        "func": "engine.tasks.engine_clock",
        "schedule_type": Schedule.MINUTES,
        "minutes": 1,
        "repeats": -1,
    },
    # Retention (docs/operations.md): each pass deletes in batches, so an hour is plenty.
    "mantle-prune": {
        "func": "engine.tasks.prune",
        "schedule_type": Schedule.HOURLY,
        "repeats": -1,
    },
}


def upsert_schedules() -> None:
    # Machines started together upsert one at a time: django-q2's Schedule.name is not unique,
    # so each would find no schedule and create one, and those duplicates were kept.
    with transaction.atomic():
        locks.lock_schedules()
        for name, fields in SCHEDULES.items():
            same_name = Schedule.objects.filter(name=name).order_by("pk")
            kept = same_name.first()
            if kept is None:
                Schedule.objects.create(name=name, next_run=timezone.now(), **fields)
            else:
                same_name.exclude(pk=kept.pk).delete()  # duplicates made before this lock
                same_name.filter(pk=kept.pk).update(**fields)
        Schedule.objects.filter(name__startswith="mantle-").exclude(name__in=SCHEDULES).delete()
