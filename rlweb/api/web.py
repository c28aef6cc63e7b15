"""The profile page's API token buttons (plain pages: login required, CSRF-protected POSTs).

The new key is shown once, right after it is issued: it travels to the profile page in the
session and is removed from it when shown."""

from django.contrib import messages
from django.shortcuts import redirect

from . import tokens

NEW_KEY_SESSION = "api_new_token"


def _post_only(view):
    """A GET (a bookmarked or walked URL) just goes to the profile page; only a POST acts."""

    def wrapped(request):
        if request.method != "POST":
            return redirect("accounts:profile")
        return view(request)

    wrapped.__name__, wrapped.__doc__ = view.__name__, view.__doc__
    return wrapped


@_post_only
def token_issue(request):
    token = tokens.issue_token(request.user)
    request.session[NEW_KEY_SESSION] = token.key
    messages.success(request, "New API token issued. Copy it now: it is shown only once. Any previous token stopped working.")
    return redirect("accounts:profile")


@_post_only
def token_revoke(request):
    if tokens.revoke_token(request.user):
        messages.info(request, "API token revoked: scripts using it are refused from now on.")
    return redirect("accounts:profile")
