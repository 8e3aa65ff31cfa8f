"""Test clients logged in as a user: the DRF client the JS talks through and Django's page client."""

from __future__ import annotations

from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def session_client(user) -> APIClient:
    """An API client with the user's session, as the pages call the API."""
    client = APIClient()
    client.force_login(user)
    return client


def token_client(user) -> APIClient:
    """An API client that sends the user's API token (made on first use), as the CLI does."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def logged_in(user) -> Client:
    """Django's test client with the user's session (a JSON body is posted with content_type)."""
    client = Client()
    client.force_login(user)
    return client
