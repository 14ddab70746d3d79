"""The triggers of a workflow: webhooks (a path; a secret, or `auth: none`) and cron schedules.

A webhook is authenticated by default (docs/hostile-input.md, Webhook authentication): with a
`secret` the caller signs the body, without one it sends an API key of the workflow's team;
`auth: none` opens it to anyone, and `mantle validate` warns about it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import cast

from croniter import croniter

from workflows.schema.document import Document, index, join
from workflows.schema.spec import TriggerSpec

_WEBHOOK_KEYS = frozenset({"type", "path", "secret", "auth"})
_CRON_KEYS = frozenset({"type", "schedule"})
_WEBHOOK_PATH = re.compile(
    r"/hooks/[A-Za-z0-9_-][A-Za-z0-9._~-]*(?:/[A-Za-z0-9_-][A-Za-z0-9._~-]*)*"
)

KeyCheck = Callable[[dict, str, frozenset[str]], None]


def triggers_read(doc: Document, value: object, check_keys: KeyCheck) -> tuple[TriggerSpec, ...]:
    """The triggers of a workflow; their errors go to ``doc``."""
    if not isinstance(value, list):
        doc.error("triggers", "must be a list")
        return ()
    specs = []
    webhook_paths: set[str] = set()
    for i, trigger in enumerate(value):
        path = index("triggers", i)
        if not isinstance(trigger, dict):
            doc.error(path, "must be a mapping")
            continue
        trigger_type = _required(doc, trigger, "type", path)
        if trigger_type == "webhook":
            check_keys(trigger, path, _WEBHOOK_KEYS)
            hook_path = _required(doc, trigger, "path", path)
            if hook_path is not None and not (
                isinstance(hook_path, str) and _WEBHOOK_PATH.fullmatch(hook_path)
            ):
                doc.error(
                    join(path, "path"),
                    "must be a path like /hooks/<name> "
                    '(letters, digits, "-", "_", ".", "~" and "/")',
                )
            elif hook_path is not None:
                if hook_path in webhook_paths:
                    message = f'duplicate webhook path "{hook_path}"'
                    doc.error(join(path, "path"), message)
                webhook_paths.add(hook_path)
            secret = trigger.get("secret")
            if "secret" in trigger and not (isinstance(secret, str) and secret):
                doc.error(join(path, "secret"), "must be a non-empty string")
            auth = trigger.get("auth")
            if "auth" in trigger and auth != "none":
                doc.error(join(path, "auth"), 'must be "none" (anyone may call the webhook)')
            elif auth is not None and secret is not None:
                doc.error(join(path, "auth"), "auth: none and a secret exclude each other")
            elif auth == "none":
                doc.warning(
                    join(path, "auth"),
                    f"the webhook {hook_path} accepts anonymous callers (auth: none); "
                    "give it a secret or let callers send an API key",
                )
            specs.append(
                TriggerSpec(type="webhook", path=cast(str, hook_path), secret=secret, auth=auth)
            )
        elif trigger_type == "cron":
            check_keys(trigger, path, _CRON_KEYS)
            schedule = _required(doc, trigger, "schedule", path)
            if schedule is not None and not (
                isinstance(schedule, str)
                and len(schedule.split()) == 5
                and croniter.is_valid(schedule)
            ):
                doc.error(
                    join(path, "schedule"),
                    'must be a cron schedule of 5 fields, like "*/5 * * * *"',
                )
            specs.append(TriggerSpec(type="cron", schedule=cast(str, schedule)))
        elif trigger_type is not None:
            doc.error(join(path, "type"), "must be one of: webhook, cron")
    return tuple(specs)


def _required(doc: Document, mapping: dict, key: str, path: str) -> object:
    if key not in mapping:
        doc.missing(path, key)
        return None
    return mapping[key]
