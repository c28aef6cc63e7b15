"""Pages of rollout review. Every view starts from a run the user may see (get_visible_or_404):
another user's run, sample, flag or job answers 404."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.handlers.asgi import ASGIRequest
from django.db.models import Max
from django.http import Http404, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from rlweb.core.ownership import get_visible_or_404
from rlweb.core.params import parse_int
from rlweb.judgers.models import JudgerConfig
from rlweb.runs.models import MetricPoint, Run, RunLog, Trajectory

from . import services
from .forms import FlagForm, RejudgeForm, filters_from_query
from .models import RejudgeJob, SampleFlag
from .presenters import list_rows
from .queries import SORTS, component_names, distinct_values, sample_page


def _run(request, run_id) -> Run:
    return get_visible_or_404(Run, request.user, pk=run_id)


def _sample(run: Run, sample_id) -> Trajectory:
    return get_object_or_404(Trajectory, run=run, pk=sample_id)


def _query_without(request, *keys) -> str:
    query = request.GET.copy()
    for key in keys:
        query.pop(key, None)
    return query.urlencode()


def sample_list(request, run_id):
    run = _run(request, run_id)
    form, filters = filters_from_query(
        request.GET, components=component_names(run), data_sources=distinct_values(run, "data_source")
    )
    page = sample_page(run, filters, request.GET.get("sort"), request.GET.get("after"), request.GET.get("before"))
    component_columns = [name for name, _, _ in form.component_fields]
    rows = list_rows(run, page.rows, component_columns, services.flags_by_sample(row.id for row in page.rows))
    first_page = not request.GET.get("after") and not request.GET.get("before")
    context = {
        "run": run,
        "form": form,
        "page": page,
        "rows": rows,
        "component_columns": component_columns,
        "sort_links": _sort_links(request, page.sort),
        "filter_query": _query_without(request, "after", "before", "sort"),
        "page_query": _query_without(request, "after", "before"),
        "filters_active": filters.active,
        # New samples go on top only where they belong: the unfiltered first page, newest first.
        "live_prepend": first_page and not filters.active and page.sort == "-step",
        "live_cursor": _live_cursor(run),
        "rejudge_form": RejudgeForm(user=request.user),
    }
    return render(request, "review/samples.html", context)


def _sort_links(request, current: str) -> dict[str, str]:
    """Query strings that sort by each column: descending first, ascending on a second click."""
    links = {}
    for key in SORTS:
        query = request.GET.copy()
        for drop in ("after", "before", "sort"):
            query.pop(drop, None)
        query["sort"] = key if current == f"-{key}" else f"-{key}"
        links[key] = query.urlencode()
    return links


def _live_cursor(run: Run) -> dict:
    # The run stream also carries metric points and log lines: start those at their newest row,
    # so that this page is sent only what is new.
    def newest(model):
        return model.objects.filter(run=run).aggregate(m=Max("id"))["m"] or 0

    return {"samples": newest(Trajectory), "metrics": newest(MetricPoint), "logs": newest(RunLog)}


def sample_detail(request, run_id, sample_id):
    run = _run(request, run_id)
    sample = _sample(run, sample_id)
    strip, strip_left_out = services.token_strip(sample.tokens)
    group_size = Trajectory.objects.filter(run=run, group_id=sample.group_id, step=sample.step).count()
    rescored = sample.rejudge_scores.select_related("job").order_by("-job_id")[:20]
    context = {
        "run": run,
        "sample": sample,
        "components": sorted((sample.reward_components or {}).items()),
        "strip": strip,
        "strip_left_out": strip_left_out,
        "strip_stats": services.token_stats(strip),
        "group_size": group_size,
        "flags": sample.flags.select_related("user").order_by("-id"),
        "flag_form": FlagForm(),
        "rescored": rescored,
    }
    return render(request, "review/sample_detail.html", context)


def group_detail(request, run_id, group_id):
    run = _run(request, run_id)
    try:
        step = int(request.GET["step"]) if request.GET.get("step") else None
    except ValueError:
        raise Http404("bad step") from None
    samples = services.group_samples(run, group_id, step)
    if not samples:
        raise Http404("No such group in this run.")
    for sample in samples:
        components = sample.reward_components if isinstance(sample.reward_components, dict) else {}
        sample.component_list = sorted(components.items())
    context = {
        "run": run,
        "group_id": group_id,
        "samples": samples,
        "first": samples[0],
        "stats": services.group_stats(samples),
        "highlight": request.GET.get("sample"),
    }
    return render(request, "review/group.html", context)


def prompt_history(request, run_id, prompt_index):
    run = _run(request, run_id)
    split = request.GET.get("split") if request.GET.get("split") in ("train", "eval") else "train"
    steps = services.prompt_history(run, split, prompt_index)
    if not steps:
        raise Http404("This prompt was not sampled in this run.")
    candidates = [sample for step in steps for sample in step.samples]
    by_id = {sample.id: sample for sample in candidates}

    def chosen(key, default):
        try:
            return by_id.get(int(request.GET.get(key, "")), default)
        except ValueError:
            return default

    a = chosen("a", steps[0].best)
    b = chosen("b", steps[-1].best)
    texts = dict(Trajectory.objects.filter(pk__in=[a.pk, b.pk]).values_list("pk", "response"))
    latest = Trajectory.objects.filter(pk=candidates[-1].pk).values("prompt", "label").first()
    context = {
        "run": run,
        "split": split,
        "prompt_index": prompt_index,
        "steps": steps,
        "candidates": candidates,
        "a": a,
        "b": b,
        "diff": services.word_diff(texts.get(a.pk, ""), texts.get(b.pk, "")),
        "prompt": latest["prompt"],
        "label": latest["label"],
    }
    return render(request, "review/prompt.html", context)


# --- flags --------------------------------------------------------------------------------


def flag_create(request, run_id, sample_id):
    run = _run(request, run_id)
    sample = _sample(run, sample_id)
    if request.method != "POST":  # actions are POSTs; a GET (a followed link) shows the sample
        return redirect("review:sample", run_id=run.pk, sample_id=sample.pk)
    form = FlagForm(request.POST)
    if form.is_valid():
        services.add_flag(sample, request.user, form.cleaned_data["kind"], form.cleaned_data["note"])
        messages.success(request, f"Flagged sample #{sample.pk} as “{SampleFlag.Kind(form.cleaned_data['kind']).label}”.")
    else:
        messages.error(request, "Pick what kind of flag this is.")
    return redirect("review:sample", run_id=run.pk, sample_id=sample.pk)


def flag_delete(request, run_id, flag_id):
    run = _run(request, run_id)
    flag = get_object_or_404(SampleFlag, pk=flag_id, run=run)
    if request.method != "POST":
        return redirect("review:flags", run_id=run.pk)
    flag.delete()
    messages.success(request, "Flag removed.")
    return redirect(request.POST.get("next") if _is_local(request.POST.get("next")) else reverse("review:flags", args=[run.pk]))


def _is_local(url) -> bool:
    from django.utils.http import url_has_allowed_host_and_scheme

    return bool(url) and url_has_allowed_host_and_scheme(url, allowed_hosts=None)


def flag_list(request, run_id):
    run = _run(request, run_id)
    flags = SampleFlag.objects.filter(run=run).select_related("user", "trajectory")
    kind = request.GET.get("kind")
    if kind in SampleFlag.Kind.values:
        flags = flags.filter(kind=kind)
    flags = flags.defer(*(f"trajectory__{name}" for name in Trajectory.BIG_FIELDS)).order_by("-id")[:1000]
    return render(request, "review/flags.html", {"run": run, "flags": flags, "kinds": SampleFlag.Kind.choices, "kind": kind})


# --- export -------------------------------------------------------------------------------


def export(request, run_id):
    run = _run(request, run_id)
    lines = services.export_lines(run, request.GET, with_tokens=request.GET.get("tokens") == "1")
    flagged = "-flagged" if request.GET.get("flagged") else ""
    response = StreamingHttpResponse(_streamed(request, lines), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-samples{flagged}.jsonl"'
    response["X-Accel-Buffering"] = "no"
    return response


def _streamed(request, lines):
    """Django materialises a synchronous iterator before sending it under ASGI (daphne): hand an
    asynchronous one there, fetching one chunk at a time on the request's database thread."""
    if not isinstance(request, ASGIRequest):
        return lines

    async def chunks():
        while True:
            chunk = await sync_to_async(next)(lines, None)
            if chunk is None:
                return
            yield chunk

    return chunks()


