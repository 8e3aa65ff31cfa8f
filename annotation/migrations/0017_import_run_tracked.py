"""ImportRun is a background run like any other (background.models.TrackedRun): the same status
values and labels as every run (the stored values do not change), and a ``reason`` that says why
the watchdog re-queued or failed it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0016_import_progress"),
    ]

    operations = [
        migrations.AddField(
            model_name="importrun",
            name="reason",
            field=models.TextField(blank=True),
        ),
        migrations.AlterField(
            model_name="importrun",
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
    ]
