"""Executions in the admin: read-only, filterable, and cancellable through the lifecycle service.
The table grows to millions of rows, so nothing here counts it in full."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Protocol, cast

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin import ReadOnlyAdminMixin
from core.times import NONE_SHOWN, time_shown
from executions.models import SLOT_HOLDING, Execution, Status, StepExecution
from executions.pause_admin import TEAM_PAUSE_ACTIONS, paused
from executions.selectors import STEP_FIELDS, execution_step_counts, execution_steps
from executions.services.lifecycle import ExecutionBusy, NotCancellable, execution_cancel
from teams.admin import TeamAdmin
from teams.models import Team
from workflows.models import WorkflowDefinition


class CappedCountPaginator(Paginator):
    """Counts at most CAP rows (`SELECT count(*) FROM (… LIMIT CAP)`), so a page of a huge
    table costs an index scan, not a count of every row. Pages past the cap are not offered;
    filters and the date hierarchy narrow the list instead."""

    CAP = 10_000

    @cached_property
    def count(self) -> int:
        return cast(QuerySet[Any], self.object_list)[: self.CAP].count()


class WorkflowFilter(admin.RelatedFieldListFilter):
    """Workflows are named `team/name`: load their teams with them, not one query each."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> list[Any]:
        workflows = WorkflowDefinition.objects.select_related("team").order_by("team", "name")
        return [(w.pk, str(w)) for w in workflows]


class KeyFilter(admin.SimpleListFilter):
    """By concurrency key: any value in the URL (?key=acme); the choices are the 20 keys with
    the most live executions, not every key ever seen."""

    title = "concurrency key"
    parameter_name = "key"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        busiest = (
            Execution.objects.filter(status__in=[Status.QUEUED, *SLOT_HOLDING])
            .exclude(concurrency_key="")
            .values_list("concurrency_key")
            .annotate(live=Count("*"))
            .order_by("-live", "concurrency_key")[:20]
        )
        return [(key, key) for key, _ in busiest]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Execution]) -> QuerySet[Execution]:
        value = self.value()
        return queryset if value is None else queryset.filter(concurrency_key=value)


MOMENTS = ("created_at", "queued_at", "promoted_at", "started_at", "completed_at")


