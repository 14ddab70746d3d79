"""The executions app's models: executions (execution.py), their steps (step.py), and what they
leave behind (records.py)."""

from executions.models.execution import (
    QUEUED_OR_HOLDING,
    SLOT_HOLDING,
    TERMINAL,
    BlockedBy,
    Execution,
    KeyTurn,
    Status,
)
from executions.models.records import BulkAction, BulkStatus, QueueSample, Rejection
from executions.models.step import StepExecution, StepStatus

__all__ = [
    "QUEUED_OR_HOLDING",
    "SLOT_HOLDING",
    "TERMINAL",
    "BlockedBy",
    "BulkAction",
    "BulkStatus",
    "Execution",
    "KeyTurn",
    "QueueSample",
    "Rejection",
    "Status",
    "StepExecution",
    "StepStatus",
]
