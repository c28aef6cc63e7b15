from django.urls import path

from . import web

urlpatterns = [
    path("issue/", web.token_issue, name="api_token_issue"),
    path("revoke/", web.token_revoke, name="api_token_revoke"),
]
