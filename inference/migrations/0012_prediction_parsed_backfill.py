"""Fills the parsed columns (0011_prediction_parsed_columns) of the predictions stored before them,
in batches of ids, each batch its own transaction: no long lock, and a migration stopped part-way
goes on where it stopped (it touches only rows still empty). Setting a column makes the trigger of
0011 compute all four from the row's JSON. Until a row is filled the board reads its JSON, as before.
"""

from django.db import migrations, transaction

BATCH = 50_000  # prediction ids per transaction


def backfill(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(id), max(id) FROM inference_prediction WHERE answer_code IS NULL")
        low, high = cursor.fetchone()
    if low is None:
        return
    for start in range(low, high + 1, BATCH):
        with transaction.atomic(using=schema_editor.connection.alias), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE inference_prediction SET answer_code = NULL WHERE id BETWEEN %s AND %s AND answer_code IS NULL",
                [start, start + BATCH - 1],
            )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("inference", "0011_prediction_parsed_columns"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
