"""A workflow's YAML as it is shown (API, admin, dashboard): the value of every `secret` key (a
webhook trigger's HMAC secret) replaced, wherever the document spells it (quoted, block,
anchored); and the way back, for a form that saves what it showed. An execution's JSON values
(inputs, trigger, step outputs) as the dashboard shows them: every credential-named key's value
replaced (docs/operations.md, The dashboard's execution page)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import yaml

from workflows.schema import SchemaError, WorkflowInvalid

PLACEHOLDER = "[redacted]"
REDACTED = f"'{PLACEHOLDER}'"
# The keys of a JSON value whose values are shown as the placeholder: what names a credential.
_CREDENTIAL_KEY = re.compile(
    r"secret|passw(or)?d|token|api[-_]?key|authorization|cookie|credential|private[-_]?key",
    re.IGNORECASE,
)
# What a value's span holds besides the value: its anchor and tag before it (an alias elsewhere
# still needs the anchor), the line breaks a block scalar ends with after it.
_AROUND_VALUE = re.compile(r"((?:[&!]\S*\s+)*).*?(\s*)", re.DOTALL)

# (the trigger's mapping, its `secret` value): an anchored value is one node, so once.
_Secret = tuple[yaml.MappingNode, yaml.Node]


def content_redacted(content: str) -> str:
    secrets = _secrets(yaml.compose(content, Loader=yaml.SafeLoader))
    return _replaced(content, {value: REDACTED for _, value in secrets})


def json_redacted(value: object) -> object:
    """`value` with the value of every key that names a credential replaced, at any depth."""
    if isinstance(value, dict):
        return {
            key: PLACEHOLDER if _CREDENTIAL_KEY.search(str(key)) else json_redacted(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [json_redacted(item) for item in value]
    return value


def content_secrets_restored(content: str, *, previous: Callable[[str], str | None]) -> str:
    """`content` with every secret still written as the placeholder set back to the secret of
    the webhook trigger of the same path in `previous(name)`, the current YAML of the team's
    workflow of that name (None when there is none). A placeholder with no secret to stand for
    is a WorkflowInvalid; a document that is not YAML is left to the validator."""
    if PLACEHOLDER not in content:
        return content
    try:
        root = yaml.compose(content, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return content
    placeholders = [
        (trigger, value)
        for trigger, value in _secrets(root)
        if isinstance(value, yaml.ScalarNode) and value.value == PLACEHOLDER
    ]
    if not placeholders:
        return content
    previous_content = previous(_scalar(root, "name") or "")
    known = {
        _scalar(trigger, "path"): value.value
        for trigger, value in _secrets(yaml.compose(previous_content or "", yaml.SafeLoader))
        if isinstance(value, yaml.ScalarNode)
    }
    missing = [
        SchemaError(
            "triggers.secret",
            f"{REDACTED} stands for a stored secret, and trigger {_scalar(trigger, 'path')!r} "
            "of this workflow has none: write the secret",
            value.start_mark.line + 1,
        )
        for trigger, value in placeholders
        if known.get(_scalar(trigger, "path")) is None
    ]
    if missing:
        raise WorkflowInvalid(missing)
    # A JSON string is a YAML double-quoted scalar.
    return _replaced(
        content,
        {value: json.dumps(known[_scalar(trigger, "path")]) for trigger, value in placeholders},
    )


def _replaced(content: str, values: dict[yaml.Node, str]) -> str:
    """`content` with the text of each node replaced, keeping its anchor and tag."""
    spans = sorted(
        ((node.start_mark.index, node.end_mark.index, text) for node, text in values.items()),
        reverse=True,
    )
    for start, end, text in spans:
        around = _AROUND_VALUE.fullmatch(content[start:end])
        assert around is not None  # every string matches
        content = content[:start] + around[1] + text + around[2] + content[end:]
    return content


def _scalar(mapping: yaml.Node | None, key: str) -> str | None:
    if isinstance(mapping, yaml.MappingNode):
        for k, value in mapping.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return value.value if isinstance(value, yaml.ScalarNode) else None
    return None


def _secrets(root: yaml.Node | None) -> list[_Secret]:
    """The `secret` keys' values with the mapping each is in; an anchored value once."""
    secrets: dict[int, _Secret] = {}
    seen: set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == "secret":
                    secrets.setdefault(id(value), (node, value))
                else:
                    stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return list(secrets.values())
