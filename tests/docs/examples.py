"""The examples of README.md and docs/*.md, and how an example's output is compared with the docs.

Fenced blocks:
- ```console: commands, each a line `$ command` (a line ending in `\\` continues on the next),
  followed by what it prints (standard output and standard error together, as a terminal shows
  them). The command must exit 0, unless its line ends with the comment `# exit N`.
- ```yaml or ```text whose first line is `# file: <name>`: written as <name> in the directory the
  page's commands run in (the repository's examples/ is there too), for a command to use.
- Anything else (```text, ```yaml without `# file:`) is shown, never run.

An output is compared by its shape, not its ids or times. Both sides are normalised first:
- an API key (`mk_` and 64 hex digits) reads `<key>`; an ISO-8601 time or an HTTP date `<time>`;
  a number of seconds or milliseconds (`56 s`, `8 ms`, `2.5s`), a `Retry-After` or a
  `Content-Length` value `<n>`.
- An id (a UUID) stands for whatever id the real run printed in its place; the first time a
  docs id is met, the real one is remembered: later commands run with it (for the docs id or
  its first 8 characters), and later outputs must show it there (an idempotent retry returns the
  original execution).
- `…` in an expected line matches any text in that line; a line that is only `…` matches any
  number of lines.
- After `curl -i` (an expected output beginning `HTTP/`), the status line must match, and each
  header the docs show must be among the real ones, in any order (the docs leave most out).
Trailing white space and carriage returns are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
FILE_HEADER = re.compile(r"# file: (\S+)\n")
EXIT = re.compile(r"#\s*exit (\d+)\s*$")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PLACEHOLDERS = [
    (re.compile(r"mk_[0-9a-f]{64}"), "<key>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT"), "<time>"),
    (re.compile(r"(?i)\b(retry-after|content-length): \d+"), r"\1: <n>"),
    (re.compile(r"\b\d+(\.\d+)? ?(ms|s)\b"), r"<n> \2"),
]


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text()) if lang == language]


def files(page: Path) -> dict[str, str]:
    """The blocks of a page to be written as files, by name."""
    found = {}
    for lang, body in FENCE.findall(page.read_text()):
        header = FILE_HEADER.match(body)
        if lang in {"yaml", "text"} and header:
            found[header[1]] = body
    return found


@dataclass
class Example:
    command: str
    expected: str
    status: int
    line: int  # where the command is in its page, for the failure message


def examples(page: Path) -> list[Example]:
    """Every command of the page's ```console blocks, in order."""
    text = page.read_text()
    found: list[Example] = []
    for match in FENCE.finditer(text):
        if match[1] != "console":
            continue
        first_line = text.count("\n", 0, match.start(2)) + 1
        lines = match[2].splitlines()
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                raise ValueError(f"{page.name}:{first_line + i}: output before any `$ command`")
            start = i
            command = lines[i][2:]
            while command.endswith("\\"):
                i += 1
                command += "\n" + lines[i]
            i += 1
            output = []
            while i < len(lines) and not lines[i].startswith("$ "):
                output.append(lines[i])
                i += 1
            status = int(exit_comment[1]) if (exit_comment := EXIT.search(command)) else 0
            found.append(Example(command, "\n".join(output), status, first_line + start))
    return found


def normalise(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r", "").splitlines()]
    text = "\n".join(lines).strip("\n")
    for pattern, placeholder in PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    return text


@dataclass
class Ids:
    """The ids of the docs and the real ones they stand for."""

    real: dict[str, str] = field(default_factory=dict)

    def command(self, command: str) -> str:
        """The command with the real ids in place of the docs' (whole, or their first 8)."""
        for docs, real in self.real.items():
            command = command.replace(docs, real).replace(docs[:8], real[:8])
        return command

    def pattern(self, expected_line: str, groups: dict[str, str]) -> str:
        """A regex of one normalised expected line: `…` any text, a known id itself, a new id a
        group that captures the real one."""
        parts = []
        for piece in re.split(f"({UUID.pattern})", expected_line):
            if not UUID.fullmatch(piece):
                parts.append(".*?".join(re.escape(part) for part in piece.split("…")))
            elif piece in self.real:
                parts.append(re.escape(self.real[piece]))
            elif piece in groups.values():
                name = next(name for name, docs in groups.items() if docs == piece)
                parts.append(f"(?P={name})")
            else:
                name = f"id{len(groups)}"
                groups[name] = piece
                parts.append(f"(?P<{name}>{UUID.pattern})")
        return "".join(parts)

    def match(self, expected: str, actual: str) -> bool:
        """Whether the real output has the docs' shape; on a match, remember the new ids."""
        expected, actual = normalise(expected), normalise(actual)
        if expected.startswith("HTTP/"):
            return self._match_http(expected, actual)
        return self._match_lines(expected, actual)

    def _match_lines(self, expected: str, actual: str) -> bool:
        groups: dict[str, str] = {}  # a regex group's name: the docs id it captures
        patterns = [
            r"(?:.*\n)*?" if line.strip() == "…" else self.pattern(line, groups) + r"\n"
            for line in expected.splitlines()
        ]
        found = re.fullmatch("".join(patterns), actual + "\n" if actual else "")
        if found is None:
            return False
        self.real.update({docs: found[name] for name, docs in groups.items()})
        return True

    def _match_http(self, expected: str, actual: str) -> bool:
        expected_head, _, expected_body = expected.partition("\n\n")
        actual_head, _, actual_body = actual.partition("\n\n")
        status, *headers = expected_head.splitlines()
        actual_status, *actual_headers = actual_head.splitlines()
        if not self._match_lines(status, actual_status):
            return False
        for header in headers:
            if not any(self._match_lines(header, real) for real in actual_headers):
                return False
        return self._match_lines(expected_body, actual_body)
