"""`GET /api/v1/queues`: the team's limit and live counts, per workflow, with its busiest keys."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import TeamApi
from executions.selectors import TeamQueues, WorkflowQueue, team_queues, teams_busiest_keys


class KeyQueueOutput(serializers.Serializer):
    key = serializers.CharField()
    running = serializers.IntegerField()
    queued = serializers.IntegerField()
    oldest_queued_at = serializers.DateTimeField(allow_null=True)


class WorkflowQueueOutput(serializers.Serializer):
    """context["keys"]: teams_busiest_keys."""

    name = serializers.CharField()
    max_parallel_executions = serializers.IntegerField()
    on_limit = serializers.CharField()
    max_parallel_per_key = serializers.IntegerField()
    running = serializers.IntegerField()
    queued = serializers.IntegerField()
    oldest_queued_at = serializers.DateTimeField(allow_null=True)
    paused = serializers.SerializerMethodField()
    paused_by = serializers.CharField(
        allow_null=True, help_text="the pause holding its newcomers: team, workflow or limit"
    )
    busiest_keys = serializers.SerializerMethodField()

    def get_paused(self, workflow: WorkflowQueue) -> bool:
        return workflow.paused_by is not None

    @extend_schema_field(KeyQueueOutput(many=True))
    def get_busiest_keys(self, workflow: WorkflowQueue) -> Any:
        return KeyQueueOutput(self.context["keys"].get(workflow.id, []), many=True).data


class QueuesApi(TeamApi):
    class QueuesOutput(serializers.Serializer):
        team = serializers.CharField(source="team.slug")
        limit = serializers.IntegerField()
        paused = serializers.SerializerMethodField()
        running = serializers.IntegerField()
        queued = serializers.IntegerField()
        workflows = WorkflowQueueOutput(many=True)

        def get_paused(self, queues: TeamQueues) -> bool:
            return queues.team.paused_at is not None

    @extend_schema(operation_id="get_queues", responses={200: QueuesOutput})
    def get(self, request: Request) -> Response:
        keys = teams_busiest_keys(teams=[self.team])
        return Response(self.QueuesOutput(team_queues(team=self.team), context={"keys": keys}).data)
