"""Operators' admin for teams and API keys. Writes go through teams.services: a raised limit
promotes what now fits, and API keys are created and revoked by the service only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from teams.models import ApiKey, NamedLimit, Team
from teams.services import api_key_create, api_key_revoke, named_limit_set, team_set_limit


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "name",
        "max_concurrent_executions",
        "effective_limit",
    ]
    list_editable = ["max_concurrent_executions"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["members"]
    fields = ["slug", "name", "max_concurrent_executions", "members"]

    def get_readonly_fields(self, request: HttpRequest, obj: Team | None = None) -> list[str]:
        return ["slug"] if obj else []

    @admin.display(description="effective limit")
    def effective_limit(self, team: Team) -> str:
        return str(team.effective_limit or "unlimited")

    def save_model(self, request: HttpRequest, obj: Team, form: ModelForm, change: bool) -> None:
        if not change:
            obj.save()
            return
        other_fields = [f for f in form.changed_data if f in {"name"}]
        if other_fields:
            obj.save(update_fields=other_fields)
        if "max_concurrent_executions" in form.changed_data:
            # Through the service, so a raised limit promotes queued executions on commit.
            team_set_limit(team=obj, max_concurrent_executions=obj.max_concurrent_executions)


@admin.register(NamedLimit)
class NamedLimitAdmin(admin.ModelAdmin):
    """Named limits, their max editable in the list. Deleting one is refused while it is in use,
    a check of workflows and executions (`mantle limits delete`, `DELETE /api/v1/limits/<name>`),
    so the admin does not delete."""

    list_display = ["name", "team", "max"]
    list_editable = ["max"]
    list_filter = ["team"]
    list_select_related = ["team"]
    search_fields = ["name", "team__slug"]
    fields = ["team", "name", "max"]

    def get_readonly_fields(self, request: HttpRequest, obj: NamedLimit | None = None) -> list[str]:
        return ["team", "name"] if obj else []

    def save_model(
        self, request: HttpRequest, obj: NamedLimit, form: ModelForm, change: bool
    ) -> None:
        # Through the service: under the team's lock, and a raised max promotes on commit.
        saved, _ = named_limit_set(team=obj.team, name=obj.name, max=obj.max)
        obj.__dict__.update(saved.__dict__)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "team", "name", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["team", ("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["team"]
    search_fields = ["prefix", "name", "team__slug"]
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("team", "user", "name")
        return ("team", "user", "name", "prefix", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return []
        return ["team", "user", "prefix", "created_at", "last_used_at", "revoked_at"]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: ModelForm, change: bool) -> None:
        if change:
            obj.save(update_fields=["name"])
            return
        created, key = api_key_create(team=obj.team, name=obj.name, user=obj.user)
        # The admin goes on with `obj` (log entry, redirect): make it the stored key.
        obj.__dict__.update(created.__dict__)
        messages.warning(
            request,
            f"The new API key of {obj.team}, shown this once only (only its hash is kept): {key}",
        )

    @admin.action(description="Revoke the selected API keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True))
        for api_key in keys:
            api_key_revoke(api_key=api_key)
        self.message_user(request, f"Revoked {len(keys)} API key(s).", messages.SUCCESS)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
