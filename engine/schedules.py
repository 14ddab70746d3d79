"""django-q2 schedules, declared here and upserted idempotently at start-up (`mantle serve`).

`mantle-engine-clock` runs every minute and restarts the engine clock (engine/clock.py) if its chain
of tasks was broken; django-q2 looks at schedules only every 30 s, so the clock, not the
schedule, gives the sub-minute intervals. `start_engine` also kicks the clock right away.
"""

from __future__ import annotations

from django.utils import timezone
from django_q.models import Schedule

from engine import dispatch

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


def start_engine() -> None:
    """At start-up: the schedules, and the clock now rather than at the first schedule run."""
    upsert_schedules()
    dispatch.start_clock({})
