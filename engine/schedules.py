"""django-q2 schedules, declared here and upserted idempotently at start-up (`mantle serve`).

`mantle-engine-clock` runs one pass of the engine clock (engine/clock.py) every minute, for a
cluster without step workers; where step workers run, their clock ticks every 0.25 s and this
pass finds the clock's lock held and does nothing.
"""

from __future__ import annotations

from django.utils import timezone
from django_q.models import Schedule

SCHEDULES = {
    "mantle-engine-clock": {
        "func": "engine.tasks.engine_clock",
        "schedule_type": Schedule.MINUTES,
        "minutes": 1,
        "repeats": -1,
    },
}


def upsert_schedules() -> None:
    for name, fields in SCHEDULES.items():
        schedule, created = Schedule.objects.update_or_create(name=name, defaults=fields)
        if created:
            schedule.next_run = timezone.now()
            schedule.save(update_fields=["next_run"])
    Schedule.objects.filter(name__startswith="mantle-").exclude(name__in=SCHEDULES).delete()
