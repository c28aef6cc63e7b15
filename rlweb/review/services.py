"""What rollout review does, apart from the web: flags, re-judge jobs, the JSONL export, and the
shapes the detail pages show (token heat strip, response diff, a prompt's history)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import difflib
import json
import logging
import math
import re
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F
from django.http import QueryDict
from django.utils import timezone

from rlweb.runs.models import Run, Trajectory

from .copy import copy_rows
from .forms import filters_from_query
from .models import RejudgeJob, RejudgeScore, SampleFlag
from .queries import LIST_FIELDS, filter_samples, run_samples

log = logging.getLogger(__name__)

# --- flags --------------------------------------------------------------------------------


def add_flag(trajectory: Trajectory, user, kind: str, note: str = "") -> SampleFlag:
    return SampleFlag.objects.create(run_id=trajectory.run_id, trajectory=trajectory, user=user, kind=kind, note=note.strip())


def flags_by_sample(trajectory_ids) -> dict[int, list[SampleFlag]]:
    out: dict[int, list[SampleFlag]] = {}
    for flag in SampleFlag.objects.filter(trajectory_id__in=list(trajectory_ids)).select_related("user").order_by("id"):
        out.setdefault(flag.trajectory_id, []).append(flag)
    return out


# --- export -------------------------------------------------------------------------------

EXPORT_CHUNK = 1000
EXPORT_FIELDS = (*LIST_FIELDS, "prompt", "response", "label", "explanation")


def export_lines(run: Run, query: QueryDict, with_tokens: bool = False, chunk: int | None = None) -> Iterator[bytes]:
    """The run's samples (those of the list filters in `query`) as JSONL, one block of lines per
    chunk of samples, each line with the sample's flags.

    Chunks are keyset pages by id, each its own short query: memory stays at one chunk however
    large the run, and no transaction or server-side cursor stays open while a slow client
    reads (the same code works under WSGI and ASGI)."""
    _, filters = filters_from_query(query)
    qs = filter_samples(run_samples(run), filters)
    fields = (*EXPORT_FIELDS, "tokens") if with_tokens else EXPORT_FIELDS
    chunk = chunk or EXPORT_CHUNK
    last_id = 0
    while True:
        rows = list(qs.filter(id__gt=last_id).order_by("id").values(*fields)[:chunk])
        if not rows:
            return
        last_id = rows[-1]["id"]
        flags = flags_by_sample(row["id"] for row in rows)
        lines = []
        for row in rows:
            row["run"] = row.pop("run_id")
            row["flags"] = [flag.as_export() for flag in flags.get(row["id"], [])]
            lines.append(json.dumps(row, ensure_ascii=False, allow_nan=False, default=str))
        yield ("\n".join(lines) + "\n").encode()
        if len(rows) < chunk:
            return


# --- re-judge -----------------------------------------------------------------------------

REJUDGE_BATCH = 2000
# Scores closer than this are the same score (floating-point noise of weighted sums).
SCORE_TOLERANCE = 1e-6


def spec_snapshot(judger) -> dict:
    """The judger's validated spec as plain JSON, references to other judgers inline:
    {"kind": ..., **params}. Raises django's ValidationError if it does not validate."""
    from rlweb.judgers.services import resolve_spec

    return resolve_spec(judger)


def spec_from_snapshot(snapshot: dict):
    from workers.rl.judgers.spec import parse_judger_spec

    params = {k: v for k, v in snapshot.items() if k != "kind"}
    return parse_judger_spec(snapshot["kind"], params)


def filters_to_json(query: QueryDict) -> dict:
    """The list filters of a query string, as stored on a job (pagination and sort dropped)."""
    return {key: query.getlist(key) for key in query if key not in ("after", "before", "sort", "page") and any(query.getlist(key))}


def filters_from_json(data: dict) -> QueryDict:
    query = QueryDict(mutable=True)
    for key, values in (data or {}).items():
        query.setlist(key, [str(v) for v in values])
    return query


def start_rejudge(run: Run, user, judger, filters: dict | None = None) -> RejudgeJob:
    """Create a job for `judger` (which the caller checked `user` may use) and queue it."""
    from .tasks import rejudge_run

    job = RejudgeJob.objects.create(
        run=run, created_by=user, judger=judger, judger_name=judger.name, spec=spec_snapshot(judger), filters=filters or {}
    )
    transaction.on_commit(lambda: _enqueue(rejudge_run, job.pk))
    return job


def resume_rejudge(job: RejudgeJob) -> None:
    from .tasks import rejudge_run

    RejudgeJob.objects.filter(pk=job.pk).update(status=RejudgeJob.Status.QUEUED, cancel_requested=False, error="", finished_at=None)
    transaction.on_commit(lambda: _enqueue(rejudge_run, job.pk))


def _enqueue(task, job_id: int) -> None:
    result = task.delay(job_id)
    RejudgeJob.objects.filter(pk=job_id).update(celery_task_id=result.id or "")