@admin.register(Execution)
class ExecutionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "short_id",
        "team",
        "workflow_name",
        "status",
        "blocked_by",
        "concurrency_key",
        "priority",
        "forced",
        "created_at_shown",
        "started_at_shown",
        "completed_at_shown",
    ]
    list_filter = ["status", "team", ("workflow", WorkflowFilter), KeyFilter]
    list_select_related = ["team", "workflow"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    paginator = CappedCountPaginator
    list_per_page = 50
    search_fields = ["=id"]
    actions = ["cancel"]
    fields = readonly_fields = (
        "id",
        "team",
        "workflow",
        "version",
        "status",
        "blocked_by",
        "concurrency_key",
        "priority",
        "forced",
        "inputs",
        "trigger",
        "idempotency_key",
        "error",
        *(f"{moment}_shown" for moment in MOMENTS),
        "step_summary",
    )
    # A fan-out has up to limits.fanout_items branches: the page shows the counts and the
    # first steps, and links to the steps' own (paged) list for the rest.
    FIRST_STEPS = 50

    # Every time of the page in one format (core.times), "—" for none.
    @admin.display(description="created at", ordering="created_at")
    def created_at_shown(self, execution: Execution) -> str:
        return time_shown(execution.created_at)

    @admin.display(description="queued at", ordering="queued_at")
    def queued_at_shown(self, execution: Execution) -> str:
        return time_shown(execution.queued_at)

    @admin.display(description="promoted at", ordering="promoted_at")
    def promoted_at_shown(self, execution: Execution) -> str:
        return time_shown(execution.promoted_at)

    @admin.display(description="started at", ordering="started_at")
    def started_at_shown(self, execution: Execution) -> str:
        return time_shown(execution.started_at)

    @admin.display(description="completed at", ordering="completed_at")
    def completed_at_shown(self, execution: Execution) -> str:
        return time_shown(execution.completed_at)

    @admin.display(description="steps")
    def step_summary(self, execution: Execution) -> SafeString:
        counts = execution_step_counts(execution=execution)
        steps = execution_steps(execution=execution, limit=self.FIRST_STEPS)
        url = reverse("admin:executions_stepexecution_changelist")
        summary = ", ".join(f"{n} {status}" for status, n in counts.items()) or "none yet"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    str(step),
                    step.attempt,
                    time_shown(step.started_at),
                    time_shown(step.completed_at),
                    step.error or NONE_SHOWN,
                )
                for step in steps
            ),
        )
        return format_html(
            '<p>{} (<a href="{}?execution={}">all steps</a>)</p><table>'
            "<tr><th>step</th><th>attempt</th><th>started</th><th>completed</th><th>error</th>"
            "</tr>{}</table>",
            summary,
            url,
            execution.id,
            rows,
        )

    @admin.display(description="execution", ordering="created_at")
    def short_id(self, execution: Execution) -> str:
        return str(execution.id)[:8]

    @admin.display(description="workflow", ordering="workflow__name")
    def workflow_name(self, execution: Execution) -> str:
        return execution.workflow.name

    def get_queryset(self, request: HttpRequest) -> QuerySet[Execution]:
        return super().get_queryset(request).select_related("team", "workflow", "version")

    @admin.action(description="Cancel the selected executions", permissions=["cancel"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Execution]) -> None:
        cancelled, refused, busy = 0, 0, 0
        for execution_id in queryset.values_list("id", flat=True):
            try:
                execution_cancel(execution_id, reason=f"cancelled by {request.user} in the admin")
                cancelled += 1
            except NotCancellable:
                refused += 1
            except ExecutionBusy:
                busy += 1
        self.message_user(request, f"Cancelled {cancelled} execution(s).", messages.SUCCESS)
        if refused:
            self.message_user(
                request,
                f"{refused} were already finished and were left as they are.",
                messages.WARNING,
            )
        if busy:
            self.message_user(
                request,
                f"{busy} were being updated by the engine and were not cancelled; try again.",
                messages.WARNING,
            )

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("executions.change_execution")


@admin.register(StepExecution)
class StepExecutionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The steps of an execution (`?execution=<id>`), a page at a time."""

    list_display = ["name", "fanout_index", "status", "attempt", "started_at", "completed_at"]
    list_filter = ["status"]
    # The unique index (execution, name, fanout_index) answers the list of one execution.
    ordering = ["execution", "name", "fanout_index"]
    show_full_result_count = False
    paginator = CappedCountPaginator
    list_per_page = 100
    fields = readonly_fields = (
        "execution",
        *(field for field in STEP_FIELDS if field != "id"),
        "lease_owner",
        "lease_expires_at",
        "not_before",
        "created_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[StepExecution]:
        return super().get_queryset(request).defer("items")


def _live_count(*statuses: str) -> Coalesce:
    # A correlated count per team that the partial indexes on live executions answer, instead of
    # a join over every execution the team ever ran.
    counts = (
        Execution.objects.filter(team=OuterRef("pk"), status__in=statuses)
        .order_by()
        .values("team")
        .annotate(n=Count("*"))
        .values("n")
    )
    return Coalesce(Subquery(counts, output_field=IntegerField()), 0)


class _TeamWithLoad(Protocol):
    """A Team of TeamWithLoadAdmin's queryset, annotated with its live counts."""

    running_now: int
    queued_now: int


admin.site.unregister(Team)


@admin.register(Team)
class TeamWithLoadAdmin(TeamAdmin):
    """Teams with their live executions: executions extends the teams' admin (teams, below it,
    knows nothing of executions)."""

    list_display = [*TeamAdmin.list_display, "running", "queued", paused]
    actions = TEAM_PAUSE_ACTIONS

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        return (
            super()
            .get_queryset(request)
            .annotate(running_now=_live_count(*SLOT_HOLDING), queued_now=_live_count(Status.QUEUED))
        )

    @admin.display(description="running now", ordering="running_now")
    def running(self, team: _TeamWithLoad) -> int:
        return team.running_now

    @admin.display(description="queued now", ordering="queued_now")
    def queued(self, team: _TeamWithLoad) -> int:
        return team.queued_now
