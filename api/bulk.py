"""Bulk actions (docs/api.md, Bulk actions): `POST /api/v1/executions/cancel` and
`/api/v1/executions/replay` with a filter, a dry run's count, and `GET /api/v1/bulk/<id>`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from api.base import TeamApi, json_object
from api.errors import ApiError
from api.replays import replay_options
from executions.models import BulkAction, Status
from executions.services.bulk import (
    CANCEL,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    REPLAY,
    BulkFilter,
    NotCancellableStatus,
    bulk_count,
    bulk_create,
)
from teams.models import Team
from workflows.models import WorkflowDefinition

FILTER_KEYS = ("workflow", "status", "concurrency_key", "created_after", "created_before")


def bulk_output(bulk: BulkAction) -> dict[str, Any]:
    return {
        "bulk_id": str(bulk.id),
        "action": bulk.action,
        "filter": bulk.filter,
        "options": bulk.options,
        "matched": bulk.matched,
        "done": bulk.done,
        "failed": bulk.failed,
        "errors": bulk.errors,
        "status": bulk.status,
        "created_at": bulk.created_at.isoformat() if bulk.created_at else None,
        "finished_at": bulk.finished_at.isoformat() if bulk.finished_at else None,
    }


def _text(where: dict[str, Any], key: str) -> str | None:
    value = where.get(key)
    if value is not None and (not isinstance(value, str) or len(value) > 200):
        raise ApiError(400, "invalid_filter", f"{key}: a string of at most 200 characters")
    return value


def _time(where: dict[str, Any], key: str) -> datetime | None:
    value = _text(where, key)
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise ApiError(400, "invalid_filter", f"{key}: an RFC 3339 time with its offset")
    return when


def parse_filter(team: Team, raw: object) -> BulkFilter:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ApiError(400, "invalid_filter", f"filter: an object of {list(FILTER_KEYS)}")
    unknown = sorted(set(raw) - set(FILTER_KEYS))
    if unknown:
        raise ApiError(400, "invalid_filter", f"unknown filter keys {unknown}")
    name, state = _text(raw, "workflow"), _text(raw, "status")
    if state is not None and state not in Status.values:
        raise ApiError(400, "invalid_filter", f"status: one of {Status.values}")
    workflow = None
    if name is not None:
        workflow = WorkflowDefinition.objects.filter(team=team, name=name).first()
        if workflow is None:
            raise ApiError(404, "workflow_not_found", f"no workflow {name!r}")
    return BulkFilter(
        workflow=workflow,
        status=state,
        concurrency_key=_text(raw, "concurrency_key"),
        created_after=_time(raw, "created_after"),
        created_before=_time(raw, "created_before"),
    )


def _limit(body: dict[str, Any]) -> int:
    limit = body.get("limit", DEFAULT_LIMIT)
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, "invalid_request", f"limit: an integer from 1 to {MAX_LIMIT}")
    return limit


BULK_REQUEST = inline_serializer(
    "BulkInput",
    {
        "filter": inline_serializer(
            "BulkFilter", {key: serializers.CharField(required=False) for key in FILTER_KEYS}
        ),
        "limit": serializers.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT),
        "dry_run": serializers.BooleanField(required=False),
        "version": serializers.ChoiceField(choices=["same", "latest"], required=False),
        "from": serializers.ChoiceField(choices=["start", "failed_step"], required=False),
    },
)
BULK_OUTPUT = inline_serializer(
    "BulkOutput",
    {
        "bulk_id": serializers.UUIDField(),
        "action": serializers.CharField(),
        "matched": serializers.IntegerField(),
        "done": serializers.IntegerField(),
        "failed": serializers.IntegerField(),
        "status": serializers.CharField(),
    },
)


class _BulkApi(TeamApi):
    action = CANCEL

    def post(self, request: Request) -> Response:
        body = json_object(request.body)
        common = {"filter", "limit", "dry_run"}
        if self.action == REPLAY:
            options = replay_options({k: v for k, v in body.items() if k not in common})
        elif unknown := sorted(set(body) - common):
            raise ApiError(400, "invalid_request", f"unknown keys {unknown}")
        else:
            options = {"version": "same", "from": "start"}
        dry_run = body.get("dry_run", False)
        if type(dry_run) is not bool:
            raise ApiError(400, "invalid_request", "dry_run: true or false")
        where = parse_filter(self.team, body.get("filter"))
        limit = _limit(body)
        try:
            if dry_run:
                matched = bulk_count(team=self.team, action=self.action, where=where, limit=limit)
                return Response({"matched": matched, "dry_run": True})
            bulk = bulk_create(
                team=self.team,
                action=self.action,
                where=where,
                limit=limit,
                version=options["version"],
                start=options["from"],
            )
        except NotCancellableStatus as exc:
            raise ApiError(400, "invalid_filter", str(exc)) from None
        return Response(
            bulk_output(bulk),
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": f"/api/v1/bulk/{bulk.id}"},
        )


class BulkCancelApi(_BulkApi):
    action = CANCEL

    @extend_schema(operation_id="bulk_cancel", request=BULK_REQUEST, responses={202: BULK_OUTPUT})
    def post(self, request: Request) -> Response:
        return super().post(request)


class BulkReplayApi(_BulkApi):
    action = REPLAY

    @extend_schema(operation_id="bulk_replay", request=BULK_REQUEST, responses={202: BULK_OUTPUT})
    def post(self, request: Request) -> Response:
        return super().post(request)


class BulkDetailApi(TeamApi):
    @extend_schema(operation_id="get_bulk_action", responses={200: BULK_OUTPUT})
    def get(self, request: Request, bulk_id: uuid.UUID) -> Response:
        bulk = BulkAction.objects.filter(team=self.team, id=bulk_id).first()
        if bulk is None:
            raise ApiError(404, "bulk_not_found", f"no bulk action {bulk_id}")
        return Response(bulk_output(bulk))
