from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0021_crowd_account_per_study"),
    ]

    operations = [
        migrations.AddField(
            model_name="annotation",
            name="aggregate_raters",
            field=models.PositiveSmallIntegerField(
                blank=True,
                help_text="Imported means of this many raters (null: one rater's own annotation).",
                null=True,
            ),
        ),
        migrations.AddConstraint(
            model_name="annotation",
            constraint=models.CheckConstraint(
                condition=models.Q(("aggregate_raters__isnull", True))
                | models.Q(("aggregate_raters__gte", 2), ("annotator__isnull", True), ("source", "import")),
                name="annotation_aggregate_imported_of_raters",
            ),
        ),
    ]
