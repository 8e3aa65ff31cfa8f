"""The test client's handler choosing its middleware chain as the WSGI application does
(config/lanes.py): API requests with a token and no session through the token lane."""

from __future__ import annotations

from django.test.client import ClientHandler

from config.lanes import TokenLaneMixin, takes_token_lane


class _TokenLaneClientHandler(TokenLaneMixin, ClientHandler):
    pass


class LanedClientHandler(ClientHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lane = _TokenLaneClientHandler(*args, **kwargs)

    def __call__(self, environ):
        if takes_token_lane(environ):
            return self.lane(environ)
        return super().__call__(environ)


def through_lanes(client):
    """`client` (Django's or DRF's test client), its requests served as gunicorn serves them."""
    client.handler = LanedClientHandler(enforce_csrf_checks=client.handler.enforce_csrf_checks)
    return client
