# PAI-managed file attachments (MF-038..MF-040).

import django.db.models.deletion
import pai_threads.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('pai_threads', '0004_thread_titles'),
    ]

    operations = [
        migrations.CreateModel(
            name='File',
            fields=[
                ('id', models.CharField(default=pai_threads.models._file_id, editable=False, max_length=40, primary_key=True, serialize=False)),
                ('scope_key', models.CharField(max_length=200)),
                ('media_type', models.CharField(max_length=255)),
                ('filename', models.CharField(blank=True, default='', max_length=255)),
                ('byte_size', models.PositiveBigIntegerField()),
                ('sha256', models.CharField(max_length=64)),
                ('storage_name', models.CharField(max_length=500)),
                ('metadata', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('thread', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='files', to='pai_threads.thread')),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'indexes': [models.Index(fields=['scope_key', 'created_at'], name='pai_file_scope_recent')],
            },
        ),
    ]
