"""One index entry fewer per send (issue 16, W2's WAL per run): a send moves its thread's
``updated_at``, so the update is never HOT and every index of the thread table gets an
entry. ``pai_thread_scope_recent`` (scope_key, updated_at, id) duplicated
``pai_thread_scope_archived`` (scope_key, archived, updated_at, id) but for listing active
and archived threads together, which now merges the two ordered ranges of the latter
(``services.list_threads``); the budget check finds a scope's threads by its prefix.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('pai_threads', '0018_lean_run_row_versions'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='thread',
            name='pai_thread_scope_recent',
        ),
    ]
