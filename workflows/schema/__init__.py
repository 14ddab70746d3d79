"""Workflow documents: YAML → a validated WorkflowSpec, and the run-time check of inputs.

spec.py holds the dataclasses, document.py the line-tracking YAML reader, validate.py the
validator (values.py its typed reads), graph.py the cycle search, inputs.py the check of a run's
inputs.
"""

from workflows.schema.document import SchemaError, WorkflowInvalid
from workflows.schema.inputs import InvalidInputs, undeclared_given, validate_inputs
from workflows.schema.spec import InputSpec, RetrySpec, StepSpec, TriggerSpec, WorkflowSpec
from workflows.schema.validate import Validated, parse_workflow, validate_workflow

__all__ = [
    "InputSpec",
    "InvalidInputs",
    "RetrySpec",
    "SchemaError",
    "StepSpec",
    "TriggerSpec",
    "Validated",
    "WorkflowInvalid",
    "WorkflowSpec",
    "parse_workflow",
    "undeclared_given",
    "validate_inputs",
    "validate_workflow",
]
