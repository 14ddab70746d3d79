"""The validated workflow: typed, frozen dataclasses and their JSON round trip (the spec is
stored in a JSONField and read back by the engine)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class InputSpec:
    name: str
    type: str | None  # None: any JSON value (upstream's type is optional)
    description: str = ""
    default: object = None
    has_default: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "type": self.type,
            "description": self.description,
            "default": copy.deepcopy(self.default),
            "has_default": self.has_default,
        }


@dataclass(frozen=True, kw_only=True)
class TriggerSpec:
    type: str  # "webhook" (path, secret, auth) or "cron" (schedule)
    path: str | None = None
    secret: str | None = None
    auth: str | None = None  # "none": a webhook anyone may call (docs/hostile-input.md)
    schedule: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "type": self.type,
            "path": self.path,
            "secret": self.secret,
            "auth": self.auth,
            "schedule": self.schedule,
        }


@dataclass(frozen=True, kw_only=True)
class RetrySpec:
    max_attempts: int = 1
    backoff: str = "fixed"  # or "exponential"


@dataclass(frozen=True)
class StepLimit:
    """A named limit a step holds `units` of while it runs (docs/limits.md, Step scope)."""

    name: str
    units: int = 1


@dataclass(frozen=True)
class StepRate:
    """A named rate whose window a step's claim counts `units` in, per the value of `key` (a
    template over inputs and trigger) when the rate is per key (docs/limits.md, Step scope)."""

    name: str
    units: int = 1
    key: str | None = None


@dataclass(frozen=True, kw_only=True)
class StepSpec:
    name: str
    action: str
    params: dict[str, object] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    if_: str | None = None  # the bare CEL expression, braces removed
    retry: RetrySpec = RetrySpec()
    timeout: float | None = None  # seconds
    continue_on_error: bool = False
    for_each: list | str | None = None  # a list, or the "{{ … }}" string as written
    max_parallel: int = 0  # 0 = every branch at once
    limits: tuple[StepLimit, ...] = ()  # in name order
    rate: StepRate | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "action": self.action,
            "params": copy.deepcopy(self.params),
            "depends_on": list(self.depends_on),
            "if": self.if_,
            "retry": {"max_attempts": self.retry.max_attempts, "backoff": self.retry.backoff},
            "timeout": self.timeout,
            "continue_on_error": self.continue_on_error,
            "for_each": copy.deepcopy(self.for_each),
            "max_parallel": self.max_parallel,
            "limits": [{"name": limit.name, "units": limit.units} for limit in self.limits],
            "rate": None if self.rate is None else dataclasses.asdict(self.rate),
        }

    @classmethod
    def from_dict(cls, data: dict) -> StepSpec:
        return cls(
            name=data["name"],
            action=data["action"],
            params=copy.deepcopy(data["params"]),
            depends_on=tuple(data["depends_on"]),
            if_=data["if"],
            retry=RetrySpec(**data["retry"]),
            timeout=data["timeout"],
            continue_on_error=data["continue_on_error"],
            for_each=copy.deepcopy(data["for_each"]),
            max_parallel=data["max_parallel"],
            # Specs stored before step-scope limits have none.
            limits=tuple(StepLimit(**limit) for limit in data.get("limits", ())),
            rate=StepRate(**data["rate"]) if data.get("rate") else None,
        )


@dataclass(frozen=True, kw_only=True)
class WorkflowSpec:
    name: str
    description: str = ""
    inputs: tuple[InputSpec, ...] = ()
    triggers: tuple[TriggerSpec, ...] = ()
    timeout: float | None = None  # seconds
    max_parallel_executions: int = 0  # 0 = unlimited
    on_limit: str = "queue"  # or "reject"
    concurrency_key: str | None = None  # the bare CEL expression, braces removed
    max_parallel_per_key: int | str = 0  # 0 = unlimited, or the "{{ … }}" expression as written
    priority: int | str = 0  # 0-9, or the "{{ … }}" expression as written
    max_queued: int = 0  # 0 = unbounded
    queue_timeout: float | None = None  # seconds
    queue_timeout_text: str | None = None  # as written
    limits: tuple[str, ...] = ()  # the team's named limits it holds a slot of
    rate_max: int = 0  # rate_limit.max; 0 = no rate limit
    rate_period: float = 0.0  # rate_limit.period, seconds
    rate_per_key: bool = False
    debounce: float | None = None  # seconds
    on_pause: str = ""  # "" (queue; cron ticks skipped), "queue" or "reject"
    retention_completed: float | None = None  # seconds; None: mantle.yaml's; 0: for ever
    retention_failed: float | None = None
    steps: tuple[StepSpec, ...]

    def to_dict(self) -> dict[str, object]:
        """A JSON-serialisable dict; ``from_dict`` turns it back into an equal spec."""
        return {
            "name": self.name,
            "description": self.description,
            "inputs": [spec.to_dict() for spec in self.inputs],
            "triggers": [spec.to_dict() for spec in self.triggers],
            "timeout": self.timeout,
            "max_parallel_executions": self.max_parallel_executions,
            "on_limit": self.on_limit,
            "concurrency_key": self.concurrency_key,
            "max_parallel_per_key": self.max_parallel_per_key,
            "priority": self.priority,
            "max_queued": self.max_queued,
            "queue_timeout": self.queue_timeout,
            "queue_timeout_text": self.queue_timeout_text,
            "limits": list(self.limits),
            "rate_max": self.rate_max,
            "rate_period": self.rate_period,
            "rate_per_key": self.rate_per_key,
            "debounce": self.debounce,
            "on_pause": self.on_pause,
            "retention_completed": self.retention_completed,
            "retention_failed": self.retention_failed,
            "steps": [step.to_dict() for step in self.steps],
        }

    @classmethod
    def from_dict(cls, data: dict) -> WorkflowSpec:
        return cls(
            name=data["name"],
            description=data["description"],
            inputs=tuple(InputSpec(**copy.deepcopy(item)) for item in data["inputs"]),
            triggers=tuple(TriggerSpec(**item) for item in data["triggers"]),
            timeout=data["timeout"],
            max_parallel_executions=data["max_parallel_executions"],
            on_limit=data["on_limit"],
            # Specs stored before flow control (docs/limits.md) have none of its keys.
            concurrency_key=data.get("concurrency_key"),
            max_parallel_per_key=data.get("max_parallel_per_key", 0),
            priority=data.get("priority", 0),
            max_queued=data.get("max_queued", 0),
            queue_timeout=data.get("queue_timeout"),
            queue_timeout_text=data.get("queue_timeout_text"),
            limits=tuple(data.get("limits", ())),
            rate_max=data.get("rate_max", 0),
            rate_period=data.get("rate_period", 0.0),
            rate_per_key=data.get("rate_per_key", False),
            debounce=data.get("debounce"),
            on_pause=data.get("on_pause", ""),
            retention_completed=data.get("retention_completed"),
            retention_failed=data.get("retention_failed"),
            steps=tuple(StepSpec.from_dict(item) for item in data["steps"]),
        )
