"""Fewer index entries per run write (issue 16, W2's WAL per run).

- ``Message``: the unique (run, step_index) rule covers every message (NULL step indexes
  never collide), so it also serves lookups by run and ``pai_msg_run`` goes.
- ``Run``: ``pai_run_status_lease`` indexes only queued and running runs, what the sweeper
  and the recovery look for; the row version that ends a run adds no entry.
- ``Thread.id``: the ``varchar_pattern_ops`` twin of the primary key PostgreSQL gets from
  Django (thread ids are never LIKE-matched), found by introspection as in 0008.
"""

from django.db import migrations, models


def _pattern_twins(schema_editor, table, column):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return [
        name
        for name, info in constraints.items()
        if info["columns"] == [column]
        and info["index"]
        and not info["unique"]
        and not info["primary_key"]
        and name.endswith("_like")
    ]


def drop_thread_id_twin(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in _pattern_twins(schema_editor, "pai_threads_thread", "id"):
        schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def create_thread_id_twin(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    if not _pattern_twins(schema_editor, "pai_threads_thread", "id"):
        schema_editor.execute(
            'CREATE INDEX "pai_threads_thread_id_like" ON "pai_threads_thread" '
            '("id" varchar_pattern_ops)'
        )


class Migration(migrations.Migration):
    dependencies = [("pai_threads", "0013_action_episodes")]

    operations = [
        migrations.RemoveConstraint(model_name="message", name="pai_one_message_per_step"),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                fields=("run", "step_index"), name="pai_one_message_per_step"
            ),
        ),
        migrations.RemoveIndex(model_name="message", name="pai_msg_run"),
        migrations.RemoveIndex(model_name="run", name="pai_run_status_lease"),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("status__in", ["queued", "running"])),
                fields=["status", "lease_expires_at"],
                name="pai_run_status_lease",
            ),
        ),
        migrations.RunPython(drop_thread_id_twin, create_thread_id_twin),
    ]