def disagrees(old_score: float | None, new_score: float | None) -> bool:
    if old_score is None or new_score is None:
        return (old_score is None) != (new_score is None)
    return abs(old_score - new_score) > SCORE_TOLERANCE


def _sample_of(row: dict):
    from workers.rl.sample import Sample

    return Sample(
        uid=row["uid"],
        group_id=row["group_id"],
        prompt=row["prompt"],
        prompt_ids=[],
        label=row["label"],
        data_source=row["data_source"],
        index=row["prompt_index"] if row["prompt_index"] is not None else -1,
        response=row["response"],
        # Stored samples keep their text, not their token ids; the length is enough for a length
        # penalty to count tokens as the run did.
        response_ids=[0] * row["response_len"],
    )


def run_rejudge(job_id: int, batch: int = REJUDGE_BATCH) -> RejudgeJob:
    """Score the job's samples with its judger, batch by batch, writing scores and progress after
    each batch. Resumable: it continues after the last sample already scored."""
    job = RejudgeJob.objects.select_related("run").get(pk=job_id)
    if job.status not in RejudgeJob.ACTIVE:
        return job
    try:
        _run_rejudge(job, batch)
    except Exception as exc:
        log.exception("re-judge job %s failed", job_id)
        RejudgeJob.objects.filter(pk=job_id).update(
            status=RejudgeJob.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:5000], finished_at=timezone.now()
        )
    job.refresh_from_db()
    return job


