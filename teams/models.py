from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models


class Team(models.Model):
    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200, blank=True)
    max_concurrent_executions = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="Blank: the mantle.yaml default. 0: unlimited.",
    )
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="teams")
    # Paused (docs/operations.md, Pausing during an incident): nothing of the team becomes
    # pending. Changed only under the team's lock (executions.services.pauses).
    paused_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def effective_limit(self) -> int:
        """The team's own limit when set, else the configured default; 0 means unlimited."""
        return effective_team_limit(self.max_concurrent_executions)


def effective_team_limit(override: int | None) -> int:
    if override is not None:
        return override
    return settings.MANTLE.engine.max_concurrent_executions_per_team


# A named limit's name, as workflows list it under `limits:`.
NAMED_LIMIT_NAME = r"[a-z][a-z0-9_-]*"


class NamedLimit(models.Model):
    """A limit that workflows share (docs/limits.md): every execution of a workflow that lists it
    under `limits:` holds one of its slots while pending or running, and every step that lists it
    holds its units while running. Held slots and units are counted from executions' and steps'
    rows, never kept here. A team's, or global (no team: shared by every team's steps, set by
    staff only)."""

    team = models.ForeignKey(
        Team,
        on_delete=models.CASCADE,
        related_name="named_limits",
        null=True,
        blank=True,
        help_text="Blank: a global limit, shared by the steps of every team.",
    )
    name = models.CharField(
        max_length=63,
        validators=[RegexValidator(f"^{NAMED_LIMIT_NAME}$", "lower case: ^[a-z][a-z0-9_-]*$")],
    )
    max = models.PositiveIntegerField(help_text="0: unlimited.")
    # Paused: no execution holding it becomes pending (executions.services.pauses).
    paused_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["team", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="named_limit_unique_name"),
            models.UniqueConstraint(
                fields=["name"],
                name="named_limit_unique_global_name",
                condition=models.Q(team__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team or 'global'}/{self.name}"

    @property
    def scope(self) -> str:
        return "team" if self.team_id is not None else "global"


class NamedRate(models.Model):
    """A rate that steps share (docs/limits.md, Step scope): the steps that name it under
    `rate_limit:` start at most `max` units per trailing `period` (per key value when
    `per_key`), counted from the steps' rows (their claim times), never kept here. A team's, or
    global (no team: shared by every team's steps, set by staff only)."""

    team = models.ForeignKey(
        Team,
        on_delete=models.CASCADE,
        related_name="named_rates",
        null=True,
        blank=True,
        help_text="Blank: a global rate, shared by the steps of every team.",
    )
    name = models.CharField(
        max_length=63,
        validators=[RegexValidator(f"^{NAMED_LIMIT_NAME}$", "lower case: ^[a-z][a-z0-9_-]*$")],
    )
    max = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    period = models.DurationField()
    per_key = models.BooleanField(default=False)

    class Meta:
        ordering = ["team", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="named_rate_unique_name"),
            models.UniqueConstraint(
                fields=["name"],
                name="named_rate_unique_global_name",
                condition=models.Q(team__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team or 'global'}/{self.name}"

    @property
    def scope(self) -> str:
        return "team" if self.team_id is not None else "global"


class ApiKey(models.Model):
    """An API key of one team. Only the SHA-256 of the key is stored; the key is shown once."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    # The user the key acts for, if any: a staff user's key may also change global named limits
    # (docs/limits.md, Step scope).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="api_keys",
    )
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=12, help_text="The first characters, for recognition.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.team})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def is_staff(self) -> bool:
        return self.user is not None and self.user.is_staff and self.user.is_active

    @staticmethod
    def hash(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()
