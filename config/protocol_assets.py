"""A protocol's own page files live in its package: ``protocols/<name>/templates/`` and
``protocols/<name>/static/`` (each holding one folder named after the protocol, e.g.
``templates/<name>/work.html`` and ``static/<name>/<name>.js``, so two protocols never clash and
none shadows a shared file). The folders are found from the registry (the STATELAB_PROTOCOLS
setting), never listed: a protocol added as one package brings its pages with it.

- ``ProtocolTemplateLoader``: a template loader over the registered protocols' ``templates/``
  (TEMPLATES' loaders, config/settings.py), after the project's own ``templates/``;
- ``ProtocolStaticFinder``: a staticfiles finder over their ``static/`` (STATICFILES_FINDERS), so
  ``{% static %}``, WhiteNoise and ``collectstatic`` (the image's web service) serve them as they
  serve ``static/``, at the same /static/ path.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.contrib.staticfiles.finders import FileSystemFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage
from django.template.loaders.filesystem import Loader as FileSystemLoader

from protocols import registry


def protocol_folders(sub: str) -> list[Path]:
    """The ``sub`` folder ("templates" or "static") of every registered protocol's package that has
    one, in the registry's order."""
    out: list[Path] = []
    for proto in registry.protocols():
        package = sys.modules[type(proto).__module__]
        for root in getattr(package, "__path__", ()):
            folder = Path(root) / sub
            if folder.is_dir() and folder not in out:
                out.append(folder)
    return out


class ProtocolTemplateLoader(FileSystemLoader):
    """Templates from the registered protocols' ``templates/`` folders."""

    def get_dirs(self):
        return protocol_folders("templates")


class ProtocolStaticFinder(FileSystemFinder):
    """Static files from the registered protocols' ``static/`` folders, at /static/ as they are."""

    def __init__(self, app_names=None, *args, **kwargs):
        self.locations = [("", str(folder)) for folder in protocol_folders("static")]
        self.storages = {}
        for prefix, root in self.locations:
            storage = FileSystemStorage(location=root)
            storage.prefix = prefix
            self.storages[root] = storage

    def check(self, **kwargs):
        errors = []
        for _prefix, root in self.locations:
            for entry in sorted(Path(root).iterdir()):
                if not entry.is_dir():
                    errors.append(
                        Error(
                            f"{entry}: a protocol's static files go in a folder named after the protocol",
                            id="statelab.E001",
                        )
                    )
        return errors
