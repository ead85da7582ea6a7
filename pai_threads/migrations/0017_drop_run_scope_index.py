"""Three index entries fewer per run (issue 16, W2's WAL per run): every run row version
(insert, claim, end) wrote one into ``pai_run_scope`` (scope_key, id), which only the
per-scope budget check read. That check now reaches a scope's runs through its threads
(``pai_thread_scope_recent``, then ``pai_run_thread_created``): a run takes its thread's
scope_key.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('pai_threads', '0016_drop_message_transcript_index'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='run',
            name='pai_run_scope',
        ),
    ]
