"""Dataset operations that pages, the API, Celery tasks and runs share.

- import_dataset: synchronous import of a file or directory; the dataset and all its rows are
  written in one transaction, or ImportFailed is raised and nothing exists.
- start_import / run_import: the same import as a Celery task, for uploads from the browser;
  the dataset exists at once (status "importing", with a progress bar) and ends "ready", or
  "failed" with its errors listed and no rows.
- generate_arith_dataset: the builtin two-digit addition task (workers.rl.arith).
- export_rows_jsonl: rows of one split as the JSONL file a run hands to the engine.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from . import jsoncodec
from .importers import FORMATS, FileError, detect_format, open_source
from .ingest import DUPLICATE_POLICIES, Outcome, ingest
from .models import Dataset, DatasetRow
from .progress import DatabaseProgress
from .validation import Columns

logger = logging.getLogger(__name__)


class ImportFailed(Exception):
    """The import wrote nothing. `errors`: [{line, field, message}] (line 0: the file as a whole);
    `report`: the full report (counts, duplicates, options), as stored on a failed dataset."""

    def __init__(self, errors: list[dict], report: dict | None = None):
        self.errors = errors
        self.report = report or {"errors": errors, "error_count": len(errors)}
        first = errors[0] if errors else {"line": 0, "message": "import failed"}
        where = f"line {first['line']}: " if first.get("line") else ""
        more = f" (and {self.report.get('error_count', len(errors)) - 1} more)" if len(errors) > 1 else ""
        super().__init__(f"{where}{first['message']}{more}")


def _fail(message: str, field: str = "", line: int = 0) -> ImportFailed:
    return ImportFailed([{"line": line, "field": field, "message": message}])


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


def check_size(size: int) -> None:
    limit = settings.UPLOAD_MAX_BYTES
    if size > limit:
        raise _fail(f"the file is {human_size(size)}, over the upload limit of {human_size(limit)} (UPLOAD_MAX_BYTES)", "file")


def _data_size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def check_server_path(path: str | os.PathLike) -> Path:
    """A server-side path people asked to import, resolved, if it lies under DATASET_ROOTS;
    else ImportFailed. Pages and the API must pass user-given paths through this."""
    resolved = Path(path).expanduser().resolve()
    roots = [Path(r).resolve() for r in settings.DATASET_ROOTS]
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        allowed = ", ".join(str(r) for r in roots) or "(none)"
        raise _fail(f"{path} is not under an allowed dataset directory ({allowed}; set DATASET_ROOTS)", "path")
    if not resolved.exists():
        raise _fail(f"{path} does not exist", "path")
    return resolved


@contextmanager
def _as_path(path_or_file):
    """A filesystem path for a path, an UploadedFile or any binary file object (copied to a
    temporary file in chunks: never read whole into memory)."""
    if isinstance(path_or_file, (str, os.PathLike)):
        yield Path(path_or_file), Path(path_or_file).name
        return
    name = os.path.basename(getattr(path_or_file, "name", "") or "upload")
    temporary = getattr(path_or_file, "temporary_file_path", None)
    if temporary is not None:
        yield Path(temporary()), name
        return
    fd, tmp = tempfile.mkstemp(prefix="rlweb-import-", suffix=os.path.splitext(name)[1])
    try:
        with os.fdopen(fd, "wb") as out:
            chunks = path_or_file.chunks() if hasattr(path_or_file, "chunks") else iter(lambda: path_or_file.read(1 << 20), b"")
            for chunk in chunks:
                out.write(chunk)
        yield Path(tmp), name
    finally:
        os.unlink(tmp)


def _options(skip_bad_rows, eval_fraction, seed, duplicates, columns) -> dict:
    if not 0.0 <= float(eval_fraction) < 1.0:
        raise _fail("eval_fraction must be at least 0 and less than 1", "eval_fraction")
    if duplicates not in DUPLICATE_POLICIES:
        raise _fail(f"duplicates must be one of {', '.join(DUPLICATE_POLICIES)}", "duplicates")
    try:
        cols = Columns.from_mapping(columns)
    except ValueError as exc:
        raise _fail(str(exc), "columns") from None
    return {
        "skip_bad_rows": bool(skip_bad_rows),
        "eval_fraction": float(eval_fraction),
        "seed": int(seed),
        "duplicates": duplicates,
        "columns": cols.as_dict(),
    }


def _report(outcome: Outcome, options: dict, fmt: str, where_name: str) -> dict:
    issues = outcome.issues
    skipped = issues.error_count if options["skip_bad_rows"] else 0
    if options["duplicates"] == "skip":
        skipped += issues.duplicate_count
    return {
        "format": fmt,
        "where": where_name,
        "options": options,
        "errors": issues.errors,
        "error_count": issues.error_count,
        "errors_by_reason": issues.by_reason,
        "skipped": skipped,
        "duplicates": issues.duplicates,
        "duplicate_count": issues.duplicate_count,
        "seconds": round(outcome.seconds, 3),
        "rows_per_second": round(outcome.row_count / outcome.seconds) if outcome.seconds > 0 else None,
    }


def _import_rows(dataset: Dataset, path: Path, fmt: str, options: dict, name: str, progress) -> tuple[Outcome, dict]:
    """Validate and write the rows of `path` into `dataset` inside the caller's transaction;
    ImportFailed (the caller rolls back) when the file or any row is bad."""
    columns = Columns.from_mapping(options["columns"])
    try:
        with open_source(path, fmt, columns, name=name) as source:
            outcome, ok = ingest(
                dataset.pk,
                source,
                skip_bad_rows=options["skip_bad_rows"],
                eval_fraction=options["eval_fraction"],
                seed=options["seed"],
                duplicates=options["duplicates"],
                columns=columns,
                progress=progress,
            )
            where_name = source.where_name
    except FileError as exc:
        raise ImportFailed([{"line": exc.line, "field": exc.field, "message": exc.message}]) from None
    report = _report(outcome, options, fmt, where_name)
    if not ok:
        errors = outcome.issues.errors or [{"line": 0, "field": "", "message": "every row was skipped: the file has no usable rows"}]
        raise ImportFailed(errors, report)
    return outcome, report


def _apply(dataset: Dataset, outcome: Outcome, report: dict) -> None:
    dataset.status = Dataset.Status.READY
    dataset.row_count = outcome.row_count
    dataset.train_count = outcome.train_count
    dataset.eval_count = outcome.eval_count
    dataset.field_summary = outcome.summary
    dataset.import_report = report
    dataset.progress_done = dataset.progress_total = max(dataset.progress_total, 1)
    dataset.save()


def _check_name(owner, name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise _fail("give the dataset a name", "name")
    if len(name) > Dataset._meta.get_field("name").max_length:
        raise _fail("the name is too long", "name")
    if Dataset.objects.filter(owner=owner, name=name).exists():
        raise _fail(f"you already have a dataset named {name!r}", "name")
    return name


def import_dataset(
    owner,
    name: str,
    path_or_file,
    fmt: str | None = None,
    *,
    skip_bad_rows: bool = False,
    eval_fraction: float = 0.0,
    seed: int = 0,
    progress=None,
    duplicates: str = "report",
    columns: dict | None = None,
    description: str = "",
) -> Dataset:
    """Import a JSONL/CSV/Parquet file (a path, an UploadedFile or a binary file object) or a
    `save_to_disk` directory as a new dataset of `owner`, synchronously. All or nothing: on any
    error raises ImportFailed and writes nothing (with `skip_bad_rows`, bad rows are left out
    and listed in `dataset.import_report` instead). `progress(done, total)` is called as it goes.
    `duplicates`: "report" (keep, list them), "skip" (drop repeats), "error" (bad rows).
    `columns`: {"prompt": "question", ...} to read row fields from other columns."""
    name = _check_name(owner, name)
    options = _options(skip_bad_rows, eval_fraction, seed, duplicates, columns)
    with _as_path(path_or_file) as (path, file_name):
        if not path.exists():
            raise _fail(f"{path} does not exist", "path")
        check_size(_data_size(path))
        try:
            fmt = fmt or detect_format(file_name, path)
        except FileError as exc:
            raise _fail(exc.message, "format") from None
        if fmt not in FORMATS:
            raise _fail(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})", "format")
        source = Dataset.Source.HF_DIR if fmt == "hf_dir" else Dataset.Source.UPLOAD
        try:
            with transaction.atomic():
                dataset = Dataset.objects.create(
                    owner=owner, name=name, description=description, source=source, source_name=file_name, status=Dataset.Status.IMPORTING
                )
                outcome, report = _import_rows(dataset, path, fmt, options, file_name, progress)
                _apply(dataset, outcome, report)
        except IntegrityError:  # the same name was taken meanwhile
            raise _fail(f"you already have a dataset named {name!r}", "name") from None
    logger.info("imported dataset %s (%s rows, %.0f rows/s)", dataset.pk, dataset.row_count, report["rows_per_second"] or 0)
    return dataset


# --- the same import as a background task ------------------------------------------------


def uploads_dir() -> Path:
    directory = Path(settings.DATA_DIR) / "uploads"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def start_import(
    owner,
    name: str,
    path_or_file,
    fmt: str | None = None,
    *,
    skip_bad_rows: bool = False,
    eval_fraction: float = 0.0,
    seed: int = 0,
    duplicates: str = "report",
    columns: dict | None = None,
    description: str = "",
) -> Dataset:
    """Check what can be checked at once (name, size, format, options), keep the upload under
    DATA_DIR/uploads, create the dataset in status "importing" and queue the import task (after
    the transaction commits). Server-side directories (hf_dir) are read in place. Raises
    ImportFailed for problems found before queueing."""
    from .tasks import import_dataset_task

    name = _check_name(owner, name)
    options = _options(skip_bad_rows, eval_fraction, seed, duplicates, columns)
    with _as_path(path_or_file) as (path, file_name):
        if not path.exists():
            raise _fail(f"{path} does not exist", "path")
        size = _data_size(path)
        check_size(size)
        try:
            fmt = fmt or detect_format(file_name, path)
        except FileError as exc:
            raise _fail(exc.message, "format") from None
        if fmt not in FORMATS:
            raise _fail(f"unknown format {fmt!r}", "format")
        if fmt == "hf_dir":
            stored, owned = path, False
        else:
            stored_dir = uploads_dir() / uuid.uuid4().hex
            stored_dir.mkdir()
            stored, owned = stored_dir / (os.path.basename(file_name) or "upload"), True
            shutil.copyfile(path, stored)
    source = Dataset.Source.HF_DIR if fmt == "hf_dir" else Dataset.Source.UPLOAD
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(
                owner=owner,
                name=name,
                description=description,
                source=source,
                source_name=file_name,
                status=Dataset.Status.IMPORTING,
                progress_total=size,
                import_report={"format": fmt, "options": options},
            )
            job = {"path": str(stored), "fmt": fmt, "name": file_name, "options": options, "delete_after": owned}
            transaction.on_commit(lambda: import_dataset_task.delay(dataset.pk, job))
    except IntegrityError:
        if owned:
            shutil.rmtree(stored.parent, ignore_errors=True)
        raise _fail(f"you already have a dataset named {name!r}", "name") from None
    return dataset


def run_import(dataset_id: int, job: dict) -> None:
    """The body of the import task: fill an "importing" dataset, or mark it failed with its
    report. Safe to run twice (a redelivered task finds the dataset no longer importing)."""
    dataset = Dataset.objects.filter(pk=dataset_id).first()
    path = Path(job["path"])
    try:
        if dataset is None or dataset.status != Dataset.Status.IMPORTING:
            return
        progress = DatabaseProgress(dataset.pk)
        try:
            with transaction.atomic():
                outcome, report = _import_rows(dataset, path, job["fmt"], job["options"], job["name"], progress)
                progress.close()  # before touching the dataset row in this transaction
                dataset.refresh_from_db(fields=["progress_total"])
                _apply(dataset, outcome, report)
        finally:
            progress.close()
    except ImportFailed as failed:
        _mark_failed(dataset, failed.report)
    except Exception as exc:
        logger.exception("import of dataset %s failed", dataset_id)
        _mark_failed(dataset, {"errors": [{"line": 0, "field": "", "message": f"the import stopped: {type(exc).__name__}: {exc}"}], "error_count": 1})
    finally:
        if job.get("delete_after"):
            shutil.rmtree(path.parent, ignore_errors=True)


def _mark_failed(dataset: Dataset, report: dict) -> None:
    report = {**dataset.import_report, **report}
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.FAILED, import_report=report, row_count=0, train_count=0, eval_count=0)


# --- builtin task ------------------------------------------------------------------------


class _RowsSource:
    """Generated rows as a source: (row number, record, split)."""

    where_name = "row"

    def __init__(self, parts: list[tuple[str, list[dict]]]):
        self.parts = parts
        self.total = sum(len(rows) for _, rows in parts)
        self._done = 0

    def __iter__(self):
        for split, rows in self.parts:
            for row in rows:
                self._done += 1
                yield self._done, dict(row), split

    def position(self) -> int:
        return self._done


def generate_arith_dataset(owner, name: str, n_train: int, n_eval: int, seed: int = 0) -> Dataset:
    """The builtin arith task ("37+45=" -> "82", data_source "arith") as a stored dataset:
    `n_train` train rows and `n_eval` eval rows from disjoint pools of problems."""
    from workers.rl import arith  # plain Python, torch-free

    name = _check_name(owner, name)
    if n_train < 1 or n_eval < 0 or n_train + n_eval > 10_000_000:
        raise _fail("n_train must be at least 1, n_eval at least 0, and the total at most 10,000,000", "n_train")
    options = _options(False, 0.0, seed, "report", None)
    source = _RowsSource([("train", arith.make_rows("train", n_train, seed)), ("eval", arith.make_rows("eval", n_eval, seed))])
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(
                owner=owner,
                name=name,
                source=Dataset.Source.BUILTIN,
                source_name=f"arith (train {n_train}, eval {n_eval}, seed {seed})",
                status=Dataset.Status.IMPORTING,
            )
            outcome, ok = ingest(dataset.pk, source, seed=seed)
            report = _report(outcome, options, "builtin", "row")
            if not ok:
                raise ImportFailed(outcome.issues.errors, report)
            _apply(dataset, outcome, report)
    except IntegrityError:
        raise _fail(f"you already have a dataset named {name!r}", "name") from None
    return dataset


# --- handing rows to the engine ----------------------------------------------------------


def rows_of(dataset: Dataset, split: str | None = None):
    rows = DatasetRow.objects.filter(dataset=dataset)
    if split in (DatasetRow.Split.TRAIN, DatasetRow.Split.EVAL):
        rows = rows.filter(split=split)
    elif split not in (None, "", "all"):
        raise ValueError(f"split must be 'train', 'eval' or 'all', not {split!r}")
    return rows.order_by("index")


def row_record(index, prompt, messages, answer, data_source, extra) -> dict:
    """One row as the engine reads it: `prompt` or `messages`, `answer` (null when the row has
    no reference answer), `data_source`, `extra`, and its `index` in the dataset."""
    record = {"messages": messages} if messages is not None else {"prompt": prompt}
    record.update(answer=answer if answer != "" else None, data_source=data_source, extra=extra or {}, index=index)
    return record


def export_rows_jsonl(dataset: Dataset, split: str | None, path: str | os.PathLike) -> int:
    """Write the rows of `split` ("train", "eval", or None/"all") in index order to `path` as
    JSONL (see row_record). Streams from the database; returns the number of rows written."""
    fields = ("index", "prompt", "messages", "answer", "data_source", "extra")
    dumps = jsoncodec.dumps
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        buffer = []
        for values in rows_of(dataset, split).values_list(*fields).iterator(chunk_size=5000):
            buffer.append(dumps(row_record(*values)))
            count += 1
            if len(buffer) >= 5000:
                out.write("\n".join(buffer) + "\n")
                buffer.clear()
        if buffer:
            out.write("\n".join(buffer) + "\n")
    return count
