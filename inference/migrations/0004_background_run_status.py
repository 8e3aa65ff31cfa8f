"""BackgroundRun takes the one vocabulary of background runs (background.models.RunStatus): its
``state`` field is now ``status``, like every run's, and a run that did its work is ``finished``
(it was ``done``; the job page and admin say "finished" now)."""

from django.db import migrations, models

RENAMED = {"done": "finished"}


def forwards(apps, schema_editor):
    BackgroundRun = apps.get_model("inference", "BackgroundRun")
    for old, new in RENAMED.items():
        BackgroundRun.objects.filter(status=old).update(status=new)


def backwards(apps, schema_editor):
    BackgroundRun = apps.get_model("inference", "BackgroundRun")
    for old, new in RENAMED.items():
        BackgroundRun.objects.filter(status=new).update(status=old)


class Migration(migrations.Migration):
    dependencies = [
        ("inference", "0003_prediction_json_repairs"),
    ]

    operations = [
        migrations.RenameField(
            model_name="backgroundrun",
            old_name="state",
            new_name="status",
        ),
        # The column's indexes follow it in PostgreSQL; the migration state is told, then they take
        # the field's name.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="backgroundrun", name="run_state_heartbeat_idx"),
                migrations.RemoveIndex(model_name="backgroundrun", name="run_job_state_idx"),
                migrations.AddIndex(
                    model_name="backgroundrun",
                    index=models.Index(fields=["status", "heartbeat_at"], name="run_state_heartbeat_idx"),
                ),
                migrations.AddIndex(
                    model_name="backgroundrun", index=models.Index(fields=["job", "status"], name="run_job_state_idx")
                ),
            ]
        ),
        migrations.RenameIndex(
            model_name="backgroundrun",
            new_name="run_status_heartbeat_idx",
            old_name="run_state_heartbeat_idx",
        ),
        migrations.RenameIndex(
            model_name="backgroundrun",
            new_name="run_job_status_idx",
            old_name="run_job_state_idx",
        ),
        migrations.AlterField(
            model_name="backgroundrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("finished", "Finished"),
                    ("refused", "Refused (nothing written)"),
                    ("failed", "Failed"),
                ],
                default="queued",
                max_length=20,
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
