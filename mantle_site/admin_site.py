"""The admin's index: the operators' models first, django-q2's tables (which the engine alone
writes) last, in a section of their own (docs/operations.md, The admin)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest

# The operators' apps in the order they read them; any other app after these, django-q2's last.
OPERATORS_APPS = ("teams", "workflows", "executions", "auth")
INTERNAL_APP = "django_q"
INTERNAL_SECTION = "Task queue (internal)"


class MantleAdminSite(admin.AdminSite):
    site_header = "Mantle administration"
    site_title = "Mantle"
    empty_value_display = "—"

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[Any]:
        apps = super().get_app_list(request, app_label)
        for app in apps:
            if app["app_label"] == INTERNAL_APP:
                app["name"] = INTERNAL_SECTION
        return sorted(apps, key=_place)


def _place(app: dict[str, Any]) -> tuple[int, str]:
    label = app["app_label"]
    if label in OPERATORS_APPS:
        return OPERATORS_APPS.index(label), label
    return (len(OPERATORS_APPS) + (label == INTERNAL_APP), label)


class MantleAdminConfig(AdminConfig):
    default_site = "mantle_site.admin_site.MantleAdminSite"
