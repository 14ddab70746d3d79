"""A workflow's YAML as it is shown (API, admin): the value of every `secret` key (a webhook
trigger's HMAC secret) replaced, wherever the document spells it (quoted, block, anchored)."""

from __future__ import annotations

import re

import yaml

REDACTED = "'[redacted]'"
# What a value's span holds besides the value: its anchor and tag before it (an alias elsewhere
# still needs the anchor), the line breaks a block scalar ends with after it.
_AROUND_VALUE = re.compile(r"((?:[&!]\S*\s+)*).*?(\s*)", re.DOTALL)


def content_redacted(content: str) -> str:
    spans = sorted(_secret_spans(yaml.compose(content, Loader=yaml.SafeLoader)), reverse=True)
    for start, end in spans:
        around = _AROUND_VALUE.fullmatch(content[start:end])
        assert around is not None  # every string matches
        content = content[:start] + around[1] + REDACTED + around[2] + content[end:]
    return content


def _secret_spans(root: yaml.Node | None) -> set[tuple[int, int]]:
    """Where the values of `secret` keys are in the text: an anchored value is one node, so
    its span is the anchor's, once."""
    spans: set[tuple[int, int]] = set()
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
                    spans.add((value.start_mark.index, value.end_mark.index))
                else:
                    stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return spans
