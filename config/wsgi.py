import os

import django
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)  # as django.core.wsgi.get_wsgi_application does

from config.lanes import LanedApplication  # noqa: E402  (after setup: it reads the settings)

# Django's handler, with a shorter middleware chain for API requests authenticated by a token
# alone (config/lanes.py).
application = LanedApplication()
# The URLconf and every view module it names are imported here, as each web worker starts, not
# in the worker's first request: otherwise that request waits while its worker imports them
# (the evaluation views bring in SciPy: more than a second of CPU), once per worker.
get_resolver().url_patterns
