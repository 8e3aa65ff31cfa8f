"""What a cold board reads of each prediction, in plain columns (inference/models.py, Prediction):
the answer's letter code, the kind and value of log P(A) and the hash of the stored option order.

PostgreSQL computes them on every insert and update of a row (a BEFORE trigger), from the same
expressions evaluation/scoring/choice_answers.py evaluates on the JSON of a row not filled yet, so
every writer fills them and none can leave them stale: the ORM's inserts and upserts, COPY, raw
SQL, a re-scored answer. The columns are nullable: adding them rewrites nothing, and rows stored
before are filled by 0012_prediction_parsed_backfill in batches (until then they read as before).
"""

from django.db import migrations, models

# Kept in step with choice_answers.py: letter_code, _logprob_fields, _pass1_fields, _ORDER_HASH,
# FALSY_JSON and _TEXT_MAX (tests/evaluation/test_prediction_parsed_columns.py compares the two
# on every odd value both read).
FUNCTION = r"""
CREATE OR REPLACE FUNCTION inference_prediction_parsed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    at text := NEW.answer #>> '{}';
    la jsonb := NEW.logprobs -> 'A';
    ta text := NEW.logprobs ->> 'A';
    a_number boolean := jsonb_typeof(la) = 'number' AND length(ta) <= 300;
BEGIN
    NEW.answer_code := CASE WHEN NEW.status <> 'ok' THEN -1
        WHEN length(at) = 1 AND ascii(at) BETWEEN 65 AND 90 THEN ascii(at) - 65 ELSE -2 END;
    NEW.logprob_kind := CASE coalesce(jsonb_typeof(NEW.logprobs), 'null')
        WHEN 'null' THEN 0
        WHEN 'object' THEN CASE WHEN NEW.logprobs = '{}'::jsonb THEN 0
            WHEN la IS NULL OR la = 'null'::jsonb THEN 2 WHEN a_number THEN 1 ELSE 3 END
        ELSE CASE WHEN NEW.logprobs IN ('[]'::jsonb, '{}'::jsonb, '""'::jsonb, '0'::jsonb, 'false'::jsonb,
            'null'::jsonb) THEN 0 ELSE 3 END
    END;
    NEW.logprob_a := CASE WHEN a_number THEN ta::float8 ELSE 0 END;
    NEW.options_hash := coalesce(hashtextextended(NEW.options::text, 0), 0);
    RETURN NEW;
END
$$;
CREATE TRIGGER inference_prediction_parsed BEFORE INSERT OR UPDATE ON inference_prediction
    FOR EACH ROW EXECUTE FUNCTION inference_prediction_parsed();
"""

REVERSE = """
DROP TRIGGER IF EXISTS inference_prediction_parsed ON inference_prediction;
DROP FUNCTION IF EXISTS inference_prediction_parsed();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("inference", "0010_endpoint_prices_job_correct_answers"),
    ]

    operations = [
        migrations.AddField(
            model_name="prediction",
            name="answer_code",
            field=models.SmallIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="prediction",
            name="logprob_kind",
            field=models.SmallIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="prediction",
            name="logprob_a",
            field=models.FloatField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="prediction",
            name="options_hash",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(FUNCTION, REVERSE),
    ]
