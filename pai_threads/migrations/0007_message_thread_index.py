"""Drop the plain index Django made for ``Message.thread``: ``pai_msg_thread_position``
(thread, id) leads with the same column, so it only cost WAL on every message write.

Not an ``AlterField(db_index=False)`` on the database: on PostgreSQL that drops every index
introspection finds on exactly ``thread_id``, including the partial unique index
``pai_one_open_message`` (MF-043). This drops the one non-unique index on that column only.
"""

import django.db.models.deletion
from django.db import migrations, models

MODEL = "message"


def _plain_thread_indexes(schema_editor):
    connection = schema_editor.connection
    table = "pai_threads_message"
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return [
        name
        for name, info in constraints.items()
        if info["columns"] == ["thread_id"]
        and info["index"]
        and not info["unique"]
        and not info["primary_key"]
        and not info.get("foreign_key")
    ]


def drop_index(apps, schema_editor):
    for name in _plain_thread_indexes(schema_editor):
        schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def create_index(apps, schema_editor):
    if not _plain_thread_indexes(schema_editor):
        schema_editor.execute(
            'CREATE INDEX "pai_threads_message_thread_id_plain" ON "pai_threads_message" ("thread_id")'
        )


class Migration(migrations.Migration):
    dependencies = [("pai_threads", "0006_thread_archived")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name=MODEL,
                    name="thread",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="pai_threads.thread",
                    ),
                )
            ],
            database_operations=[migrations.RunPython(drop_index, create_index)],
        )
    ]
