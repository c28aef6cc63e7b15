"""Run pages: the list, the launch form, the run page and its JSON (series, metric names)."""

from __future__ import annotations

import re

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Max, Q
from django.http import Http404, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from rlweb.core.ownership import get_visible_or_404
from rlweb.core.params import parse_int
from workers.rl.config import ConfigError, RunConfig, list_presets, load_preset, parse_config

from . import series as series_mod
from . import services
from .forms import LaunchForm, YamlUploadForm, default_config, flatten
from .models import Checkpoint, MetricPoint, Run, RunLog
from .services import DEMO_PRESET

PAGE_SIZE = 25
LOG_TAIL = 200


def presets() -> list[str]:
    """Preset names, the CPU demo first."""
    names = list_presets()
    return sorted(names, key=lambda n: (n != DEMO_PRESET, n))


# --- list --------------------------------------------------------------------------------


def _filtered_runs(request):
    runs = Run.objects.visible_to(request.user).select_related("owner").defer("config", "error")
    status = request.GET.get("status", "")
    if status in Run.Status.values:
        runs = runs.filter(status=status)
    q = request.GET.get("q", "").strip()
    if q:
        cond = Q(name__icontains=q) | Q(preset__icontains=q)
        run_id = parse_int(q.lstrip("#"))
        if run_id is not None:
            cond |= Q(pk=run_id)
        if request.user.is_staff:
            cond |= Q(owner__username__icontains=q)
        runs = runs.filter(cond)
    return runs, status, q


def run_list(request):
    services.reap_lost_runs()  # a killed worker cannot mark its own runs lost
    runs, status, q = _filtered_runs(request)
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    query_string = urlencode({k: v for k, v in (("status", status), ("q", q)) if v})
    context = {
        "page_obj": page,
        "runs": page.object_list,
        "status": status,
        "q": q,
        "statuses": Run.Status.choices,
        "query_string": query_string,
        "any_active": any(r.is_active for r in page.object_list),
    }
    if request.htmx and request.GET.get("partial") == "rows":
        return render(request, "runs/_list_rows.html", context)
    return render(request, "runs/list.html", context)


# --- launch ------------------------------------------------------------------------------


def _form_context(request, form, upload=None, estimate=None, preset=""):
    from rlweb.datasets.models import Dataset

    return {
        "form": form,
        "upload": upload or YamlUploadForm(),
        "presets": presets(),
        "preset": preset,
        "estimate": estimate,
        "datasets": Dataset.objects.visible_to(request.user).filter(status=Dataset.Status.READY).only("pk", "name")[:200],
    }


def _make_form(request, data=None, initial=None):
    from rlweb.datasets.models import Dataset
    from rlweb.judgers.models import JudgerConfig

    judgers = JudgerConfig.objects.visible_to(request.user).filter(owner=request.user).only("pk", "name", "kind")
    datasets = Dataset.objects.visible_to(request.user).filter(status=Dataset.Status.READY).only("pk", "name")[:200]
    return LaunchForm(data, initial=initial, judgers=judgers, datasets=datasets)


def _estimate(config_dict: dict) -> dict | None:
    try:
        return parse_config(config_dict).estimate()
    except ConfigError:
        return None


def run_new(request):
    """GET: the form, prefilled from ?preset= (the CPU demo by default) or ?clone=<run id>.
    POST: launch (or 'download' the config as YAML)."""
    if request.method == "POST":
        return _launch_post(request)
    preset, config = "", None
    if "clone" in request.GET:
        source = get_visible_or_404(Run, request.user, pk=request.GET["clone"])
        config = services.clone_config(source, request.user)
        preset = source.preset
    else:
        names = presets()
        preset = request.GET.get("preset") or (names[0] if names else "")
        if preset:
            try:
                config = load_preset(preset).model_dump(mode="json")
            except ConfigError:
                raise Http404(f"no preset {preset!r}") from None
    config = config or default_config()
    initial = {**flatten(config), "preset": preset}
    form = _make_form(request, initial=initial)
    return render(request, "runs/new.html", _form_context(request, form, estimate=_estimate(config), preset=preset))


