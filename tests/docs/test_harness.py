"""The docs-examples harness compares shapes, not less: what it reads from a page, and outputs it
must refuse (tests/docs/examples.py)."""

from __future__ import annotations

from pathlib import Path

from tests.docs.examples import Ids, examples, files

A = "cc5b68e1-f30c-4e4a-ad51-99d58e9171c3"
B = "103eac91-4fcf-4fd2-b88e-0d12402bb446"
REAL_A = "0a5eacee-0397-4297-b7b5-91a5484dfab5"
REAL_B = "2c1c22ce-a278-4dc3-86a2-632aa003a0ed"

PAGE = """Intro.

```console
$ curl -i -X POST localhost:8000/api/v1/run/deploy \\
       -d '{}'
HTTP/1.1 202 Accepted
Location: /api/v1/executions/ID

{"execution_id":"ID","status":"pending"}
$ mantle run payments --team demo    # exit 3
CommandError: rejected
```

```text
# file: bad.yaml
name: bad
```

```text
$ not run
```
""".replace("ID", A)


def test_a_page_gives_its_commands_outputs_exit_statuses_and_files(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    first, second = examples(page)
    assert first.command.splitlines()[1].strip() == "-d '{}'"
    assert first.expected.startswith("HTTP/1.1 202 Accepted\nLocation:")
    assert (first.status, first.line) == (0, 4)
    assert (second.status, second.expected) == (3, "CommandError: rejected")
    assert files(page) == {"bad.yaml": "# file: bad.yaml\nname: bad\n"}


def test_ids_are_learnt_then_held_to() -> None:
    ids = Ids()
    assert ids.match(f"{A} pending", f"{REAL_A} pending")
    assert ids.command(f"mantle status {A}; mantle status {A[:8]}") == (
        f"mantle status {REAL_A}; mantle status {REAL_A[:8]}"
    )
    assert ids.match(f"{A} cancelled", f"{REAL_A} cancelled")
    assert not ids.match(f"{A} cancelled", f"{REAL_B} cancelled")  # not the original
    assert not ids.match(f"{B} superseded by {B}", f"{REAL_B} superseded by {REAL_A}")


def test_times_keys_and_durations_are_placeholders_but_words_and_counts_are_not() -> None:
    ids = Ids()
    assert ids.match(
        '{"at":"2026-12-02T14:47:00.860305Z","key":"mk_' + "a" * 64 + '"} retry in 56 s',
        '{"at":"2026-12-07T03:03:49.125705Z","key":"mk_' + "b" * 64 + '"} retry in 3 s',
    )
    assert not ids.match("queue position 1, blocked by key", "queue position 2, blocked by key")
    assert not ids.match("queue position 1, blocked by key", "queue position 1, blocked by rate")
    assert not ids.match("completed", "completed\nand more")


def test_ellipses_match_any_text_in_a_line_or_any_lines() -> None:
    ids = Ids()
    assert ids.match('{"status":…,"inputs":{}}', '{"status":"running","inputs":{}}')
    assert ids.match(
        "completed\n…\n  report  completed", "completed\n  a\n  b\n  report  completed"
    )
    assert not ids.match('{"status":…,"inputs":{}}', '{"status":"running","inputs":[]}')


def test_http_headers_shown_must_be_there_in_any_order() -> None:
    ids = Ids()
    actual = (
        "HTTP/1.1 429 Too Many Requests\r\nServer: gunicorn\r\nRetry-After: 54\r\n"
        "Content-Type: application/json\r\n\r\n{}"
    )
    assert ids.match("HTTP/1.1 429 Too Many Requests\nContent-Type: application/json\n\n{}", actual)
    assert ids.match("HTTP/1.1 429 Too Many Requests\nRetry-After: 60\n\n{}", actual)
    assert not ids.match("HTTP/1.1 202 Accepted\n\n{}", actual)
    assert not ids.match("HTTP/1.1 429 Too Many Requests\nLocation: /x\n\n{}", actual)
    assert not ids.match("HTTP/1.1 429 Too Many Requests\n\n[]", actual)
