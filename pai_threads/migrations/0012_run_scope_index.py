# The per-scope budget and usage roll-ups (pai_threads.usage.budget) join a scope's runs
# to their steps: without this index every check scanned the whole run table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("pai_threads", "0011_run_initiator_command"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["scope_key", "id"], name="pai_run_scope"),
        ),
    ]
