"""The chat page attaches files: upload, send with the message, render the attachment part."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_chat_page import open_chat, send, thread_id_of
from tests.support.realtime import start_server
from tests.support.server import DaphneServer

pytestmark = [pytest.mark.slow]

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    media = tmp_path_factory.mktemp("media")
    yield from start_server(
        request, tmp_path_factory, None, "e2e-files", DJANGO_MEDIA_ROOT=str(media)
    )


def test_mf_014_attach_an_image_and_see_it_in_the_transcript(
    browser: Any, server: DaphneServer, shot: Any
) -> None:
    context, page = open_chat(browser, server)
    page.select_option("#agent", "slow")
    page.set_input_files("#attach", {"name": "dot.png", "mimeType": "image/png", "buffer": PNG})
    page.wait_for_selector("#attached:not([hidden])")
    send(page, "what is in this picture?")
    thread_id_of(page)

    image = page.locator("article.message.user a.attachment img.file-image")
    image.wait_for()
    page.wait_for_function(
        "document.querySelector('article.message.user a.attachment img').naturalWidth === 1"
    )
    assert image.get_attribute("alt") == "dot.png"
    page.wait_for_selector("#run-status[data-status=completed]")
    assert page.locator("#attached").is_hidden()
    shot(page, "attachments-01-image")
    assert page.errors == []
    context.close()
