"""The operators' dashboard at `/`: queues per team, refreshed in place every two seconds."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard.panels import dashboard_panels, team_ids_cancellable_by, teams_visible_to
from executions.models import Execution
from executions.services.lifecycle import ExecutionBusy, NotCancellable, execution_cancel

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


@require_POST
@login_required(login_url=LOGIN_URL)
def cancel(request: SignedInRequest, execution_id: uuid.UUID) -> HttpResponse:
    # 404 for what the user may not see; 403 for what they see but may not cancel.
    visible = Execution.objects.filter(team__in=teams_visible_to(user=request.user))
    execution = get_object_or_404(visible.select_related("workflow"), id=execution_id)
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
    return redirect("dashboard:index")
