"""Statements built once per vendor say exactly what the ORM compiles (issue 16).

The claim, the fencing UPDATE, inserts, a message's parts update and the lease's ``EXISTS``
are built from cached text and values prepared field by field; here they are compared with
Django's own compilers for every kind of change the store makes, on the database under test.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.translation import gettext_lazy

from pai_agents.engine.store import Lease
from pai_threads import services
from pai_threads.conf import pai_settings
from pai_threads.identity import Identity
from pai_threads.models import Message, Run, RunAttempt, Step, Thread
from pai_threads.store import thread_store
from pai_threads.store.claims import claim_returning
from pai_threads.store.context_reads import context_messages, messages_of_context_json
from pai_threads.store.inserts import compiled_insert_sql, insert_sql
from pai_threads.store.rows import active_run, scoped_thread
from pai_threads.store.sql import (
    claim_update_sql,
    fenced_update_sql,
    held_exists_sql,
    held_runs,
    lease_expired,
    model_fields,
    new_instance,
    parts_update_sql,
    returned_instance,
    update_sql,
)
from pai_threads.store.thread_store import ORMThreadStore

LEASE = Lease(run_id="run_prebuilt", owner="w", token=7, thread_id="thr_x", scope_key="s")
NOW = datetime(2026, 12, 2, 4, 30, tzinfo=UTC)

CHANGES: list[dict[str, Any]] = [
    {},
    {"step_count": 2},
    {"lease_expires_at": NOW},
    {
        "step_count": 2,
        "status": Run.Status.COMPLETED,
        "usage": {"inputTokens": 3, "outputTokens": 5},
        "error": None,
        "lease_owner": "",
        "lease_expires_at": None,
        "finished_at": NOW,
    },
    {"status": Run.Status.FAILED, "error": {"type": "X", "message": "nan?"}, "usage": {}},
]


def comparable(params: list[Any]) -> list[Any]:
    """Adapted JSON values (psycopg's Jsonb) compare by what they wrap."""
    return [getattr(p, "obj", p) for p in params]


def nulls_inlined(sql: str, params: list[Any]) -> tuple[str, list[Any]]:
    """The statement with each ``None`` parameter written as ``NULL``: Django 5.2 compiles a
    ``None`` update value so, Django 6 as a parameter (the same statement)."""
    pieces = sql.split("%s")
    out, kept = [pieces[0]], []
    for param, piece in zip(params, pieces[1:], strict=True):
        if param is None:
            out.append("NULL")
        else:
            out.append("%s")
            kept.append(param)
        out.append(piece)
    return "".join(out), kept


@pytest.mark.parametrize("changes", CHANGES, ids=lambda c: ",".join(c) or "lock only")
def test_the_fencing_update_is_the_statement_the_orm_compiles(changes: dict[str, Any]) -> None:
    orm_sql, orm_params = update_sql(held_runs(LEASE), changes or {"lease_token": F("lease_token")})
    sql, params = fenced_update_sql(LEASE, changes)
    orm_sql, orm_params = nulls_inlined(orm_sql, list(orm_params))
    assert sql == orm_sql
    assert comparable(params) == comparable(orm_params)


def test_an_expression_change_takes_the_orms_compiler() -> None:
    changes = {"attempt": F("attempt") + 1}
    assert fenced_update_sql(LEASE, changes) == update_sql(held_runs(LEASE), changes)


def test_the_lease_exists_is_the_orms_select_with_the_fencing_lock() -> None:
    query = held_runs(LEASE).order_by().values("pk").query
    orm_sql, orm_params = query.get_compiler(connection=connection).as_sql()
    if connection.features.has_select_for_update:
        orm_sql += " " + connection.ops.for_update_sql(no_key=True)
    sql, params = held_exists_sql(LEASE)
    assert sql == f"EXISTS ({orm_sql})"
    assert params == list(orm_params)


def test_the_claim_is_the_statement_the_orm_compiles() -> None:
    expires = NOW + timedelta(seconds=30)
    claimable = Run.objects.filter(Q(status=Run.Status.QUEUED) | lease_expired(NOW), id="run_c")
    changes = {
        "status": Run.Status.RUNNING,
        "lease_owner": "host:1:2",
        "lease_expires_at": expires,
        "lease_token": F("lease_token") + 1,
        "attempt": F("attempt") + 1,
        "started_at": Coalesce(F("started_at"), Value(NOW)),
    }
    orm_sql, orm_params = update_sql(claimable, changes)
    sql, params = claim_update_sql("run_c", owner="host:1:2", expires=expires, now=NOW)
    assert sql == orm_sql
    assert comparable(params) == comparable(orm_params)


def test_a_parts_update_is_the_statement_the_orm_compiles() -> None:
    parts = [{"type": "text", "text": "hi", "state": "done"}]
    rows = Message.objects.filter(run_id="run_p", message_id="msg_p")
    orm_sql, orm_params = update_sql(rows, {"parts": parts, "updated_at": NOW})
    sql, params = parts_update_sql("run_p", "msg_p", parts, NOW)
    assert sql == orm_sql
    assert comparable(params) == comparable(orm_params)


def inserted_rows() -> list[Any]:
    message = Message(
        message_id="msg_i",
        thread_id="thr_i",
        scope_key="s",
        run_id="run_i",
        role="assistant",
        parts=[{"type": "text", "text": "hé \\u2028", "state": "done"}],
        metadata={},
        producer=Message.Producer.MODEL,
        relation=Message.Relation.OUTPUT,
        step_index=1,
        usage={"inputTokens": 1},
        diagnostics={},
    )
    step = Step(
        run_id="run_i",
        index=1,
        request={"model": "m", "tools": []},
        usage={},
        finish_reason="stop",
        started_at=NOW,
        finished_at=NOW,
    )
    run = Run(
        id="run_i",
        thread_id="thr_i",
        scope_key="s",
        agent_name="a",
        identity={"user": 1},
        client_data={},
        lease_token=3,
        parent_run_id=None,
    )
    attempt = RunAttempt(run_id="run_i", number=2, worker="w", lease_token=3, claimed_at=NOW)
    return [message, step, run, attempt]


@pytest.mark.parametrize("index", [0, 1, 2, 3], ids=["message", "step", "run", "attempt"])
@pytest.mark.parametrize("shape", ["values", "from a CTE"])
def test_an_insert_is_the_statement_the_orm_compiles(
    index: int, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timezone, "now", lambda: NOW)  # the auto_now values both fill in
    options: dict[str, Any] = {}
    if shape == "from a CTE":
        options = {"source": "pai_fence", "columns": {"message_id": 'pai_message."id"'}}
        if index == 0:
            options = {"source": "pai_fence", "returning": model_fields(Message, ("id", "parts"))}
        if index > 1:
            options = {"source": "pai_fence"}
    sql, params = insert_sql(inserted_rows()[index], **options)
    orm_sql, orm_params = compiled_insert_sql(inserted_rows()[index], **options)
    assert sql == orm_sql
    assert comparable(params) == comparable(orm_params)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("step_index", "3"),  # an integer field given a string: int() by its field
        ("step_index", True),  # a flag where a number goes: 1, not a boolean parameter
        ("in_context", 1),  # a number where a flag goes
        ("role", gettext_lazy("assistant")),  # a lazy string: cast by its field
        ("producer", Message.Producer.MODEL),  # a choice (a str subclass)
        ("run_id", ""),  # an empty key: what its target field makes of it
    ],
)
def test_a_value_of_another_type_is_prepared_by_its_field(
    name: str, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strings, numbers and flags of their field's own type are passed through as they are
    (insert_sql's fast path); any other value is prepared by its field, as the ORM does."""
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    message = inserted_rows()[0]
    setattr(message, name, value)
    _, params = insert_sql(message)
    _, orm_params = compiled_insert_sql(message)
    assert comparable(params) == comparable(orm_params)
    field = Message._meta.get_field(name)
    position = [f.attname for f in Message._meta.local_concrete_fields if f.attname != "id"]
    prepared = params[position.index(field.attname)]
    assert prepared == field.get_db_prep_save(value, connection=connection)
    assert type(prepared) is type(field.get_db_prep_save(value, connection=connection))


def test_a_returned_row_is_an_instance_as_loaded_with_the_rest_deferred() -> None:
    values = {"id": "run_r", "thread_id": "thr_r", "status": "running", "usage": {"x": 1}}
    run = returned_instance(Run, values)
    assert type(run) is Run and run == Run(**values)
    assert (run.pk, run.thread_id, run.status, run.usage) == ("run_r", "thr_r", "running", {"x": 1})
    assert not run._state.adding and run._state.db == "default"  # as loaded: save() updates
    # A column the statement did not return is deferred (read on access), never a default.
    assert "agent_name" in run.get_deferred_fields()
    assert "thread_id" not in run.get_deferred_fields()


@pytest.mark.parametrize(
    ("model", "values"),
    [
        (Message, {"message_id": "m", "thread_id": "thr", "run_id": "run", "parts": []}),
        (Step, {"run_id": "run", "index": 1, "request": {"a": 1}, "started_at": NOW}),
        (Run, {"thread_id": "thr", "agent_name": "a"}),  # a callable default: the run's id
    ],
)
def test_a_new_instance_is_what_model_init_makes(model: type[Any], values: dict[str, Any]) -> None:
    """new_instance (the step commit's rows, without Model.__init__) gives every field what
    ``model(**values)`` gives it, callable defaults called anew for each instance."""
    fields = [f.attname for f in model._meta.concrete_fields if not f.generated]
    made, built, other = model(**values), new_instance(model, values), new_instance(model, values)
    assert built.get_deferred_fields() == made.get_deferred_fields()  # Run.active: computed
    for name in fields:
        if name == "id" and model is Run:  # a new id each time, of the same kind
            assert built.pk != other.pk and built.pk[:4] == made.pk[:4] == "run_"
            continue
        assert getattr(built, name) == getattr(made, name), name
    mutable = [n for n in fields if isinstance(getattr(built, n), dict | list) and n not in values]
    assert all(getattr(built, n) is not getattr(other, n) for n in mutable)
    assert built._state.adding and built._state.db is None  # new: save() inserts
    # A relation given by name (not attname) is left to Model.__init__.
    related = new_instance(Message, {"run": None, "message_id": "m"})
    assert related.run_id is None and related.message_id == "m"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("window", [None, 2])
def test_the_context_read_returns_what_the_orm_query_returns(window: int | None) -> None:
    identity = Identity(scope_key="prebuilt", data={})
    thread = services.create_thread(identity)
    kinds = [(True, "committed"), (False, "committed"), (True, "committed"), (True, "open")]
    for i, (in_context, status) in enumerate([*kinds, (True, "committed")]):
        Message.objects.create(
            message_id=f"msg_ctx_{i}",
            thread=thread,
            scope_key="prebuilt",
            role="assistant",
            parts=[{"type": "text", "text": f"é {i}"}],
            in_context=in_context,
            status=status,
        )
    rows = Message.objects.filter(thread=thread, in_context=True, status="committed")
    expected = [
        {"id": row["message_id"], "role": row["role"], "parts": row["parts"]}
        for row in rows.order_by("id").values("message_id", "role", "parts")
    ]
    if window:
        expected = expected[-window:]
    assert context_messages(thread.id, window) == expected


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("window", [None, 2])
def test_the_claim_returns_the_context_window_the_context_read_returns(
    window: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the claim statement also returns the thread's context window (one round
    trip fewer); the store hands it to the engine's first context read, which then reads
    nothing. Elsewhere the claim returns none and the store reads it after the claim."""
    identity = Identity(scope_key="prebuilt", data={})
    thread = services.create_thread(identity)
    other = services.create_thread(identity)
    for i, (owner, in_context, status) in enumerate(
        [
            (thread, True, "committed"),
            (thread, False, "committed"),
            (other, True, "committed"),
            (thread, True, "open"),
            (thread, True, "committed"),
            (thread, True, "committed"),
        ]
    ):
        Message.objects.create(
            message_id=f"msg_claim_ctx_{i}",
            thread=owner,
            scope_key="prebuilt",
            role="assistant" if i % 2 else "user",
            parts=[{"type": "text", "text": f"é {i} \u2028"}],
            in_context=in_context,
            status=status,
        )
    expected = context_messages(thread.id, window)
    assert [m["id"] for m in expected] == ["msg_claim_ctx_0", "msg_claim_ctx_4", "msg_claim_ctx_5"][
        -(window or 3) :
    ]
    run = Run.objects.create(thread=thread, scope_key="prebuilt", agent_name="a")
    claimed = claim_returning(
        run.id, owner="w", lease_seconds=60, with_context=True, context_window=window
    )
    assert claimed is not None and claimed.run.id == run.id
    postgres = connection.vendor == "postgresql"
    assert (claimed.context is not None) is postgres
    if postgres:
        assert messages_of_context_json(claimed.context) == expected

    # Through the store: the engine's first context read is the claim's, without a read.
    run = Run.objects.create(thread=other, scope_key="prebuilt", agent_name="a")
    Run.objects.filter(thread=thread).update(status="completed")
    monkeypatch.setattr(pai_settings, "CONTEXT_WINDOW_MESSAGES", window)
    store = ORMThreadStore(context_on_claim=lambda agent: True)
    with CaptureQueriesContext(connection) as queries:
        claim = store.claim_run_sync(run.id, owner="w", lease_seconds=60)
    sent = [q["sql"].lstrip() for q in queries.captured_queries]
    context_reads = [sql for sql in sent if sql.startswith("SELECT") and "in_context" in sql]
    assert len(context_reads) == (0 if postgres else 1)  # SQLite: read after the claim
    assert len(sent) == 1 or not postgres  # PostgreSQL: the claim's one statement
    read = []
    monkeypatch.setattr(thread_store, "context_messages", lambda *a: read.append(a) or [])
    context = asyncio.run(store.load_context(claim.lease))
    assert read == [] and context == context_messages(other.id, window)


@pytest.mark.django_db(transaction=True)
def test_a_scoped_thread_read_is_the_orms_row_and_never_another_scopes() -> None:
    thread = services.create_thread(Identity(scope_key="prebuilt", data={}))
    Thread.objects.filter(pk=thread.pk).update(metadata={"k": ["é", 1.5]}, title="T")
    expected = Thread.objects.get(pk=thread.pk)
    with CaptureQueriesContext(connection) as queries:
        got = scoped_thread(thread.pk, "prebuilt")
    assert got is not None and not got._state.adding
    # The primary key alone: with the scope in the WHERE clause too, PostgreSQL's generic
    # plan may walk pai_thread_scope_archived, every entry of the scope (seen in W1).
    (statement,) = [q["sql"] for q in queries.captured_queries]
    assert "scope_key" not in statement.partition(" WHERE ")[2]
    fields = [f.attname for f in Thread._meta.concrete_fields]
    assert [getattr(got, f) for f in fields] == [getattr(expected, f) for f in fields]
    assert scoped_thread(thread.pk, "another scope") is None


@pytest.mark.django_db(transaction=True)
def test_the_active_run_read_finds_what_the_orm_finds() -> None:
    thread = services.create_thread(Identity(scope_key="prebuilt", data={}))
    assert active_run(thread.pk) is None
    Run.objects.create(thread=thread, scope_key="prebuilt", agent_name="a", status="completed")
    assert active_run(thread.pk) is None
    waiting = Run.objects.create(
        thread=thread, scope_key="prebuilt", agent_name="a", status="waiting"
    )
    found = active_run(thread.pk)
    expected = Run.objects.active().filter(thread=thread).only("id", "status").first()
    assert found is not None and expected is not None
    assert (found.pk, found.status) == (expected.pk, expected.status) == (waiting.pk, "waiting")
    assert found.agent_name == "a"  # deferred fields load on access, as with .only()
