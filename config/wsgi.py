import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()
# The URLconf and every view module it names are imported here, as each web worker starts, not
# in the worker's first request: otherwise that request waits while its worker imports them
# (the evaluation views bring in SciPy: more than a second of CPU), once per worker.
get_resolver().url_patterns
