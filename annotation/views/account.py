"""Signing out: Django's logout, which also revokes the user's API tokens (a token
must not outlive the session that was closed to end the user's access)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views

from ..tokens import tokens_revoke


class LogoutView(auth_views.LogoutView):
    def post(self, request, *args, **kwargs):
        user = request.user if request.user.is_authenticated else None
        response = super().post(request, *args, **kwargs)
        if user is not None:
            tokens_revoke(user=user)
        return response
