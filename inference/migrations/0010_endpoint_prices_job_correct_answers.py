"""Endpoint prices become fields of their own (they were the options price_per_1m_input and
price_per_1m_output), and a job records how many of its answers were scored correct, for the cost
per correct answer (inference/selectors.py, job_cost_per_correct).

Existing endpoints keep their prices: a numeric option moves to its field and leaves the options;
one that is not a non-negative number stays in the options, where nothing reads it (it never gave
a cost either)."""

from decimal import Decimal, InvalidOperation

import django.core.validators
from django.db import migrations, models

PRICES = ("price_per_1m_input", "price_per_1m_output")


def price_of(value):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        price = Decimal(str(value)).quantize(Decimal("0.000001"))
    except (InvalidOperation, ValueError):
        return None
    return price if price.is_finite() and Decimal(0) <= price < Decimal(10**6) else None


def options_to_fields(apps, schema_editor):
    ModelEndpoint = apps.get_model("inference", "ModelEndpoint")
    for endpoint in ModelEndpoint.objects.all().iterator():
        options = dict(endpoint.options or {}) if isinstance(endpoint.options, dict) else {}
        changed = []
        for name in PRICES:
            price = price_of(options.get(name))
            if price is not None:
                setattr(endpoint, name, price)
                options.pop(name)
                changed.append(name)
        if changed:
            endpoint.options = options
            endpoint.save(update_fields=[*changed, "options"])


def fields_to_options(apps, schema_editor):
    ModelEndpoint = apps.get_model("inference", "ModelEndpoint")
    for endpoint in ModelEndpoint.objects.all().iterator():
        options = dict(endpoint.options or {}) if isinstance(endpoint.options, dict) else {}
        prices = {name: float(getattr(endpoint, name)) for name in PRICES if getattr(endpoint, name) is not None}
        if prices:
            endpoint.options = {**options, **prices}
            endpoint.save(update_fields=["options"])


def price_field(label):
    return models.DecimalField(
        label,
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[django.core.validators.MinValueValidator(0)],
    )


class Migration(migrations.Migration):
    dependencies = [
        ("inference", "0009_response_cache"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelendpoint",
            name="price_per_1m_input",
            field=price_field("price per 1M input tokens (USD)"),
        ),
        migrations.AddField(
            model_name="modelendpoint",
            name="price_per_1m_output",
            field=price_field("price per 1M output tokens (USD)"),
        ),
        migrations.AddField(
            model_name="inferencejob",
            name="correct_answers",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(options_to_fields, fields_to_options),
    ]
