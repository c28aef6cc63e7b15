from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse
from django.shortcuts import redirect


def home(request):
    return redirect("runs:list")


@login_not_required
def healthz(request):
    """Liveness for load balancers: answers without a session, reveals nothing but 'ok'."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def profile(request):
    """The signed-in user's page (API tokens are managed here)."""
    from django.shortcuts import render

    return render(request, "core/profile.html", {"profile_user": request.user})
