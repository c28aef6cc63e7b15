from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from .. import tokens
from ..serializers.tokens import MeSerializer, NewTokenSerializer, TokenInfoSerializer
from .base import ApiView


class MeView(ApiView):
    @extend_schema(tags=["account"], summary="Who the credentials belong to", responses=MeSerializer)
    def get(self, request):
        user = request.user
        return Response(MeSerializer({"id": user.pk, "username": user.get_username(), "is_staff": user.is_staff}).data)


class TokenView(ApiView):
    """The caller's API token: see whether one exists, rotate it, or revoke it."""

    @extend_schema(tags=["account"], summary="The caller's token (never the key)", responses=TokenInfoSerializer)
    def get(self, request):
        return Response(TokenInfoSerializer(tokens.token_info(request.user)).data)

    @extend_schema(
        tags=["account"], summary="Issue a new token, replacing any previous one", request=None,
        responses={201: NewTokenSerializer},
    )
    def post(self, request):
        token = tokens.issue_token(request.user)
        return Response(NewTokenSerializer({"key": token.key, "created": token.created}).data, status=status.HTTP_201_CREATED)

    @extend_schema(tags=["account"], summary="Revoke the token (idempotent)", responses={204: None})
    def delete(self, request):
        tokens.revoke_token(request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