class _JudgingLoop:
    """An event loop on a thread of its own for the async judger, so that a job runs the same
    from a Celery worker and from a caller with an event loop running in its thread."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="rejudge")

    def run(self, coroutine):
        return self.thread.submit(self.loop.run_until_complete, coroutine).result()

    def close(self):
        self.thread.submit(self.loop.close).result()
        self.thread.shutdown()


SCORE_COLUMNS = ("job_id", "trajectory_id", "score", "old_score", "components", "explanation", "status", "disagrees")


def _score_records(job_id: int, rows: list[dict], judged: list) -> tuple[list[tuple], int, int]:
    """RejudgeScore rows (SCORE_COLUMNS) for judged samples, and how many disagree / failed."""
    from workers.rl.sample import SampleStatus

    records, n_disagree, n_failed = [], 0, 0
    for row, sample in zip(rows, judged):
        failed = sample.status == SampleStatus.FAILED
        score = None if failed else sample.score
        differs = disagrees(row["reward"], score)
        n_disagree += differs
        n_failed += failed
        components = {} if failed else {k: v for k, v in sample.reward.items() if k != "score" and math.isfinite(v)}
        # A failed verdict's explanation is the error. NUL cannot be stored in a text column.
        explanation = ((sample.error or "") if failed else sample.explanation)[:10_000].replace("\x00", "")
        records.append((job_id, row["id"], score, row["reward"], components, explanation, "failed" if failed else "completed", differs))
    return records, n_disagree, n_failed


def _run_rejudge(job: RejudgeJob, batch: int) -> None:
    from workers.rl.judgers.build import build_judger

    # In this process, never on Ray: a re-judge is a background chore of the web side.
    judger = build_judger(spec_from_snapshot(job.spec), use_ray=False)
    _, filters = filters_from_query(filters_from_json(job.filters))
    samples = filter_samples(run_samples(job.run), filters)
    last_id = job.scores.order_by("-trajectory_id").values_list("trajectory_id", flat=True).first() or 0
    RejudgeJob.objects.filter(pk=job.pk).update(
        status=RejudgeJob.Status.RUNNING, total=samples.count(), started_at=job.started_at or timezone.now()
    )
    loop = _JudgingLoop()
    try:
        while rows := list(samples.filter(id__gt=last_id).order_by("id").values(*JUDGED_FIELDS)[:batch]):
            judged = loop.run(judger.judge_many([_sample_of(row) for row in rows]))
            records, n_disagree, n_failed = _score_records(job.pk, rows, judged)
            with transaction.atomic():
                copy_rows(RejudgeScore, SCORE_COLUMNS, records)
                RejudgeJob.objects.filter(pk=job.pk).update(
                    done=F("done") + len(rows),
                    disagree=F("disagree") + n_disagree,
                    agree=F("agree") + (len(rows) - n_disagree),
                    failed=F("failed") + n_failed,
                )
            last_id = rows[-1]["id"]
            if RejudgeJob.objects.filter(pk=job.pk, cancel_requested=True).exists():
                RejudgeJob.objects.filter(pk=job.pk).update(status=RejudgeJob.Status.CANCELLED, finished_at=timezone.now())
                return
        RejudgeJob.objects.filter(pk=job.pk).update(status=RejudgeJob.Status.COMPLETED, finished_at=timezone.now())
    finally:
        try:
            loop.run(judger.aclose())
        finally:
            loop.close()


JUDGED_FIELDS = ("id", "uid", "group_id", "prompt", "response", "label", "data_source", "prompt_index", "reward", "response_len")


def score_pairs(job: RejudgeJob, limit: int = 12) -> list[dict]:
    """How often each (run's score, new score) pair occurs, most frequent first: for rule judgers
    with a few distinct scores this is the confusion table of the two judgers."""
    from django.db.models import Count

    return list(
        job.scores.values("old_score", "score").annotate(n=Count("id")).order_by("-n", "old_score", "score")[:limit]
    )


# --- sample detail shapes ------------------------------------------------------------------

TOKEN_STRIP_LIMIT = 20_000


@dataclass
class StripToken:
    text: str
    logprob: float | None
    masked: bool

    @property
    def prob(self) -> float | None:
        return math.exp(self.logprob) if self.logprob is not None else None

    @property
    def heat(self) -> int:
        """0 (the model found the token unlikely) .. 9 (it was nearly certain)."""
        prob = self.prob
        return 9 if prob is None else max(0, min(9, int(prob * 10)))

    @property
    def title(self) -> str:
        if self.masked:
            return f"{self.text!r}: masked (prompt/tool token, not trained)"
        if self.logprob is None:
            return f"{self.text!r}: no logprob"
        return f"{self.text!r}: logprob {self.logprob:.3f}, p = {self.prob:.3f}"


def token_strip(tokens, limit: int = TOKEN_STRIP_LIMIT) -> tuple[list[StripToken], int]:
    """The stored [[text, logprob, mask], ...] as strip tokens (at most `limit`), and how many
    were left out. Malformed entries are shown as text without a logprob rather than failing."""
    out: list[StripToken] = []
    tokens = tokens if isinstance(tokens, list) else []
    for entry in tokens[:limit]:
        if not isinstance(entry, (list, tuple)) or not entry:
            continue
        text = str(entry[0])
        logprob = entry[1] if len(entry) > 1 and isinstance(entry[1], (int, float)) and math.isfinite(entry[1]) else None
        masked = len(entry) > 2 and not entry[2]
        out.append(StripToken(text, float(logprob) if logprob is not None else None, masked))
    return out, max(0, len(tokens) - limit)


def token_stats(strip: list[StripToken]) -> dict:
    trained = [t.logprob for t in strip if not t.masked and t.logprob is not None]
    return {
        "tokens": len(strip),
        "masked": sum(t.masked for t in strip),
        "mean_logprob": statistics.fmean(trained) if trained else None,
        "min_logprob": min(trained) if trained else None,
    }


_DIFF_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
DIFF_TOKEN_LIMIT = 20_000


def word_diff(before: str, after: str) -> list[tuple[str, str]]:
    """(op, text) segments, op in equal/delete/insert, turning `before` into `after` word by word.
    The template escapes the text: responses are model output and may contain any markup."""
    a = _DIFF_TOKEN.findall(before)[:DIFF_TOKEN_LIMIT]
    b = _DIFF_TOKEN.findall(after)[:DIFF_TOKEN_LIMIT]
    segments: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            segments.append(("equal", "".join(a[i1:i2])))
        else:
            if i2 > i1:
                segments.append(("delete", "".join(a[i1:i2])))
            if j2 > j1:
                segments.append(("insert", "".join(b[j1:j2])))
    return segments


@dataclass
class StepGroup:
    step: int
    samples: list = field(default_factory=list)

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.samples if s.reward is not None]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.rewards) if self.rewards else None

    @property
    def best(self):
        scored = [s for s in self.samples if s.reward is not None]
        return max(scored, key=lambda s: s.reward) if scored else (self.samples[0] if self.samples else None)


def prompt_history(run: Run, split: str, prompt_index: int, limit: int = 5000) -> list[StepGroup]:
    """Every step at which the prompt was sampled, with that step's samples (light fields)."""
    rows = (
        Trajectory.objects.filter(run=run, split=split, prompt_index=prompt_index)
        .only(*LIST_FIELDS)
        .order_by("step", "id")[:limit]
    )
    groups: dict[int, StepGroup] = {}
    for row in rows:
        groups.setdefault(row.step, StepGroup(row.step)).samples.append(row)
    return list(groups.values())


def group_samples(run: Run, group_id: str, step: int | None = None):
    qs = Trajectory.objects.filter(run=run, group_id=group_id)
    if step is not None:
        qs = qs.filter(step=step)
    return list(qs.defer("tokens").order_by("id")[:512])


def group_stats(samples) -> dict:
    rewards = [s.reward for s in samples if s.reward is not None]
    return {
        "n": len(samples),
        "mean": statistics.fmean(rewards) if rewards else None,
        "std": statistics.pstdev(rewards) if len(rewards) > 1 else (0.0 if rewards else None),
        "zero_variance": len(set(rewards)) <= 1 if rewards else None,
    }

