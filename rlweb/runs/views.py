from django.core.paginator import Paginator
from django.shortcuts import render

from rlweb.core.ownership import get_visible_or_404

from .models import Run


def run_list(request):
    runs = Run.objects.visible_to(request.user).select_related("owner").defer("config", "error")
    page = Paginator(runs, 25).get_page(request.GET.get("page"))
    return render(request, "runs/list.html", {"page_obj": page, "runs": page.object_list})


def run_detail(request, pk):
    run = get_visible_or_404(Run, request.user, pk=pk)
    return render(request, "runs/detail.html", {"run": run})
