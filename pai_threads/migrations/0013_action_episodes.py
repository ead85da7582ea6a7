# Declared tool suspensions (docs/suspensions.md): one tool call may suspend several times,
# one pending-action row per episode. Existing rows are episode 0 of their call; the new
# uniqueness (run, tool call, sequence) is added before the old per-call one is dropped, and
# at most one episode of a call may be pending at a time.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("pai_threads", "0012_run_scope_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="pendingaction",
            name="sequence",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="pendingaction",
            name="kind",
            field=models.CharField(
                choices=[("approval", "Approval"), ("client", "Client"), ("input", "Input")],
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="pendingaction",
            constraint=models.UniqueConstraint(
                fields=("run", "tool_call_id", "sequence"), name="pai_action_per_episode"
            ),
        ),
        migrations.AddConstraint(
            model_name="pendingaction",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status", "pending")),
                fields=("run", "tool_call_id"),
                name="pai_action_one_pending",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="pendingaction",
            name="pai_action_per_tool_call",
        ),
    ]
