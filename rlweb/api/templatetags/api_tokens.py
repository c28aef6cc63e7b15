from django import template

from .. import tokens
from ..web import NEW_KEY_SESSION

register = template.Library()


@register.inclusion_tag("api/tokens.html", takes_context=True)
def api_token_panel(context):
    request = context["request"]
    return {
        "token": tokens.token_info(request.user),
        "new_key": request.session.pop(NEW_KEY_SESSION, None),
        "csrf_token": context.get("csrf_token"),
    }
