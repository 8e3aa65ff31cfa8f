from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inference", "0006_background_run_celery_task"),
    ]

    operations = [
        migrations.AddField(
            model_name="prediction",
            name="source",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
