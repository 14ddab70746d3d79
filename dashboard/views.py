"""The operators' dashboard at `/`: queues per team, refreshed in place every two seconds."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard.execution_page import execution_page
from dashboard.panels import dashboard_panels, team_ids_cancellable_by, teams_visible_to
from executions.models import TERMINAL, Execution
from executions.services.lifecycle import ExecutionBusy, NotCancellable, execution_cancel
from executions.services.pauses import limit_pause_set, team_pause_set, workflow_pause_set
from teams.models import NamedLimit, Team
from workflows.models import WorkflowDefinition

LOGIN_URL = "dashboard:login"


class SignedInRequest(HttpRequest):
    """The request of a view behind login_required."""

    user: User


def _render(request: SignedInRequest, template: str) -> HttpResponse:
    now = timezone.now()
    panels = dashboard_panels(teams=teams_visible_to(user=request.user), now=now)
    team_ids = [panel.team.id for panel in panels]
    cancellable = team_ids_cancellable_by(user=request.user, team_ids=team_ids)
    context = {"panels": panels, "now": now, "cancellable": cancellable}
    return render(request, template, context)


@require_GET
@login_required(login_url=LOGIN_URL)
def index(request: SignedInRequest) -> HttpResponse:
    return _render(request, "dashboard/index.html")


@require_GET
@login_required(login_url=LOGIN_URL)
def live(request: SignedInRequest) -> HttpResponse:
    """The part of the page that htmx swaps in on every poll."""
    return _render(request, "dashboard/_live.html")


def _visible_execution(request: SignedInRequest, execution_id: uuid.UUID) -> Execution:
    """404 for what the user may not see."""
    visible = Execution.objects.filter(team__in=teams_visible_to(user=request.user))
    related = visible.select_related("team", "workflow", "version")
    return get_object_or_404(related, id=execution_id)


@require_GET
@login_required(login_url=LOGIN_URL)
def execution(request: SignedInRequest, execution_id: uuid.UUID) -> HttpResponse:
    """One execution, read-only; a cancel button for who may cancel it."""
    shown = _visible_execution(request, execution_id)
    after = request.GET.get("after")
    if after is not None and not (after.isdigit() and int(after) < 2**63):
        return HttpResponseBadRequest("after: the id of the last step seen")
    context = {
        "page": execution_page(execution=shown, after=int(after) if after else None),
        "cancellable": bool(team_ids_cancellable_by(user=request.user, team_ids=[shown.team_id]))
        and shown.status not in TERMINAL,
    }
    return render(request, "dashboard/execution.html", context)


@require_POST
@login_required(login_url=LOGIN_URL)
def cancel(request: SignedInRequest, execution_id: uuid.UUID) -> HttpResponse:
    # 404 for what the user may not see; 403 for what they see but may not cancel.
    execution = _visible_execution(request, execution_id)
    if not team_ids_cancellable_by(user=request.user, team_ids=[execution.team_id]):
        raise PermissionDenied(f"{request.user} may not cancel executions of this team")
    label = f"{execution.workflow.name} {str(execution.id)[:8]}"
    try:
        execution_cancel(execution.id, reason=f"cancelled by {request.user} on the dashboard")
    except NotCancellable as refused:
        messages.warning(request, f"{label} was not cancelled: it is already {refused.status}.")
    except ExecutionBusy as busy:
        messages.warning(request, f"{label} was not cancelled: {busy}.")
    else:
        messages.success(request, f"Cancelled {label}.")
    if request.headers.get("HX-Request"):
        return _render(request, "dashboard/_live.html")
    if request.POST.get("from") == "execution":
        return redirect("dashboard:execution", execution.id)
    return redirect("dashboard:index")


@require_POST
@login_required(login_url=LOGIN_URL)
def pause(request: SignedInRequest, team_id: int) -> HttpResponse:
    """Pause or resume (POST `action`: pause | resume) the team, or one of its workflows or named
    limits (`workflow` or `limit`: its name), under the permission check of cancel: 404 for
    what the user may not see, 403 for what they see but may not cancel."""
    team = get_object_or_404(teams_visible_to(user=request.user), id=team_id)
    if not team_ids_cancellable_by(user=request.user, team_ids=[team.id]):
        raise PermissionDenied(f"{request.user} may not pause or resume this team's queues")
    paused = request.POST.get("action") == "pause"
    label = _paused_target(request, team, paused)
    messages.success(request, f"{'Paused' if paused else 'Resumed'} {label}.")
    if request.headers.get("HX-Request"):
        return _render(request, "dashboard/_live.html")
    return redirect("dashboard:index")


def _paused_target(request: SignedInRequest, team: Team, paused: bool) -> str:
    if name := request.POST.get("workflow"):
        workflow = get_object_or_404(WorkflowDefinition, team=team, name=name)
        workflow_pause_set(workflow=workflow, paused=paused)
        return f"workflow {name}"
    if name := request.POST.get("limit"):
        limit = get_object_or_404(NamedLimit, team=team, name=name)
        limit_pause_set(limit=limit, paused=paused)
        return f"named limit {name}"
    team_pause_set(team=team, paused=paused)
    return f"team {team.slug}"