# --- re-judge -----------------------------------------------------------------------------


def rejudge_list(request, run_id):
    run = _run(request, run_id)
    if request.method == "POST":
        judger = get_visible_or_404(JudgerConfig, request.user, pk=request.POST.get("judger"))
        # The sample list's filters, as its query string (empty: every sample of the run).
        filters = services.filters_to_json(QueryDict(request.POST.get("filters", "")[:4000]))
        try:
            job = services.start_rejudge(run, request.user, judger, filters)
        except ValidationError as exc:
            messages.error(request, f"The judger “{judger.name}” does not validate: {'; '.join(exc.messages)}")
            return redirect("review:rejudge_list", run_id=run.pk)
        return redirect("review:rejudge", job_id=job.pk)
    jobs = run.rejudge_jobs.select_related("created_by").defer("spec")[:100]
    return render(request, "review/rejudge_list.html", {"run": run, "jobs": jobs, "form": RejudgeForm(user=request.user)})


def _job(request, job_id) -> RejudgeJob:
    job = get_object_or_404(RejudgeJob.objects.select_related("run", "created_by"), pk=job_id)
    if not job.run.is_visible_to(request.user):
        raise Http404("No re-judge job matches the given query.")
    return job


def rejudge_detail(request, job_id):
    job = _job(request, job_id)
    show = request.GET.get("show", "disagree")
    scores = job.scores.select_related("trajectory").only(
        "id", "score", "old_score", "status", "explanation", "disagrees", "components",
        "trajectory__id", "trajectory__step", "trajectory__data_source", "trajectory__group_id", "trajectory__status",
    )
    if show == "failed":
        scores = scores.filter(status="failed")
    elif show != "all":
        show = "disagree"
        scores = scores.filter(disagrees=True)
    after = parse_int(request.GET.get("after"))
    if after is not None:
        scores = scores.filter(trajectory_id__gt=after)
    rows = list(scores.order_by("trajectory_id")[:51])
    context = {
        "job": job,
        "run": job.run,
        "rows": rows[:50],
        "next_after": rows[49].trajectory_id if len(rows) > 50 else None,
        "show": show,
        "pairs": services.score_pairs(job) if not job.is_active else [],
    }
    return render(request, "review/rejudge_detail.html", context)


