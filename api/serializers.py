"""Output (and shared input) serializers of the HTTP API. Times are RFC 3339 in UTC."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from executions.models import BlockedBy, Execution, Status, StepExecution
from executions.services.admission import blocked_by_name


class StepOutput(serializers.Serializer):
    """A step; a waiting one (docs/limits.md, Step scope) says what it waits for: blocked_by
    "limit" or "rate", and its name."""

    name = serializers.CharField()
    fanout_index = serializers.IntegerField(allow_null=True)
    status = serializers.CharField()
    attempt = serializers.IntegerField()
    output = serializers.JSONField(allow_null=True)
    error = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    blocked_by = serializers.SerializerMethodField()
    blocked_by_name = serializers.SerializerMethodField()

    # context["blocked_by"]: selectors.steps_blocked_by of the steps shown.
    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_blocked_by(self, step: StepExecution) -> str | None:
        return self.context["blocked_by"].get(step.id, (None, None))[0]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_blocked_by_name(self, step: StepExecution) -> str | None:
        return self.context["blocked_by"].get(step.id, (None, None))[1]


class ExecutionOutput(serializers.Serializer):
    """An execution; context["queue_positions"] (selectors.execution_queue_positions) places the
    queued ones, context["replays"] (selectors.execution_replays) lists their replays."""

    id = serializers.UUIDField()
    workflow = serializers.CharField(source="workflow.name")
    version = serializers.IntegerField(source="version.number")
    status = serializers.ChoiceField(choices=Status.choices)
    inputs = serializers.DictField()
    forced = serializers.BooleanField()
    trigger = serializers.DictField()
    created_at = serializers.DateTimeField()
    queued_at = serializers.DateTimeField(allow_null=True)
    promoted_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    run_at = serializers.DateTimeField(allow_null=True, help_text="a delayed run's time")
    queue_position = serializers.SerializerMethodField()
    blocked_by = serializers.CharField(allow_null=True)
    blocked_by_name = serializers.SerializerMethodField()
    concurrency_key = serializers.SerializerMethodField()
    priority = serializers.IntegerField()
    error = serializers.CharField()
    replay_of = serializers.UUIDField(
        source="replay_of_id", allow_null=True, help_text="the execution it replays"
    )
    replays = serializers.SerializerMethodField()
    reused_steps = serializers.IntegerField(help_text="completed steps copied from replay_of")

    @extend_schema_field(serializers.ListField(child=serializers.UUIDField()))
    def get_replays(self, execution: Execution) -> list[str]:
        return [str(replay) for replay in self.context["replays"].get(execution.id, [])]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_queue_position(self, execution: Execution) -> int | None:
        return self.context["queue_positions"].get(execution.id)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_blocked_by_name(self, execution: Execution) -> str | None:
        return blocked_by_name(execution)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_concurrency_key(self, execution: Execution) -> str | None:
        return execution.concurrency_key or None


class StepPageOutput(serializers.Serializer):
    steps = StepOutput(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class ExecutionDetailOutput(ExecutionOutput):
    """An execution with its step counts and the first page of its steps: context["steps"] is a
    StepPageOutput's data, context["step_counts"] the counts by status."""

    step_counts = serializers.SerializerMethodField()
    steps = serializers.SerializerMethodField()
    steps_next_cursor = serializers.SerializerMethodField()

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_step_counts(self, execution: Execution) -> dict[str, int]:
        return self.context["step_counts"]

    @extend_schema_field(StepOutput(many=True))
    def get_steps(self, execution: Execution) -> list[dict[str, object]]:
        return self.context["steps"]["steps"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_steps_next_cursor(self, execution: Execution) -> str | None:
        return self.context["steps"]["next_cursor"]


class AdmissionOutput(serializers.Serializer):
    """An Admission: the 202 of a run or a webhook, and the 200 of an idempotent retry."""

    execution_id = serializers.UUIDField(source="execution.id")
    workflow = serializers.CharField(source="execution.workflow.name")
    version = serializers.IntegerField(source="execution.version.number")
    status = serializers.ChoiceField(choices=Status.choices)
    queue_position = serializers.IntegerField(allow_null=True)
    blocked_by = serializers.CharField(allow_null=True)
    blocked_by_name = serializers.CharField(allow_null=True)
    concurrency_key = serializers.CharField(allow_null=True, source="execution.concurrency_key")
    priority = serializers.IntegerField(source="execution.priority")
    warnings = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="present when inputs were given that the workflow does not declare (kept)",
    )


class ErrorOutput(serializers.Serializer):
    error = serializers.CharField()
    detail = serializers.CharField()


class ConcurrencyLimitOutput(ErrorOutput):
    scope = serializers.ChoiceField(choices=[*BlockedBy.choices, ("queue_full", "Queue full")])
    limit = serializers.IntegerField()
    name = serializers.CharField(required=False, help_text='the named limit, scope "limit"')
