"""A crowd account belongs to one study (annotation/studies/models.py, CrowdAccount).

Before this, one account served a platform id in every study of every project. Each existing
account keeps its earliest participation's study; each later participation gets an account of its
own, which takes over the work done for it (the annotations and tasks of that study's project from
that participation's start on, up to the id's next participation in the same project) and an
annotator membership there. A crowd account keeps only the annotator role, and only in its study's
project. An account with no participation at all (none is made so) keeps no access: its
memberships go and it is deactivated.

Reversing drops the study link; it fails while one platform id has accounts in two studies.
"""

import secrets

import django.db.models.deletion
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.db import migrations, models

ANNOTATOR = "annotator"


def _free_username(User, wanted: str) -> str:
    name = wanted[:150]
    while User.objects.filter(username=name).exists():
        name = f"{wanted[:140]}-{secrets.token_hex(4)}"
    return name


def _split_accounts(apps, schema_editor):
    CrowdAccount = apps.get_model("annotation", "CrowdAccount")
    StudyParticipant = apps.get_model("annotation", "StudyParticipant")
    Membership = apps.get_model("annotation", "Membership")
    Annotation = apps.get_model("annotation", "Annotation")
    Task = apps.get_model("annotation", "Task")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    for account in CrowdAccount.objects.filter(study__isnull=True).order_by("pk"):
        old = account.user_id
        parts = list(StudyParticipant.objects.filter(user_id=old).select_related("study").order_by("started_at", "pk"))
        if not parts:
            Membership.objects.filter(user_id=old).delete()
            User.objects.filter(pk=old).update(is_active=False)
            account.delete()
            continue
        first = parts[0]
        account.study_id = first.study_id
        account.save(update_fields=["study"])
        for n, later in enumerate(parts[1:], start=1):
            project_id = later.study.project_id
            following = [p.started_at for p in parts[n + 1 :] if p.study.project_id == project_id]
            user = User.objects.create(
                username=_free_username(User, f"{account.platform}-{account.external_id}-s{later.study_id}"),
                password=make_password(None),
            )
            CrowdAccount.objects.create(
                user=user,
                study_id=later.study_id,
                platform=account.platform,
                external_id=account.external_id,
                created_at=later.started_at,
            )
            window = {"created_at__gte": later.started_at}
            if following:
                window["created_at__lt"] = following[0]
            Annotation.objects.filter(annotator_id=old, item__project_id=project_id, **window).update(
                annotator_id=user.pk
            )
            Task.objects.filter(annotator_id=old, item__project_id=project_id, **window).update(annotator_id=user.pk)
            StudyParticipant.objects.filter(pk=later.pk).update(user_id=user.pk)
            Membership.objects.get_or_create(project_id=project_id, user_id=user.pk, defaults={"role": ANNOTATOR})
        home = first.study.project_id
        Membership.objects.filter(user_id=old).exclude(project_id=home).delete()
        Membership.objects.filter(user_id=old, project_id=home).update(role=ANNOTATOR)
    # The rows written above have deferred foreign-key checks pending; PostgreSQL alters no table
    # with pending trigger events, so they run now, before the study column becomes required.
    schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    schema_editor.execute("SET CONSTRAINTS ALL DEFERRED")


class Migration(migrations.Migration):
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("annotation", "0020_release_frozen_media_asset_owners"),
    ]

    operations = [
        migrations.AddField(
            model_name="crowdaccount",
            name="study",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="crowd_accounts",
                to="annotation.study",
            ),
        ),
        migrations.RemoveConstraint(model_name="crowdaccount", name="crowdaccount_unique_platform_id"),
        migrations.RunPython(_split_accounts, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="crowdaccount",
            name="study",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="crowd_accounts",
                to="annotation.study",
            ),
        ),
        migrations.AddConstraint(
            model_name="crowdaccount",
            constraint=models.UniqueConstraint(
                fields=("study", "platform", "external_id"), name="crowdaccount_unique_study_id"
            ),
        ),
    ]
