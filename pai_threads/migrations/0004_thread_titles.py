# Thread title records (AD-041..AD-049).

from django.db import migrations, models


def mark_existing_titles_manual(apps, schema_editor):
    """Titles stored before title records existed were set by people or applications:
    they become manual, so automatic generation never replaces them (AD-045)."""
    Thread = apps.get_model('pai_threads', 'Thread')
    Thread.objects.exclude(title='').update(title_source='manual')


class Migration(migrations.Migration):

    dependencies = [
        ('pai_threads', '0003_message_invariants_rewrite_delivery'),
    ]

    operations = [
        migrations.AddField(
            model_name='thread',
            name='title_generated_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='thread',
            name='title_messages',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='thread',
            name='title_runs',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='thread',
            name='title_source',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
        migrations.RunPython(mark_existing_titles_manual, migrations.RunPython.noop),
    ]
