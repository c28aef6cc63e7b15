from django.core.paginator import Paginator
from django.shortcuts import render

from rlweb.core.ownership import get_visible_or_404

from .models import JudgerConfig


def judger_list(request):
    judgers = JudgerConfig.objects.visible_to(request.user).select_related("owner")
    page = Paginator(judgers, 25).get_page(request.GET.get("page"))
    return render(request, "judgers/list.html", {"page_obj": page, "judgers": page.object_list})


def judger_detail(request, pk):
    judger = get_visible_or_404(JudgerConfig, request.user, pk=pk)
    return render(request, "judgers/detail.html", {"judger": judger})
