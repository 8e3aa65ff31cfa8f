import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0019_project_settings_help_lease"),
        ("inference", "0007_prediction_source"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelendpoint",
            name="project",
            field=models.ForeignKey(
                blank=True,
                help_text="Empty: a shared endpoint, offered to every project.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="endpoints",
                to="annotation.project",
            ),
        ),
        migrations.AlterField(
            model_name="modelendpoint",
            name="name",
            field=models.CharField(max_length=200),
        ),
        migrations.AddConstraint(
            model_name="modelendpoint",
            constraint=models.UniqueConstraint(
                condition=models.Q(("project__isnull", True)), fields=("name",), name="endpoint_shared_name_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="modelendpoint",
            constraint=models.UniqueConstraint(fields=("project", "name"), name="endpoint_project_name_unique"),
        ),
    ]
