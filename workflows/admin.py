"""Workflows in the admin: versions are read-only once saved; a new version is uploaded as YAML
through workflows.services.workflow_apply, which validates it and reports errors by line."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from core.admin import ReadOnlyAdminMixin, ReadOnlyTabularInline
from teams.models import Team
from workflows.models import WorkflowDefinition, WorkflowVersion
from workflows.redaction import content_redacted, content_secrets_restored
from workflows.schema import WorkflowInvalid
from workflows.services import workflow_apply


class UploadVersionForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.all())
    content = forms.CharField(
        label="Workflow YAML",
        required=False,
        widget=forms.Textarea(attrs={"rows": 24, "cols": 90, "spellcheck": "false"}),
    )
    file = forms.FileField(label="or a YAML file", required=False)

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        upload = cleaned.get("file")
        if upload is not None:
            try:
                cleaned["content"] = upload.read().decode()
            except UnicodeDecodeError:
                self.add_error("file", "The file is not UTF-8 text.")
        if not cleaned.get("content", "").strip() and not self.errors:
            self.add_error("content", "Paste the workflow's YAML or choose a file.")
        return cleaned


class VersionInline(ReadOnlyTabularInline):
    model = WorkflowVersion
    fields = ["number", "max_parallel_executions", "on_limit", "created_at"]
    show_change_link = True


@admin.register(WorkflowDefinition)
class WorkflowDefinitionAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "version", "max_parallel_executions", "on_limit", "created_at"]
    list_filter = ["team", "current_version__on_limit"]
    list_select_related = ["team", "current_version"]
    search_fields = ["name", "team__slug"]
    fields = readonly_fields = ("team", "name", "current_version", "created_at")
    inlines = [VersionInline]

    @admin.display(description="version", ordering="current_version__number")
    def version(self, workflow: WorkflowDefinition) -> int | None:
        return workflow.current_version.number if workflow.current_version else None

    @admin.display(description="max parallel executions")
    def max_parallel_executions(self, workflow: WorkflowDefinition) -> str:
        limit = workflow.current_version.max_parallel_executions if workflow.current_version else 0
        return str(limit or "unlimited")

    @admin.display(description="on limit")
    def on_limit(self, workflow: WorkflowDefinition) -> str:
        return workflow.current_version.on_limit if workflow.current_version else ""

    def get_urls(self) -> list[URLPattern]:
        upload = path(
            "upload/",
            self.admin_site.admin_view(self.upload_view),
            name="workflows_workflowdefinition_upload",
        )
        return [upload, *super().get_urls()]

    def add_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return redirect("admin:workflows_workflowdefinition_upload")

    def upload_view(self, request: HttpRequest) -> HttpResponse:
        """Validate and store a YAML document as a new version (or a new workflow)."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = UploadVersionForm(request.POST or None, request.FILES or None)
        if request.method == "GET" and "workflow" in request.GET:
            form = UploadVersionForm(initial=self._initial_from(request.GET["workflow"]))
        if request.method == "POST" and form.is_valid():
            team = form.cleaned_data["team"]
            try:
                content = content_secrets_restored(
                    form.cleaned_data["content"],
                    previous=lambda name: self._current_content(team, name),
                )
                applied = workflow_apply(team=team, content=content)
            except WorkflowInvalid as invalid:
                for error in invalid.errors:
                    form.add_error("content", str(error))
            else:
                if applied.changed:
                    messages.success(
                        request, f"Saved {applied.workflow} version {applied.version.number}."
                    )
                else:
                    messages.info(request, f"{applied.workflow} is unchanged: no new version.")
                url = reverse(
                    "admin:workflows_workflowdefinition_change", args=[applied.workflow.pk]
                )
                return HttpResponseRedirect(url)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Upload a workflow version",
            "form": form,
        }
        return TemplateResponse(request, "admin/workflows/upload.html", context)

    def _initial_from(self, workflow_id: str) -> dict[str, Any]:
        if not workflow_id.isdigit():
            return {}
        workflow = (
            WorkflowDefinition.objects.select_related("current_version")
            .filter(pk=workflow_id)
            .first()
        )
        if workflow is None or workflow.current_version is None:
            return {}
        # Redacted as everywhere: on save, a secret still written as the placeholder keeps the
        # secret of the current version's trigger of the same path.
        content = content_redacted(workflow.current_version.content)
        return {"team": workflow.team_id, "content": content}

    @staticmethod
    def _current_content(team: Team, name: str) -> str | None:
        workflow = (
            WorkflowDefinition.objects.select_related("current_version")
            .filter(team=team, name=name)
            .first()
        )
        if workflow is None or workflow.current_version is None:
            return None
        return workflow.current_version.content


@admin.register(WorkflowVersion)
class WorkflowVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["workflow", "number", "max_parallel_executions", "on_limit", "created_at"]
    list_filter = ["workflow__team", "on_limit"]
    list_select_related = ["workflow__team"]
    fields = readonly_fields = (
        "workflow",
        "number",
        "max_parallel_executions",
        "on_limit",
        "content_hash",
        "created_at",
        "yaml",
    )

    @admin.display(description="YAML")
    def yaml(self, version: WorkflowVersion) -> str:
        content = content_redacted(version.content)
        return format_html('<pre style="margin:0;white-space:pre-wrap">{}</pre>', content)
