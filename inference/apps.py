from django.apps import AppConfig


class InferenceConfig(AppConfig):
    name = "inference"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A Celery worker sets Django up before it starts, so this is connected in time for it:
        # its decoding threads are sized by how many Celery tasks it runs at once (video_frames).
        from celery import signals

        from .video_frames import on_worker_setup

        signals.celeryd_after_setup.connect(on_worker_setup, weak=False, dispatch_uid="statelab-worker-tasks")
