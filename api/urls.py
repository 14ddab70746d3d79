"""The API's routes: `/api/v1/…`, the webhooks, the probes and the Prometheus scrape."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from api import bulk, executions, health, hooks, limits, pauses, queues, rates, replays, workflows

api_v1 = [
    path("run/<str:workflow>", executions.RunApi.as_view(), name="run"),
    path("executions", executions.ExecutionListApi.as_view(), name="execution-list"),
    path(
        "executions/<uuid:execution_id>",
        executions.ExecutionDetailApi.as_view(),
        name="execution-detail",
    ),
    path(
        "executions/<uuid:execution_id>/steps",
        executions.ExecutionStepsApi.as_view(),
        name="execution-steps",
    ),
    path(
        "executions/<uuid:execution_id>/cancel",
        executions.ExecutionCancelApi.as_view(),
        name="execution-cancel",
    ),
    path("executions/cancel", bulk.BulkCancelApi.as_view(), name="bulk-cancel"),
    path("executions/replay", bulk.BulkReplayApi.as_view(), name="bulk-replay"),
    path("bulk/<uuid:bulk_id>", bulk.BulkDetailApi.as_view(), name="bulk-detail"),
    path(
        "executions/<uuid:execution_id>/replay",
        replays.ExecutionReplayApi.as_view(),
        name="execution-replay",
    ),
    path("workflows", workflows.WorkflowListApi.as_view(), name="workflow-list"),
    path("workflows/<str:name>", workflows.WorkflowApi.as_view(), name="workflow-detail"),
    path("workflows/<str:name>/pause", pauses.WorkflowPauseApi.as_view(), name="workflow-pause"),
    path("workflows/<str:name>/resume", pauses.WorkflowResumeApi.as_view(), name="workflow-resume"),
    path("teams/<str:slug>/pause", pauses.TeamPauseApi.as_view(), name="team-pause"),
    path("teams/<str:slug>/resume", pauses.TeamResumeApi.as_view(), name="team-resume"),
    path("limits/<str:name>/pause", pauses.LimitPauseApi.as_view(), name="limit-pause"),
    path("limits/<str:name>/resume", pauses.LimitResumeApi.as_view(), name="limit-resume"),
    path("queues", queues.QueuesApi.as_view(), name="queues"),
    path("limits", limits.LimitListApi.as_view(), name="limit-list"),
    path("limits/<str:name>", limits.LimitApi.as_view(), name="limit-detail"),
    path("rates/<str:name>", rates.RateSetApi.as_view(), name="rate-detail"),
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("hooks/<path:hook>", hooks.WebhookApi.as_view(), name="webhook"),
    path("healthz", health.HealthzApi.as_view(), name="healthz"),
    path("readyz", health.ReadyzApi.as_view(), name="readyz"),
    path("metrics", health.metrics_view, name="metrics"),
]
