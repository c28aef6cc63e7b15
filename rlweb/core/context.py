from django.conf import settings


def site(request):
    return {"EMBEDDED_MODE": settings.EMBEDDED}
