"""A bounded property-based fuzz of the OpenAPI document against a live server.

Schemathesis (its CLI, every phase: coverage, fuzzing, stateful; every check) generates
requests from ``/api/pai/openapi.json`` and checks each response: never a 5xx, the status
documented for the operation, the documented content type and response schema, negative
data rejected, positive data accepted, deleted resources gone, created ones reachable. The
run is deterministic (``--generation-deterministic``, a fixed number of cases per operation)
so CI does not flake, and it runs against the suite's database (PostgreSQL on that pass).

One caller identity for the whole run: the session cookie and CSRF token of a real
browser session, so created threads stay reachable for the stateful phase.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pai_threads.models import Run
from tests.support.realtime import server_fixture
from tests.support.server import DaphneServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CASES_PER_OPERATION = 5

ALL_CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "use_after_free",
    "ensure_resource_availability",
    "ignored_auth",
    "object_level_authorization",
)

# Every check on (here, not with --checks=all, which would override the per-operation
# settings below). Then what the document cannot say, per operation: which requests are
# valid depends on stored state the fuzzer cannot know, so schema-valid data may also get
# these statuses.
CONFIG = (
    "[checks]\n"
    + "".join(f"{check}.enabled = true\n" for check in ALL_CHECKS)
    + """
# Page tokens are opaque and signed: only tokens the API returned are accepted (422).
[[operations]]
include-name = "GET /api/pai/threads"
checks.positive_data_acceptance.expected-statuses = ["2xx", "404", "422"]

[[operations]]
include-name = "GET /api/pai/threads/{thread_id}/messages"
checks.positive_data_acceptance.expected-statuses = ["2xx", "404", "422"]

# An attachment part must name a stored file; a message id names one message per thread;
# "reject" refuses input while a run is active (409).
[[operations]]
include-name = "POST /api/pai/threads/{thread_id}/messages"
checks.positive_data_acceptance.expected-statuses = ["2xx", "404", "409", "422"]

# Regenerating needs a user message in the thread and no active run.
[[operations]]
include-name = "POST /api/pai/threads/{thread_id}/regenerate"
checks.positive_data_acceptance.expected-statuses = ["2xx", "404", "409", "422"]

# The bytes must be of the declared media type (signatures, UTF-8 text). In the stateful
# phase, an inferred link fills `threadId` of a negative multipart case with a real id after
# the mutation, so the case sent is valid: negative data is checked in the other phases.
[[operations]]
include-name = "POST /api/pai/files"
checks.positive_data_acceptance.expected-statuses = ["2xx", "404", "415", "422"]
phases.stateful.checks.negative_data_rejection.enabled = false

# The last message must be a valid user message, or the tool approvals of an assistant one.
[[operations]]
include-name = "POST /api/pai/ai-sdk/chat"
checks.positive_data_acceptance.expected-statuses = ["2xx", "404", "409", "422"]
"""
)


server = server_fixture("api-fuzz")


def browser_session(server: DaphneServer) -> tuple[str, str]:
    """A session cookie and its CSRF token, as a browser that opened the chat page has."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        token = client.get("/api/pai/session").json()["csrfToken"]
        created = client.post("/api/pai/threads", json={}, headers={"X-CSRFToken": token})
        assert created.status_code == 201, created.text
        cookie = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
    return cookie, token


def schemathesis(
    server: DaphneServer, workdir: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    cookie, token = browser_session(server)
    config = workdir / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "run",
        f"{server.url}/api/pai/openapi.json",
        f"--max-examples={CASES_PER_OPERATION}",
        "--generation-deterministic",
        "--generation-with-security-parameters=false",
        "--workers=1",
        "--request-timeout=20",
        "--no-color",
        f"--header=Cookie: {cookie}",
        f"--header=X-CSRFToken: {token}",
        *args,
    ]
    return subprocess.run(
        command, cwd=workdir, capture_output=True, text=True, timeout=600, check=False
    )


def settle() -> None:
    """Wait for the runs the fuzz started (the server executes them) before the test's
    database is flushed under them; waiting runs are idle."""
    deadline = time.monotonic() + 60
    while Run.objects.filter(status__in=(Run.Status.QUEUED, Run.Status.RUNNING)).exists():
        assert time.monotonic() < deadline, "runs the fuzz started are still running"
        time.sleep(0.1)


def assert_clean(result: subprocess.CompletedProcess[str], server: DaphneServer) -> None:
    settle()
    report = result.stdout[result.stdout.find("FAILURES") :][:30000] + result.stderr[-5000:]
    errors = [line for line in server.log_text().splitlines() if " ERROR " in line]
    assert result.returncode == 0, f"{report}\n--- server errors ---\n" + "\n".join(errors[-50:])
    assert "❌" not in result.stdout and " failure" not in result.stdout, report


def test_the_openapi_document_holds_under_every_check(server: DaphneServer, tmp_path: Path) -> None:
    """Every phase and check; no NUL in generated strings: the document says text must not
    contain it (and the next test sends it anyway)."""
    result = schemathesis(server, tmp_path, "--generation-allow-x00=false")
    assert_clean(result, server)


def test_nul_and_every_other_string_never_get_a_server_error(
    server: DaphneServer, tmp_path: Path
) -> None:
    """Strings with NUL characters anywhere (path, query, bodies, form fields): typed 4xx
    answers in the documented shape, never a 5xx (PostgreSQL refuses NUL in text)."""
    checks = ",".join(ALL_CHECKS[:5])  # the response checks: no 5xx, documented answers
    result = schemathesis(
        server,
        tmp_path,
        f"--checks={checks}",
        "--generation-allow-x00=true",
        "--phases=coverage,fuzzing",
    )
    assert_clean(result, server)
