"""Admin building blocks shared by the apps."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyTabularInline(admin.TabularInline):
    """Rows shown as history: every field read-only, none added, changed or deleted here."""

    extra = 0
    can_delete = False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return cast(list[str], list(self.fields or []))  # inlines list plain field names

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdminMixin:
    """For a ModelAdmin of records written only by services: viewable, never added, changed or
    deleted through the admin."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
