"""A workflow document read from YAML: plain Python values plus the line of every key and value.

The YAML is composed into nodes rather than loaded, so every error carries the line of the
offending key or value, and every error in a document is reported at once, sorted by line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import yaml
from django.conf import settings

_MAX_NODES = 100_000
_CONTAINER_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
# jsonb stores neither NUL nor lone UTF-16 surrogates, which YAML escapes can spell.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Kept as their text: dates and bytes are not JSON, and the spec is stored in a JSONField.
_TEXT_TAGS = frozenset({"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"})


@dataclass(frozen=True)
class SchemaError:
    path: str
    message: str
    line: int | None

    def __str__(self) -> str:
        parts = [f"line {self.line}"] if self.line is not None else []
        if self.path:
            parts.append(self.path)
        parts.append(self.message)
        return ": ".join(parts)


def by_line(problems: list[SchemaError]) -> list[SchemaError]:
    return sorted(problems, key=lambda problem: problem.line or 0)


class WorkflowInvalid(Exception):
    """Every error found in a workflow document, sorted by line."""

    def __init__(self, errors: list[SchemaError]) -> None:
        self.errors = by_line(errors)
        super().__init__("\n".join(str(error) for error in self.errors))

    def __reduce__(self) -> tuple[object, tuple[list[SchemaError]]]:
        return type(self), (self.errors,)


def document_read(text: str) -> Document:
    """Compose ``text`` into a Document; raise WorkflowInvalid when it is not YAML or empty."""
    try:
        # libyaml: PyYAML's own composer takes ~0.6 ms a step (20 s for a 1 MiB document).
        root = _compose(text, yaml.CSafeLoader)
    except yaml.YAMLError:
        # Not YAML to libyaml: PyYAML says what is wrong in the documented words (libyaml's
        # differ, and it gives up at 1,000 levels of nesting), as fast as it fails.
        try:
            root = _compose(text, yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            message = f"invalid YAML: {exc.problem or exc.context}"
            line = mark.line + 1 if mark is not None else None
            raise WorkflowInvalid([SchemaError(path="", message=message, line=line)]) from None
        except yaml.YAMLError as exc:
            raise WorkflowInvalid(
                [SchemaError(path="", message=f"invalid YAML: {exc}", line=None)]
            ) from None
    if root is None:
        raise WorkflowInvalid([SchemaError(path="", message="must be a mapping", line=1)])
    return Document(root)


def _compose(text: str, loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader]) -> yaml.Node | None:
    """Composers recurse once per level (PyYAML's hits RecursionError near 1,000), so the
    nesting is measured first, on the event stream, which neither parser makes recursively."""
    limit = settings.MANTLE.limits.document_depth
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                message = f"nested more than {limit} levels deep (limits.document_depth)"
                line = event.start_mark.line + 1 if event.start_mark is not None else None
                raise WorkflowInvalid([SchemaError(path="", message=message, line=line)])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return yaml.compose(text, Loader=loader)


class Document:
    """Plain Python values of a composed YAML document, with the line of every key and value.

    Lines are kept by path (``steps[2].timeout``) so validation can work on plain values.
    """

    def __init__(self, root: yaml.Node) -> None:
        self.errors: list[SchemaError] = []
        # What is accepted as upstream accepts it but likely a mistake (docs/workflows.md,
        # Warnings); `mantle validate --strict` makes them errors.
        self.warnings: list[SchemaError] = []
        self.value_lines: dict[str, int] = {}
        self.key_lines: dict[str, int] = {}
        self._constructor = yaml.SafeLoader("")
        self._reading: set[int] = set()  # ids of nodes being read: an alias may point back up
        self._merged: set[int] = set()  # ids of mappings already checked and flattened
        self._budget = _MAX_NODES
        self._depth_left = settings.MANTLE.limits.document_depth
        self.value = self._read(root, "")

    def error(self, path: str, message: str, *, at_key: bool = False) -> None:
        self.errors.append(self._at(path, message, at_key=at_key))

    def warning(self, path: str, message: str, *, at_key: bool = False) -> None:
        self.warnings.append(self._at(path, message, at_key=at_key))

    def _at(self, path: str, message: str, *, at_key: bool) -> SchemaError:
        if at_key:
            line = self.key_lines.get(path, self.value_lines.get(path))
        else:
            line = self.value_lines.get(path, self.key_lines.get(path))
        return SchemaError(path=path, message=message, line=line)

    def missing(self, parent: str, key: str) -> None:
        """A required key is absent: report it at the line where its mapping starts."""
        line = self.value_lines.get(parent)
        self.errors.append(SchemaError(path=join(parent, key), message="is required", line=line))

    def _read(self, node: yaml.Node, path: str) -> object:
        self.value_lines[path] = node.start_mark.line + 1
        # Aliases are expanded, so a few lines can stand for an exponential number of nodes.
        self._budget -= 1
        if self._budget == 0:
            self.error(path, f"the document expands to more than {_MAX_NODES} values")
        if self._budget <= 0:
            return None
        if id(node) in self._reading:
            self.error(path, "an alias may not refer to a node that contains it")
            return None
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            if node.tag not in _CONTAINER_TAGS:
                self.error(path, f"the tag {node.tag} is not supported: remove it")
                return None
            # Aliases nest too (`b: &b [*a]`), past what the text's own nesting shows.
            if self._depth_left == 0:
                limit = settings.MANTLE.limits.document_depth
                self.error(path, f"nested more than {limit} levels deep (limits.document_depth)")
                return None
            self._reading.add(id(node))
            self._depth_left -= 1
            try:
                if isinstance(node, yaml.MappingNode):
                    return self._read_mapping(node, path)
                return [self._read(child, index(path, i)) for i, child in enumerate(node.value)]
            finally:
                self._depth_left += 1
                self._reading.discard(id(node))
        if node.tag in _TEXT_TAGS:
            return node.value
        try:
            value = self._constructor.construct_object(node)
        except yaml.MarkedYAMLError as exc:
            self.error(path, str(exc.problem))
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.error(path, "must be a finite number")
        if isinstance(value, str) and _UNSTORABLE.search(value):
            self.error(path, "contains \\u0000 or a lone surrogate (\\ud800-\\udfff)")
        return value

    def _read_mapping(self, node: yaml.MappingNode, path: str) -> dict[str, object]:
        # Duplicates are judged on the keys as written: after "<<" merges are flattened in,
        # a key that overrides a merged one would look like a duplicate.
        if id(node) not in self._merged:
            self._check_mapping_keys(node, path)
            self._merged.add(id(node))
        result: dict[str, object] = {}
        for key_node, value_node in node.value:
            key = self._key(key_node)
            if key is None:
                continue
            child = join(path, key)
            self.key_lines[child] = key_node.start_mark.line + 1
            result[key] = self._read(value_node, child)
        return result

    def _check_mapping_keys(self, node: yaml.MappingNode, path: str) -> None:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self._key(key_node)
            line = key_node.start_mark.line + 1
            if key is None:
                message = "keys must be strings (quote the key)"
                self.errors.append(SchemaError(path=path, message=message, line=line))
            elif _UNSTORABLE.search(key):
                message = "keys may not contain \\u0000 or a lone surrogate (\\ud800-\\udfff)"
                self.errors.append(SchemaError(path=path, message=message, line=line))
            elif key in seen:
                message = f'duplicate key "{key}"'
                self.errors.append(SchemaError(path=join(path, key), message=message, line=line))
            else:
                seen.add(key)
        try:
            self._constructor.flatten_mapping(node)
        except yaml.MarkedYAMLError as exc:
            self.error(path, str(exc.problem))

    def _key(self, node: yaml.Node) -> str | None:
        if not isinstance(node, yaml.ScalarNode):
            return None
        try:
            key = self._constructor.construct_object(node)
        except yaml.MarkedYAMLError:
            return None
        return key if isinstance(key, str) else None


def join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def index(parent: str, i: int) -> str:
    return f"{parent}[{i}]"
