from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from rlweb.core.ownership import get_visible_or_404
from rlweb.datasets.models import Dataset, DatasetRow
from workers.rl.judgers.spec import SPEC_BY_KIND

from . import services
from .forms import DryRunForm, JudgerForm, TryForm, display_params
from .models import JudgerConfig


@require_GET
def judger_list(request):
    judgers = JudgerConfig.objects.visible_to(request.user).select_related("owner")
    page = Paginator(judgers, 25).get_page(request.GET.get("page"))
    return render(request, "judgers/list.html", {"page_obj": page, "judgers": page.object_list})


def kinds() -> list[dict]:
    return [{"kind": kind, "doc": (cls.__doc__ or "").strip()} for kind, cls in SPEC_BY_KIND.items()]


@require_GET
def judger_new(request):
    """Pick a kind; each kind has its own form."""
    return render(request, "judgers/choose.html", {"kinds": kinds()})


def _save(request, form, instance=None):
    """Validate the form, then the spec; on success the saved judger, else None (errors on form)."""
    if not form.is_valid():
        return None
    params = form.params()
    if form.errors:  # params() may add errors (rows without a judger, secrets to keep)
        return None
    owner = instance.owner if instance else request.user
    try:
        return services.save_judger(
            owner, form.cleaned_data["name"], form.kind, params, form.cleaned_data.get("ray_actors") or 0,
            instance=instance, description=form.cleaned_data.get("description", ""),
        )
    except ValidationError as exc:
        form.add_spec_errors(exc)
        return None


@require_http_methods(["GET", "POST"])
def judger_create(request, kind):
    if kind not in SPEC_BY_KIND:
        raise Http404("no such judger kind")
    form = JudgerForm(kind, request.POST or None, owner=request.user)
    if request.method == "POST":
        judger = _save(request, form)
        if judger is not None:
            messages.success(request, f"Saved judger {judger.name}.")
            return redirect("judgers:detail", pk=judger.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "judgers/form.html", {"form": form, "kind": kind, "doc": SPEC_BY_KIND[kind].__doc__}, status=status)


@require_http_methods(["GET", "POST"])
def judger_edit(request, pk):
    judger = get_visible_or_404(JudgerConfig, request.user, pk=pk)
    if judger.kind not in SPEC_BY_KIND:
        raise Http404("unknown judger kind")
    form = JudgerForm(judger.kind, request.POST or None, owner=judger.owner, instance=judger)
    if request.method == "POST":
        saved = _save(request, form, instance=judger)
        if saved is not None:
            messages.success(request, f"Saved judger {saved.name}.")
            return redirect("judgers:detail", pk=saved.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "judgers/form.html", {"form": form, "kind": judger.kind, "judger": judger, "doc": SPEC_BY_KIND[judger.kind].__doc__}, status=status)


def _ready_datasets(user):
    # A judger is tried on the datasets its viewer may see (never another user's rows).
    return Dataset.objects.visible_to(user).filter(status=Dataset.Status.READY).only("pk", "name", "row_count").order_by("name")


def _detail_context(request, judger, **extra):
    datasets = _ready_datasets(request.user)
    context = {
        "judger": judger,
        "params": display_params(judger),
        "used_by": services.routers_using(judger),
        "try_form": TryForm(datasets=datasets),
        "dry_form": DryRunForm(datasets=datasets, initial={"response_template": "{answer}", "limit": 1000}),
    }
    try:
        services.spec_of(judger)
        context["invalid"] = None
    except ValidationError as exc:
        context["invalid"] = "; ".join(exc.messages)
    context.update(extra)
    return context


@require_GET
def judger_detail(request, pk):
    judger = get_visible_or_404(JudgerConfig, request.user, pk=pk)
    return render(request, "judgers/detail.html", _detail_context(request, judger))


@require_http_methods(["GET", "POST"])
def judger_try(request, pk):
    """Judge one pasted response (htmx: answers the result fragment only)."""
    judger = get_visible_or_404(JudgerConfig, request.user, pk=pk)
    if request.method == "GET":
        return redirect("judgers:detail", pk=judger.pk)
    datasets = _ready_datasets(request.user)
    form = TryForm(request.POST, datasets=datasets)
    outcome, row = None, None
    if form.is_valid():
        data = form.cleaned_data
        label, prompt, data_source = data["label"], data["prompt"], data["data_source"]
        if data.get("dataset"):
            dataset = get_visible_or_404(Dataset, request.user, pk=data["dataset"])
            row = DatasetRow.objects.filter(dataset=dataset, index=data.get("row") or 0).first()
            if row is None:
                form.add_error("row", f"{dataset.name} has no row {data.get('row') or 0}")
            else:
                label = row.answer
                prompt = row.prompt or "\n".join(str(m.get("content", "")) for m in row.messages or [])
                data_source = row.data_source
        if not form.errors:
            outcome = services.try_judger(judger, data["response"], label, prompt=prompt, data_source=data_source)
    context = {"try_form": form, "outcome": outcome, "row": row}
    if request.htmx:
        return render(request, "judgers/_try_result.html", {**context, "judger": judger}, status=200 if outcome else 400)
    full = _detail_context(request, judger, **context)
    return render(request, "judgers/detail.html", full, status=200 if outcome else 400)


@require_http_methods(["GET", "POST"])
def judger_dry_run(request, pk):
    """Judge a dataset's reference answers and show the pass rate and the failing rows."""
    judger = get_visible_or_404(JudgerConfig, request.user, pk=pk)
    if request.method == "GET":
        return redirect("judgers:detail", pk=judger.pk)
    datasets = _ready_datasets(request.user)
    form = DryRunForm(request.POST, datasets=datasets)
    report, dataset, error = None, None, None
    if form.is_valid():
        data = form.cleaned_data
        dataset = get_visible_or_404(Dataset, request.user, pk=data["dataset"])
        try:
            report = services.dry_run(
                judger, dataset, data["limit"], split=data["split"] or None,
                response_template=data["response_template"], threshold=data["threshold"],
            )
        except ValidationError as exc:
            error = "; ".join(exc.messages)
    context = {"dry_form": form, "report": report, "dry_dataset": dataset, "dry_error": error}
    if request.htmx:
        return render(request, "judgers/_dry_run.html", {**context, "judger": judger}, status=200 if report else 400)
    return render(request, "judgers/detail.html", _detail_context(request, judger, **context), status=200 if report else 400)


@require_http_methods(["GET", "POST"])
def judger_delete(request, pk):
    judger = get_visible_or_404(JudgerConfig, request.user, pk=pk)
    if request.method == "POST":
        try:
            services.delete_judger(judger)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("judgers:detail", pk=judger.pk)
        messages.success(request, f"Deleted judger {judger.name}.")
        return redirect("judgers:list")
    return render(request, "judgers/delete.html", {"judger": judger, "used_by": services.routers_using(judger)})