def _launch_post(request):
    action = request.POST.get("action", "launch")
    if action in ("yaml-load", "yaml-launch"):
        return _yaml_post(request, launch=action == "yaml-launch")
    form = _make_form(request, data=request.POST)
    estimate = None
    if form.is_valid():
        try:
            config_dict, judger_id = form.config_dict()
            if action == "download":
                config = services.validate_launch(request.user, config_dict, judger_id)
                return _yaml_response(config, config.name)
            run = services.launch_run(request.user, config_dict, preset=form.cleaned_data.get("preset") or "", judger=judger_id)
        except ConfigError as exc:
            form.add_config_errors(exc)
            estimate = _estimate(config_dict) if "config_dict" in locals() else None
        else:
            messages.success(request, f"Run “{run.name}” queued.")
            return redirect("runs:detail", pk=run.pk)
    response = render(request, "runs/new.html", _form_context(request, form, estimate=estimate, preset=request.POST.get("preset", "")))
    response.status_code = 400
    return response


def _yaml_post(request, launch: bool):
    upload = YamlUploadForm(request.POST, request.FILES)
    if not upload.is_valid():
        form = _make_form(request, initial=flatten(default_config()))
        response = render(request, "runs/new.html", _form_context(request, form, upload=upload))
        response.status_code = 400
        return response
    config = upload.config
    if launch:
        try:
            run = services.launch_run(request.user, config)
        except ConfigError as exc:
            # Show the file's values in the form with each error next to its field.
            form = _make_form(request, data=_as_post(flatten(config)))
            form.is_valid()
            form.add_config_errors(exc)
            response = render(request, "runs/new.html", _form_context(request, form))
            response.status_code = 400
            return response
        messages.success(request, f"Run “{run.name}” queued from {upload.cleaned_data['file'].name}.")
        return redirect("runs:detail", pk=run.pk)
    form = _make_form(request, initial=flatten({**default_config(), **config}))
    messages.info(request, f"Loaded {upload.cleaned_data['file'].name} into the form: check it and launch.")
    return render(request, "runs/new.html", _form_context(request, form, estimate=_estimate(config)))


def _as_post(flat: dict) -> dict:
    out = {}
    for key, value in flat.items():
        if isinstance(value, bool):
            if value:
                out[key] = "on"
        elif isinstance(value, (list, tuple)):
            out[key] = ", ".join(str(v) for v in value)
        elif value is not None:
            out[key] = str(value)
    return out


def run_estimate(request):
    """htmx: the estimate box for the form's current values (POST; a GET goes to the form)."""
    if request.method != "POST":
        return redirect("runs:new")
    form = _make_form(request, data=request.POST)
    estimate, errors = None, []
    if form.is_valid():
        try:
            config_dict, _ = form.config_dict()
            estimate = parse_config(config_dict).estimate()
        except ConfigError as exc:
            errors = exc.errors
    else:
        errors = [(name.replace("__", "."), "; ".join(errs)) for name, errs in form.errors.items()]
    return render(request, "runs/_estimate.html", {"estimate": estimate, "estimate_errors": errors})


