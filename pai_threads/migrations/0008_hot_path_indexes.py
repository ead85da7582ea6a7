"""Drop indexes that every run write paid for and no query uses (issue 16, W2's WAL).

- ``Run.thread``: its plain and ``varchar_pattern_ops`` indexes; ``pai_run_thread_created``
  (thread, created_at) leads with the column, and ``pai_one_active_run_per_thread`` stays.
- ``Step.run``: both; the unique (run, index) constraint leads with the column.
- ``Message.run``: both, replaced by one plain ``pai_msg_run`` (run ids are never matched
  with LIKE, which is all a ``varchar_pattern_ops`` index serves).
- ``Run.id``: the ``varchar_pattern_ops`` twin of the primary key, likewise.

By introspection, as in 0007: ``AlterField(db_index=False)`` on PostgreSQL drops every index
on exactly that column, unique partial ones (the one-active-run rule) included.
"""

import django.db.models.deletion
from django.db import migrations, models

DROPS = {
    "pai_threads_run": (["thread_id"], ["id"]),
    "pai_threads_step": (["run_id"],),
    "pai_threads_message": (["run_id"],),
}


def _plain_indexes(schema_editor, table, columns):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return [
        name
        for name, info in constraints.items()
        if info["columns"] == columns
        and info["index"]
        and not info["unique"]
        and not info["primary_key"]
        and not info.get("foreign_key")
        and name != "pai_msg_run"
    ]


def drop_indexes(apps, schema_editor):
    for table, column_sets in DROPS.items():
        for columns in column_sets:
            for name in _plain_indexes(schema_editor, table, columns):
                schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def create_indexes(apps, schema_editor):
    # Reversal: one plain index per foreign key again (not the pattern-ops twins).
    for table, column in (("pai_threads_run", "thread_id"), ("pai_threads_step", "run_id")):
        if not _plain_indexes(schema_editor, table, [column]):
            schema_editor.execute(
                f'CREATE INDEX "{table}_{column}_plain" ON "{table}" ("{column}")'
            )


class Migration(migrations.Migration):
    dependencies = [("pai_threads", "0007_message_thread_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="thread",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="runs",
                        to="pai_threads.thread",
                    ),
                ),
                migrations.AlterField(
                    model_name="step",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steps",
                        to="pai_threads.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="run",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="pai_threads.run",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_indexes, create_indexes)],
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(fields=["run"], name="pai_msg_run"),
        ),
    ]
