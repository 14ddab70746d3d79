"""Text from the database printed on a terminal (docs/hostile-input.md, Terminal output).

A step's error, an input or a key is whatever a caller sent: printed raw, a newline forges a line
of output and an escape sequence rewrites the terminal (its title, the screen, a link). Stored
text is printed through `printable`, which spells every control character out; the `mantle`
script's streams also pass through `TerminalSafe`, which spells out what `printable` did not
see, keeping only the newlines and tabs of Mantle's own output."""

from __future__ import annotations

import re
from typing import Any, TextIO

# C0 and C1 controls, DEL, and the bidirectional overrides that reorder what a line shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_BUT_LAYOUT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _spelled(match: re.Match[str]) -> str:
    char = match[0]
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object) -> str:
    """`text` on one line, every control character spelled out (`\\n`, `\\x1b`, `\\u202e`)."""
    return _CONTROL.sub(_spelled, str(text))


class TerminalSafe:
    """A text stream that spells out control characters other than newline and tab."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_CONTROL_BUT_LAYOUT.sub(_spelled, text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