def _yaml_response(config: RunConfig, name: str) -> HttpResponse:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    response = HttpResponse(config.to_yaml(), content_type="application/x-yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{slug}.yaml"'
    return response


# --- one run -----------------------------------------------------------------------------


def run_detail(request, pk):
    services.reap_lost_runs()
    run = get_visible_or_404(Run, request.user, pk=pk)
    cursor_metrics = MetricPoint.objects.filter(run_id=run.pk).aggregate(m=Max("id"))["m"] or 0
    logs = list(RunLog.objects.filter(run_id=run.pk).order_by("-id")[:LOG_TAIL])[::-1]
    checkpoints = Checkpoint.objects.filter(run_id=run.pk, deleted=False).order_by("-step")[:20]
    checkpoints_removed = Checkpoint.objects.filter(run_id=run.pk, deleted=True).count()
    try:
        samples_url = reverse("review:samples", kwargs={"run_id": run.pk})
    except NoReverseMatch:
        samples_url = f"/review/runs/{run.pk}/samples/"
    try:
        config = parse_config(run.config)
        config_yaml = config.to_yaml()
        # No reference model, no KL series: say so instead of leaving an empty chart unexplained.
        kl_off = config.algorithm.kl_coef == 0
    except ConfigError:
        import yaml

        config_yaml = yaml.safe_dump(run.config, sort_keys=False)
        kl_off = False
    context = {
        "run": run,
        "logs": logs,
        "checkpoints": checkpoints,
        "checkpoints_removed": checkpoints_removed,
        "config_yaml": config_yaml,
        "samples_url": samples_url,
        "kl_off": kl_off,
        "live": {
            "run": run.pk,
            "cursor": {"metrics": cursor_metrics, "samples": _max_sample_id(run.pk), "logs": logs[-1].pk if logs else 0},
            "series_url": reverse("runs:series", args=[run.pk]),
            "ws_path": f"/ws/runs/{run.pk}/",
            "status": run.status,
            "attempts": run.attempts,
            "total_steps": run.total_steps,
            "current_step": run.current_step,
        },
    }
    return render(request, "runs/detail.html", context)


def _max_sample_id(run_id: int) -> int:
    from .models import Trajectory

    return Trajectory.objects.filter(run_id=run_id).aggregate(m=Max("id"))["m"] or 0


def _int_param(request, name, default=None):
    raw = request.GET.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(float(raw))
    except ValueError:
        raise ValueError(f"{name} must be a number") from None


@require_GET
def run_series(request, pk):
    """JSON: one series, downsampled to ?points= (default 2000) in the window ?lo=&hi= (steps),
    limited to rows with id <= ?until= (the page's cursor), with ?with=reward/std companions.
    ?raw=1 returns every point (the benchmark's peer)."""
    run = get_visible_or_404(Run, request.user, pk=pk)
    name = request.GET.get("name", "")
    if not name:
        return HttpResponseBadRequest("name is required")
    try:
        lo, hi = _int_param(request, "lo"), _int_param(request, "hi")
        points = _int_param(request, "points", series_mod.DEFAULT_MAX_POINTS)
        until = _int_param(request, "until")
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc))
    companions = tuple(c for c in request.GET.getlist("with") if c)[:4]
    result = series_mod.get_series(
        run.pk, name, lo=lo, hi=hi, max_points=points, until_id=until, companions=companions,
        downsample=request.GET.get("raw") != "1",
    )
    return JsonResponse(result.as_json())


@require_GET
def run_metric_names(request, pk):
    run = get_visible_or_404(Run, request.user, pk=pk)
    return JsonResponse({"names": series_mod.metric_names(run.pk)})


@require_GET
def run_config_yaml(request, pk):
    run = get_visible_or_404(Run, request.user, pk=pk)
    try:
        config = parse_config(run.config)
    except ConfigError:
        raise Http404("this run's stored config no longer validates") from None
    return _yaml_response(config, run.name)


def run_cancel(request, pk):
    run = get_visible_or_404(Run, request.user, pk=pk)
    if request.method != "POST":  # changes happen on POST only (CSRF); a GET shows the run
        return redirect("runs:detail", pk=pk)
    try:
        services.cancel_run(run, request.user)
    except PermissionDenied:
        raise Http404 from None
    except services.RunStateError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, "Cancel requested: the run stops at its next step." if run.status == Run.Status.RUNNING else "Run cancelled.")
    return redirect("runs:detail", pk=pk)


def run_resume(request, pk):
    run = get_visible_or_404(Run, request.user, pk=pk)
    if request.method != "POST":
        return redirect("runs:detail", pk=pk)
    try:
        run = services.resume_run(run, request.user)
    except PermissionDenied:
        raise Http404 from None
    except services.RunStateError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Resumed: attempt {run.attempts} is queued.")
    return redirect("runs:detail", pk=pk)


def run_clone(request, pk):
    run = get_visible_or_404(Run, request.user, pk=pk)
    return redirect(reverse("runs:new") + "?" + urlencode({"clone": run.pk}))


@require_GET
def run_summaries(request):
    """JSON: status of several runs (the overlay's legend, and anything polling)."""
    ids = [i for i in map(parse_int, request.GET.getlist("id")) if i is not None][:20]
    runs = Run.objects.visible_to(request.user).filter(pk__in=ids).only("pk", "name", "status", "current_step", "total_steps")
    return JsonResponse({"runs": [{"id": r.pk, "name": r.name, "status": r.status, "current_step": r.current_step, "total_steps": r.total_steps} for r in runs]})
