from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from executions import api, hooks

api_v1 = [
    path("run/<str:workflow>", api.RunApi.as_view(), name="run"),
    path("executions", api.ExecutionListApi.as_view(), name="execution-list"),
    path(
        "executions/<uuid:execution_id>", api.ExecutionDetailApi.as_view(), name="execution-detail"
    ),
    path(
        "executions/<uuid:execution_id>/cancel",
        api.ExecutionCancelApi.as_view(),
        name="execution-cancel",
    ),
    path("workflows", api.WorkflowListApi.as_view(), name="workflow-list"),
    path("workflows/<str:name>", api.WorkflowApi.as_view(), name="workflow-detail"),
    path("queues", api.QueuesApi.as_view(), name="queues"),
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("hooks/<path:hook>", hooks.WebhookApi.as_view(), name="webhook"),
    path("healthz", api.HealthzApi.as_view(), name="healthz"),
    path("readyz", api.ReadyzApi.as_view(), name="readyz"),
    path("metrics", api.metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("", include("executions.dashboard_urls")),
]