def rejudge_progress(request, job_id):
    job = _job(request, job_id)
    response = render(request, "review/_rejudge_progress.html", {"job": job})
    if not job.is_active and request.htmx:
        # Done: reload the whole page once, so the comparison appears (and polling stops).
        response["HX-Refresh"] = "true"
    return response


def rejudge_resume(request, job_id):
    """Queue a failed or cancelled job again: it continues after the last sample it scored."""
    job = _job(request, job_id)
    if request.method == "POST" and job.status in (RejudgeJob.Status.FAILED, RejudgeJob.Status.CANCELLED):
        services.resume_rejudge(job)
        messages.success(request, "Re-judge job queued again; it continues where it stopped.")
    return redirect("review:rejudge", job_id=job.pk)


def rejudge_cancel(request, job_id):
    job = _job(request, job_id)
    if request.method == "POST" and job.is_active:
        RejudgeJob.objects.filter(pk=job.pk).update(cancel_requested=True)
        if job.status == RejudgeJob.Status.QUEUED:
            RejudgeJob.objects.filter(pk=job.pk, status=RejudgeJob.Status.QUEUED).update(status=RejudgeJob.Status.CANCELLED)
        messages.success(request, "Cancelling the re-judge job.")
    return redirect("review:rejudge", job_id=job.pk)


def sample_response(request, run_id, sample_id):
    """Just the response text (the list expands a row with it, on demand)."""
    run = _run(request, run_id)
    text = Trajectory.objects.filter(run=run, pk=sample_id).values_list("response", flat=True).first()
    if text is None:
        raise Http404("No such sample.")
    return HttpResponse(text, content_type="text/plain; charset=utf-8")
