"""`GET /api/v1/queues`: the team's limit and live counts, per workflow."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import TeamApi
from executions.selectors import team_queues


class WorkflowQueueOutput(serializers.Serializer):
    name = serializers.CharField()
    max_parallel_executions = serializers.IntegerField()
    on_limit = serializers.CharField()
    running = serializers.IntegerField()
    queued = serializers.IntegerField()
    oldest_queued_at = serializers.DateTimeField(allow_null=True)


class QueuesApi(TeamApi):
    class QueuesOutput(serializers.Serializer):
        team = serializers.CharField(source="team.slug")
        limit = serializers.IntegerField()
        running = serializers.IntegerField()
        queued = serializers.IntegerField()
        workflows = WorkflowQueueOutput(many=True)

    @extend_schema(operation_id="get_queues", responses={200: QueuesOutput})
    def get(self, request: Request) -> Response:
        return Response(self.QueuesOutput(team_queues(team=self.team)).data)
