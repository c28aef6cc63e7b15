from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods

from rlweb.core.ownership import get_visible_or_404
from rlweb.core.params import parse_int

from . import jsoncodec, rendering, services
from .forms import ArithForm, HfDirForm, PreviewForm, UploadForm
from .models import Dataset, DatasetRow
from .uploads import SizeLimitUploadHandler

ROWS_PER_PAGE = 25


@require_GET
def dataset_list(request):
    datasets = Dataset.objects.visible_to(request.user).select_related("owner").defer("field_summary", "import_report")
    page = Paginator(datasets, 25).get_page(request.GET.get("page"))
    return render(request, "datasets/list.html", {"page_obj": page, "datasets": page.object_list})


def _new_page(request, upload=None, hf=None, arith=None, status=200):
    context = {
        "upload_form": upload or UploadForm(),
        "hf_form": hf or HfDirForm(),
        "arith_form": arith or ArithForm(),
    }
    return render(request, "datasets/new.html", context, status=status)


@require_GET
def dataset_new(request):
    return _new_page(request)


def _add_import_errors(form, failed: services.ImportFailed) -> None:
    """Put an ImportFailed found before queueing onto the form: on the field it names when
    the form has that field, else at the top."""
    for error in failed.errors:
        field = error.get("field")
        target = {"path": "path", "name": "name", "file": "file", "format": "format"}.get(field)
        if target in form.fields:
            form.add_error(target, error["message"])
        else:
            form.add_error(None, error["message"])


def _post_only(view):
    """POST endpoints of forms that live on another page: a GET goes to that page."""

    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            return redirect("datasets:new")
        return view(request, *args, **kwargs)

    wrapped.__name__, wrapped.__doc__ = view.__name__, view.__doc__
    return wrapped


@csrf_exempt
@_post_only
def dataset_upload(request):
    # The size check must be installed before anything reads the body, and CSRF checking reads
    # it: so this view is exempt and the real one below is protected (Django's documented way).
    request.upload_handlers.insert(0, SizeLimitUploadHandler(request))
    return _dataset_upload(request)


@csrf_protect
def _dataset_upload(request):
    form = UploadForm(request.POST, request.FILES)
    too_large = getattr(request, "upload_too_large", None)
    if too_large:
        form.is_valid()
        form.errors.pop("file", None)
        limit = services.human_size(request.upload_handlers[0].limit)
        form.add_error("file", f"{too_large} is larger than the upload limit of {limit} (UPLOAD_MAX_BYTES).")
        return _new_page(request, upload=form, status=413)
    if not form.is_valid():
        return _new_page(request, upload=form, status=400)
    options = form.options()
    try:
        dataset = services.start_import(
            request.user, form.cleaned_data["name"], form.cleaned_data["file"], form.cleaned_data["format"] or None, **options
        )
    except services.ImportFailed as failed:
        _add_import_errors(form, failed)
        return _new_page(request, upload=form, status=400)
    return redirect("datasets:detail", pk=dataset.pk)


@_post_only
def dataset_hf(request):
    form = HfDirForm(request.POST)
    if not form.is_valid():
        return _new_page(request, hf=form, status=400)
    try:
        path = services.check_server_path(form.cleaned_data["path"])
        dataset = services.start_import(request.user, form.cleaned_data["name"], path, "hf_dir", **form.options())
    except services.ImportFailed as failed:
        _add_import_errors(form, failed)
        return _new_page(request, hf=form, status=400)
    return redirect("datasets:detail", pk=dataset.pk)


@_post_only
def dataset_arith(request):
    form = ArithForm(request.POST)
    if not form.is_valid():
        return _new_page(request, arith=form, status=400)
    data = form.cleaned_data
    try:
        dataset = services.generate_arith_dataset(request.user, data["name"], data["n_train"], data["n_eval"], data["seed"])
    except services.ImportFailed as failed:
        _add_import_errors(form, failed)
        return _new_page(request, arith=form, status=400)
    messages.success(request, f"Generated {dataset.row_count} arith rows.")
    return redirect("datasets:detail", pk=dataset.pk)


