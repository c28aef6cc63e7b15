from django.core.paginator import Paginator
from django.shortcuts import render

from rlweb.core.ownership import get_visible_or_404

from .models import Dataset


def dataset_list(request):
    datasets = Dataset.objects.visible_to(request.user).select_related("owner")
    page = Paginator(datasets, 25).get_page(request.GET.get("page"))
    return render(request, "datasets/list.html", {"page_obj": page, "datasets": page.object_list})


def dataset_detail(request, pk):
    dataset = get_visible_or_404(Dataset, request.user, pk=pk)
    return render(request, "datasets/detail.html", {"dataset": dataset})
