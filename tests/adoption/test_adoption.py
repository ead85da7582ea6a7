"""Adoption: PAI's wheel in a fresh virtualenv and a fresh ``startproject``, set up with exactly
the blocks the README marks, works on Django 5.2 and 6.1.

It proves what a new user needs: ``manage.py check`` is clean, ``pai_chat`` answers with the
offline model, and under ``runserver`` (daphne) the static client is served, a websocket gets
a snapshot and then the streamed answer to a message sent through the HTTP API, and the admin
lists PAI's models. One wheel is built per run; each Django line gets its own virtualenv.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.apps import apps
from django.contrib import admin

from tests.adoption.conftest import README, Adopted
from tests.adoption.project import REPO_ROOT, Say
from tests.adoption.readme import commands, marked_blocks
from tests.support.realtime import recv, recv_until
from tests.support.server import Browser

pytestmark = [pytest.mark.adoption, pytest.mark.slow]

ADMIN_PASSWORD = "adoption-test-password"


def question_and_answer(blocks: dict[str, str]) -> tuple[str, str]:
    """The README's ``pai_chat "..."`` question and the answer it shows (its last line)."""
    (chat,) = [c for c in commands(blocks["commands"]) if c.argv[0] == "pai_chat"]
    return chat.argv[-1], chat.expected[-1]


def in_order(expected: list[str], output: str) -> bool:
    lines = iter(line.rstrip() for line in output.splitlines())
    return all(any(line == want for line in lines) for want in expected)


def test_quickstart_repeats_the_readme_blocks() -> None:
    """docs/quickstart.md shows the same adoption blocks, marked the same way."""
    quickstart = marked_blocks(REPO_ROOT / "docs" / "quickstart.md")
    assert quickstart == marked_blocks(README)


def test_readme_commands_print_what_the_readme_shows(adopted: Adopted) -> None:
    """migrate, check and pai_chat, as the README runs them: the offline model uses the
    tool and answers, with no API key anywhere."""
    for command, output in adopted.ran:
        assert in_order(command.expected, output), (
            f"Django {adopted.line}: manage.py {' '.join(command.argv)} printed\n{output}\n"
            f"but the README shows\n" + "\n".join(command.expected)
        )


def test_check_reports_nothing_not_even_a_warning(adopted: Adopted) -> None:
    """The README's blocks are complete: not one PAI finding, warnings included."""
    (output,) = [out for command, out in adopted.ran if command.argv[0] == "check"]
    assert "System check identified no issues (0 silenced)." in output, output
    assert "pai." not in output


def registered_pai_models() -> list[str]:
    config = apps.get_app_config("pai_threads")
    return [m._meta.model_name for m in config.get_models() if admin.site.is_registered(m)]


async def test_runserver_serves_client_websocket_and_admin(
    adopted: Adopted, blocks: dict[str, str], tmp_path: Path, say: Say
) -> None:
    """Under ``manage.py runserver`` (daphne first in INSTALLED_APPS): the static client,
    the chat page, offline API docs, typed errors for a malformed upload, a websocket that
    gets a snapshot and then the streamed answer to a message sent over HTTP, and the admin
    index listing PAI's models."""
    project = adopted.project
    project.manage(
        "createsuperuser",
        "--noinput",
        "--username",
        "admin",
        "--email",
        "admin@example.com",
        env={"DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD},
    )
    question, answer = question_and_answer(blocks)
    log = tmp_path / "runserver.log"
    say(f"django{adopted.line}: manage.py runserver")
    with project.runserver(log) as site:
        assert "ASGI/Daphne" in site.log_text(), site.log_text()
        async with Browser(site) as browser:
            await static_files_and_pages(browser.http)
            await malformed_upload_gets_a_typed_error(browser)
            say(f"django{adopted.line}: websocket snapshot, then the answer streamed")
            text, run = await websocket_answer(browser, question)
            await admin_index(site.url)
    assert text == answer
    assert run["status"] == "completed"


async def static_files_and_pages(http: httpx.AsyncClient) -> None:
    client = await http.get("/static/pai/client.js")
    assert client.status_code == 200
    assert client.content == (REPO_ROOT / "pai_threads/static/pai/client.js").read_bytes()
    page = await http.get("/chat/")
    assert page.status_code == 200
    scripts = re.findall(r'src="(/static/pai/[^"]+)"', page.text)
    assert scripts, page.text
    for script in scripts:
        assert (await http.get(script)).status_code == 200, script
    docs = await http.get("/api/pai/docs")
    assert docs.status_code == 200
    local = re.findall(r'src="(/static/ninja/[^"]+)"', docs.text)
    assert local, f"the API docs load Swagger UI from elsewhere:\n{docs.text}"
    for asset in local:
        assert (await http.get(asset)).status_code == 200, asset


async def malformed_upload_gets_a_typed_error(browser: Browser) -> None:
    """pai_threads.asgi leaves bodies to Django under daphne: a multipart body without a
    boundary gets the API's JSON error, not Twisted's bare 400."""
    response = await browser.http.post(
        "/api/pai/runs/run_missing/cancel",
        content=b"x",
        headers={"Content-Type": "multipart/form-data", "X-CSRFToken": browser.csrf},
    )
    assert 400 <= response.status_code < 500, response.text
    assert set(response.json()["error"]) >= {"code", "message"}, response.text


async def websocket_answer(browser: Browser, question: str) -> tuple[str, dict[str, Any]]:
    """Connect, then send over HTTP; the text streamed for the run, and its final status."""
    thread_id = await browser.create_thread("support")
    async with browser.websocket(thread_id) as ws:
        snapshot = await recv(ws)
        assert snapshot["type"] == "snapshot"
        assert snapshot["state"]["thread"]["id"] == thread_id
        await recv_until(ws, lambda f: f["type"] == "synced")
        sent = await browser.send(thread_id, question)
        run_id = sent["run"]["id"]
        frames = await recv_until(
            ws,
            lambda f: (
                f["type"] == "run.status"
                and f["runId"] == run_id
                and f["status"] not in ("queued", "running")
            ),
        )
    chunks = [f["chunk"] for f in frames if f["type"] == "generation.message.chunk"]
    tools = [c for c in chunks if c["type"] == "tool-output-available"]
    assert len(tools) == 1, json.dumps(chunks)
    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    return text, frames[-1]


async def admin_index(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        login = await http.get("/admin/login/?next=/admin/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
        assert token, login.text
        form = {
            "username": "admin",
            "password": ADMIN_PASSWORD,
            "csrfmiddlewaretoken": token[1],
            "next": "/admin/",
        }
        done = await http.post("/admin/login/?next=/admin/", data=form)
        assert done.status_code == 302, done.text
        index = await http.get("/admin/")
    assert index.status_code == 200
    models = registered_pai_models()
    assert models
    for model in models:
        assert f'href="/admin/pai_threads/{model}/"' in index.text, model
