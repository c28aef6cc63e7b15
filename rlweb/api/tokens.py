"""API tokens: one per user (rest_framework.authtoken, so Django admin manages them too).

Issuing replaces any previous key (rotation); revoking deletes it. Both the profile page and
the /api/token/ endpoint go through these functions."""

from __future__ import annotations

import logging

from django.db import transaction
from rest_framework.authtoken.models import Token

logger = logging.getLogger(__name__)

PREFIX_CHARS = 6


@transaction.atomic
def issue_token(user) -> Token:
    Token.objects.filter(user=user).delete()
    token = Token.objects.create(user=user)
    logger.info("API token issued for user %s", user.pk)
    return token


def revoke_token(user) -> bool:
    deleted, _ = Token.objects.filter(user=user).delete()
    if deleted:
        logger.info("API token revoked for user %s", user.pk)
    return bool(deleted)


def token_info(user) -> dict:
    token = Token.objects.filter(user=user).first()
    if token is None:
        return {"exists": False, "prefix": None, "created": None}
    return {"exists": True, "prefix": token.key[:PREFIX_CHARS], "created": token.created}
