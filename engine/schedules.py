"""The periodic passes django-q2 runs, declared here and upserted idempotently at start-up
(`mantle serve`): the ones a minute early or late changes nothing for. django-q2's scheduler
looks at its schedules every 30 s and counts in whole minutes, so what needs a finer tick stays
in the engine clock (engine/clock.py): the reaper, the backup poller (with the queue timeouts it
ends first) at `engine.queue_poll_interval`, cron triggers, and the rate windows, debounces and
delayed runs that fall due between two ticks.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule

from core import locks

SCHEDULES = {
    # The dashboard's queue-depth chart has one bucket a minute.
    "mantle-queue-samples": {
        "func": "engine.tasks.queue_sample",
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
