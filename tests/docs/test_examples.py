"""Every example of README.md and docs/*.md runs as written (tests/docs/examples.py says how they
are read and compared).

Each page's ```console examples run in order, in a shell, against a real `mantle serve` (web and
workers) that the test starts on a fresh database with the demo seeded (`mantle seed-demo`), under
the shipped mantle.yaml: `mantle` is on PATH, `$MANTLE_KEY` is an API key of the `demo` team and
`localhost:8000` reaches the server. Every ```yaml workflow (a mapping with `name` and `steps`)
must validate."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from teams.models import Team
from teams.services import api_key_create
from tests.docs.examples import FENCE, ROOT, Ids, blocks, examples, files, pages
from tests.processes import Server
from workflows.schema import WorkflowInvalid, parse_workflow

DEFAULT_ADDRESS = re.compile(r"\b(localhost|127\.0\.0\.1):8000\b")
COMMAND_TIMEOUT = 120


def _workflows() -> list[tuple[str, str]]:
    found = []
    for page in pages():
        for body in blocks(page, "yaml"):
            document = yaml.safe_load(body)
            if isinstance(document, dict) and {"name", "steps"} <= document.keys():
                found.append((f"{page.relative_to(ROOT)}: {document['name']}", body))
    return found


@pytest.mark.parametrize(("where", "body"), _workflows(), ids=[w for w, _ in _workflows()])
def test_every_workflow_shown_validates(where: str, body: str) -> None:
    try:
        parse_workflow(body)
    except WorkflowInvalid as invalid:
        pytest.fail(f"{where} does not validate:\n" + "\n".join(map(str, invalid.errors)))


def test_the_pages_have_examples_to_run() -> None:
    """The harness reads the fences as the docs write them: a parser that found nothing would
    pass every page."""
    assert len(examples(ROOT / "README.md")) >= 10
    assert files(ROOT / "docs" / "limits.md")


LINK = re.compile(r"\]\(([^)\s]+)\)|src=\"([^\"]+)\"")


def _anchors(page: Path) -> set[str]:
    """GitHub's ids of a page's headings."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text()), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", pages(), ids=[p.name for p in pages()])
def test_every_link_to_a_file_or_heading_resolves(page: Path) -> None:
    broken = []
    for link in (a or b for a, b in LINK.findall(FENCE.sub("", page.read_text()))):
        if re.match(r"\w+:", link):
            continue  # http:, https:, mailto:
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists() or (anchor and anchor not in _anchors(path)):
            broken.append(link)
    assert not broken, f"{page.name}: {broken}"


RUNNABLE = [page for page in pages() if examples(page)]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_every_console_example_runs_as_written(
    page: Path, serve: Callable[..., Server], test_database_url: str, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "MANTLE_CONFIG": str(ROOT / "mantle.yaml"),
        "MANTLE_HOME": str(tmp_path / "home"),  # the serve's too
        "DATABASE_URL": test_database_url,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "CURL_HOME": str(tmp_path),  # its .curlrc: no progress meter, as on a terminal
    }
    (tmp_path / ".curlrc").write_text("silent\nshow-error\n")
    seeded = subprocess.run(
        ["mantle", "seed-demo"], env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT
    )
    assert seeded.returncode == 0, seeded.stdout + seeded.stderr
    server = serve(web_only=False, env={"MANTLE_CONFIG": env["MANTLE_CONFIG"]})
    _, env["MANTLE_KEY"] = api_key_create(team=Team.objects.get(slug="demo"), name="docs")
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "examples").symlink_to(ROOT / "examples")
    for name, body in files(page).items():
        (workdir / name).write_text(body)

    ids = Ids()
    for example in examples(page):
        command = DEFAULT_ADDRESS.sub(server.url[7:], ids.command(example.command))
        ran = subprocess.run(
            ["bash", "-c", command],
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        where = f"{page.relative_to(ROOT)}:{example.line}: $ {example.command}"
        assert ran.returncode == example.status, f"{where}\nexit {ran.returncode}:\n{ran.stdout}"
        assert ids.match(example.expected, ran.stdout), (
            f"{where}\nexpected:\n{example.expected}\nactual:\n{ran.stdout}"
        )
