"""BackgroundRun.task becomes celery_task: the field holds the registered name of a Celery task,
and "task" names an annotator's Task only (docs/architecture.md, Glossary). A column rename: the
data stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("inference", "0005_job_protocol_choices_from_registry"),
    ]

    operations = [
        migrations.RenameField(model_name="backgroundrun", old_name="task", new_name="celery_task"),
    ]