def _preview(request, dataset):
    """The page of rows the query asks for, each with its prompt rendered for the model."""
    form = PreviewForm(request.GET or None)
    query = form.cleaned_data if form.is_valid() else {"q": "", "split": "", "data_source": "", "template": "{prompt}", "model": ""}
    rows = DatasetRow.objects.filter(dataset=dataset).order_by("index")
    if query.get("split"):
        rows = rows.filter(split=query["split"])
    if query.get("data_source"):
        rows = rows.filter(data_source=query["data_source"])
    q = (query.get("q") or "").strip()
    if q:
        match = Q(prompt__icontains=q) | Q(answer__icontains=q) | Q(messages__icontains=q)
        index = parse_int(q)
        if index is not None:
            match |= Q(index=index)
        rows = rows.filter(match)
    page = Paginator(rows, ROWS_PER_PAGE).get_page(request.GET.get("page"))
    render_error, chat = None, None
    try:
        chat = rendering.load_chat_template(query.get("model") or "")
    except rendering.RenderError as exc:
        render_error = str(exc)
    template = query.get("template") or "{prompt}"
    shown = []
    for row in page.object_list:
        try:
            text = rendering.render_prompt(row.prompt, row.messages, template, chat)
        except rendering.RenderError as exc:
            render_error, text = str(exc), None
        shown.append({"row": row, "rendered": text, "extra": jsoncodec.dumps(row.extra) if row.extra else ""})
    params = request.GET.copy()
    params.pop("page", None)
    return {
        "preview_form": form,
        "page_obj": page,
        "rows": shown,
        "query_string": params.urlencode(),
        "render_error": render_error,
        "chat_template": chat,
        "local_models": rendering.local_models(),
    }


@require_GET
def dataset_detail(request, pk):
    dataset = get_visible_or_404(Dataset, request.user, pk=pk)
    context = {"dataset": dataset, "report": dataset.import_report or {}}
    if dataset.status == Dataset.Status.READY:
        context.update(_preview(request, dataset))
        if request.htmx and request.htmx.target == "rows":
            return render(request, "datasets/_rows.html", context)
    return render(request, "datasets/detail.html", context)


@require_GET
def dataset_progress(request, pk):
    """The progress bar, polled by htmx while the import runs; once it ended, the page reloads."""
    dataset = get_visible_or_404(Dataset, request.user, pk=pk)
    response = render(request, "datasets/_progress.html", {"dataset": dataset})
    if dataset.status != Dataset.Status.IMPORTING:
        response["HX-Refresh"] = "true"
    return response


@require_http_methods(["GET", "POST"])
def dataset_delete(request, pk):
    dataset = get_visible_or_404(Dataset, request.user, pk=pk)
    if request.method == "GET":
        return render(request, "datasets/delete.html", {"dataset": dataset})
    if dataset.status == Dataset.Status.IMPORTING and not dataset.import_stalled:
        messages.error(request, "The dataset is still importing; delete it when the import has ended.")
        return redirect("datasets:detail", pk=dataset.pk)
    name = dataset.name
    dataset.delete()
    messages.success(request, f"Deleted dataset {name}.")
    return redirect("datasets:list")


@require_GET
def dataset_export(request, pk):
    """The rows as JSONL (the form a run hands to the engine), streamed."""
    dataset = get_visible_or_404(Dataset, request.user, pk=pk)
    split = request.GET.get("split") or None
    try:
        rows = services.rows_of(dataset, split)
    except ValueError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain")
    fields = ("index", "prompt", "messages", "answer", "data_source", "extra")
    lines = (jsoncodec.dumps(services.row_record(*values)) + "\n" for values in rows.values_list(*fields).iterator(chunk_size=2000))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    filename = f"{slugify(dataset.name) or 'dataset'}{'-' + split if split else ''}.jsonl"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
