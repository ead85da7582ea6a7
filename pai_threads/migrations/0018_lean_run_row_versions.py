"""Fewer index entries and row locks per run (issue 16, W2's WAL per run).

* The active-run constraint names a database-computed ``active`` column (status queued,
  running or waiting) instead of ``status``: a claim (queued -> running) changes no indexed
  column, so PostgreSQL makes it a heap-only update, with no entry in any of the run's
  indexes. The sweeper's ``pai_run_status_lease`` goes: the sweeper and the recovery read
  the live runs through the active-run index's condition.
* A run's steps and attempts, and a step's message, refer to their parent without a
  database constraint: every statement writing one holds the parent already
  (pai_threads.models' docstring), and the check only added a row lock (WAL) to it.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pai_threads', '0017_drop_run_scope_index'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='run',
            name='pai_one_active_run_per_thread',
        ),
        migrations.RemoveIndex(
            model_name='run',
            name='pai_run_status_lease',
        ),
        migrations.AddField(
            model_name='run',
            name='active',
            field=models.GeneratedField(db_persist=True, expression=models.ExpressionWrapper(models.Q(('status__in', ['queued', 'running', 'waiting'])), output_field=models.BooleanField()), output_field=models.BooleanField()),
        ),
        migrations.AlterField(
            model_name='runattempt',
            name='run',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='attempts', to='pai_threads.run'),
        ),
        migrations.AlterField(
            model_name='step',
            name='message',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='pai_threads.message'),
        ),
        migrations.AlterField(
            model_name='step',
            name='run',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='pai_threads.run'),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.UniqueConstraint(condition=models.Q(('active', True)), fields=('thread',), name='pai_one_active_run_per_thread'),
        ),
    ]
