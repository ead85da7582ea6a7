"""One index entry fewer per message (issue 16, W2's WAL per run).

``pai_msg_transcript`` (thread, id) WHERE in_transcript duplicated ``pai_msg_thread_position``
(thread, id) for every message but the few hidden from the transcript (regenerated answers,
hook notes): transcript reads now walk the thread's position index and skip those.
``pai_msg_context`` stays: compaction hides all but a thread's newest messages from the
context, and its read must not walk past them.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('pai_threads', '0015_subagents'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='message',
            name='pai_msg_transcript',
        ),
    ]
