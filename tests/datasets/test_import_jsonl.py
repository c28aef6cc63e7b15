"""Importing JSONL: the field mapping, precise errors, all-or-nothing, skip bad rows, duplicates."""

import json

import pytest

from rlweb.datasets import jsoncodec, services
from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.datasets.services import ImportFailed, import_dataset

pytestmark = pytest.mark.django_db


def rows_of(dataset):
    return list(DatasetRow.objects.filter(dataset=dataset).order_by("index"))


@pytest.fixture(params=["default", "stdlib"])
def codec(request, monkeypatch):
    """orjson (when installed) and the standard library must accept and refuse the same rows."""
    if request.param == "stdlib":
        monkeypatch.setattr(jsoncodec, "loads", jsoncodec.std_loads)
        monkeypatch.setattr(jsoncodec, "dumps", jsoncodec.std_dumps)
        monkeypatch.setattr(jsoncodec, "FAST", False)
    return request.param


def test_it_maps_prompt_messages_answer_label_data_source_and_keeps_the_rest_as_extra(alice, jsonl_file, good_rows, codec):
    dataset = import_dataset(alice, "mixed", jsonl_file(good_rows))
    assert dataset.status == Dataset.Status.READY
    assert (dataset.row_count, dataset.train_count, dataset.eval_count) == (4, 4, 0)
    first, second, chat, plain = rows_of(dataset)
    assert (first.index, first.prompt, first.messages, first.answer, first.data_source, first.extra) == (
        0, "What is 2+3?", None, "5", "arith", {"id": "a"},
    )
    assert second.answer == "42"  # numbers are answers too, stored as text
    assert chat.prompt == "" and chat.messages[1] == {"role": "user", "content": "Capital of France?"}
    assert chat.answer == "Paris" and chat.data_source == "geo"  # `label` is the answer
    assert plain.answer == "" and plain.extra == {"topic": {"nested": [1, 2]}}
    summary = dataset.field_summary
    assert summary["prompt_rows"] == 3 and summary["messages_rows"] == 1 and summary["with_answer"] == 3
    assert summary["data_sources"] == {"arith": 2, "geo": 1, "": 1}
    assert summary["extra_fields"] == {"id": 2, "topic": 1}


def test_it_refuses_a_file_with_bad_rows_listing_each_with_line_and_field_and_writes_nothing(alice, jsonl_file, codec):
    path = jsonl_file(
        [
            {"prompt": "fine", "answer": "1"},
            '{"prompt": "unclosed", ',
            {"prompt": "x", "answer": ["a", "list"]},
            {"answer": "no prompt"},
            b'{"prompt": "caf\xe9"}',
            {"prompt": 12},
            "[1, 2]",
            {"messages": [{"role": "robot", "content": "hi"}]},
            {"prompt": "   "},
            {"prompt": "both", "messages": [{"role": "user", "content": "hi"}]},
            {"prompt": "ok", "data_source": 7},
        ]
    )
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "broken", path)
    errors = {e["line"]: e for e in caught.value.errors}
    assert sorted(errors) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert "not valid JSON" in errors[2]["message"]
    assert errors[3]["field"] == "answer" and "must be text or a number, not a list" in errors[3]["message"]
    assert errors[4]["field"] == "prompt" and "missing prompt" in errors[4]["message"]
    assert "invalid UTF-8" in errors[5]["message"]
    assert errors[6]["field"] == "prompt" and "not a number" in errors[6]["message"]
    assert "must be a JSON object, not a list" in errors[7]["message"]
    assert errors[8]["field"] == "messages" and "role 'robot'" in errors[8]["message"]
    assert "the prompt is empty" in errors[9]["message"]
    assert "both 'prompt' and 'messages'" in errors[10]["message"]
    assert errors[11]["field"] == "data_source"
    assert not Dataset.objects.filter(name="broken").exists()
    assert DatasetRow.objects.count() == 0


def test_skip_bad_rows_imports_the_good_ones_and_reports_how_many_were_skipped_and_why(alice, jsonl_file):
    path = jsonl_file([{"prompt": "a"}, "not json", {"prompt": "b"}, {"answer": "x"}, {"prompt": "c", "answer": {}}])
    dataset = import_dataset(alice, "skipping", path, skip_bad_rows=True)
    assert [r.prompt for r in rows_of(dataset)] == ["a", "b"]
    assert [r.index for r in rows_of(dataset)] == [0, 1]
    report = dataset.import_report
    assert report["skipped"] == 3 and report["error_count"] == 3
    assert report["errors_by_reason"] == {"bad_json": 1, "missing_prompt": 1, "wrong_type": 1}
    assert [e["line"] for e in report["errors"]] == [2, 4, 5]


def test_a_file_whose_rows_are_all_bad_is_refused_even_when_skipping(alice, jsonl_file):
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "all-bad", jsonl_file(["nope", "{}"]), skip_bad_rows=True)
    assert [e["line"] for e in caught.value.errors] == [1, 2]
    assert not Dataset.objects.filter(name="all-bad").exists()


def test_an_empty_file_is_refused_with_a_clear_error(alice, tmp_path, jsonl_file):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ImportFailed, match="the file is empty"):
        import_dataset(alice, "empty", str(empty))
    with pytest.raises(ImportFailed, match="the file is empty"):
        import_dataset(alice, "blank", jsonl_file(["", "   "]))
    assert Dataset.objects.count() == 0


def test_a_file_over_the_upload_limit_is_refused_before_reading_it(alice, jsonl_file, settings):
    settings.UPLOAD_MAX_BYTES = 100
    path = jsonl_file([{"prompt": "x" * 200}])
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "huge", path)
    assert "over the upload limit of 100 bytes" in caught.value.errors[0]["message"]
    assert caught.value.errors[0]["field"] == "file"


def test_a_json_array_file_is_refused_with_a_hint(alice, tmp_path):
    path = tmp_path / "array.json"
    path.write_text(json.dumps([{"prompt": "a"}]))
    with pytest.raises(ImportFailed, match="one JSON array; write one JSON object per line"):
        import_dataset(alice, "array", str(path))


def test_text_the_database_cannot_store_is_reported_not_crashed_on(alice, jsonl_file, codec):
    path = jsonl_file([{"prompt": "ok"}, '{"prompt": "nul \\u0000 here"}', '{"prompt": "lone \\ud800"}', '{"prompt": NaN}'])
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "unstorable", path)
    assert [e["line"] for e in caught.value.errors] == [2, 3, 4]
    assert "NUL" in caught.value.errors[0]["message"]


@pytest.mark.parametrize(
    "policy, kept, listed",
    [("report", ["a", "b", "a", "a"], [(3, 1), (4, 1)]), ("skip", ["a", "b"], [(3, 1), (4, 1)])],
)
def test_duplicate_rows_are_reported_and_optionally_dropped(alice, jsonl_file, policy, kept, listed):
    rows = [{"prompt": "a", "answer": "1"}, {"prompt": "b", "answer": "1"}, {"prompt": "a", "answer": "1"}, {"prompt": "a", "answer": "1", "other": 1}]
    dataset = import_dataset(alice, f"dups-{policy}", jsonl_file(rows), duplicates=policy)
    assert [r.prompt for r in rows_of(dataset)] == kept
    assert [(d["line"], d["duplicate_of"]) for d in dataset.import_report["duplicates"]] == listed
    assert dataset.import_report["duplicate_count"] == 2


def test_duplicates_can_be_treated_as_bad_rows(alice, jsonl_file):
    path = jsonl_file([{"prompt": "a"}, {"prompt": "b"}, {"prompt": "a"}])
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "dups", path, duplicates="error")
    assert caught.value.errors == [{"line": 3, "field": "", "message": "duplicate of line 1"}]


def test_the_eval_split_is_a_seeded_fraction(alice, jsonl_file):
    path = jsonl_file([{"prompt": f"p{i}"} for i in range(400)])
    one = import_dataset(alice, "split-1", path, eval_fraction=0.25, seed=7)
    two = import_dataset(alice, "split-2", path, eval_fraction=0.25, seed=7)
    other = import_dataset(alice, "split-3", path, eval_fraction=0.25, seed=8)
    assert 60 < one.eval_count < 140 and one.train_count + one.eval_count == 400
    splits = lambda d: [r.split for r in rows_of(d)]  # noqa: E731
    assert splits(one) == splits(two) != splits(other)


def test_columns_can_be_read_from_other_names(alice, jsonl_file):
    path = jsonl_file([{"question": "2+2?", "solution": "4", "prompt": "kept as extra"}])
    dataset = import_dataset(alice, "mapped", path, columns={"prompt": "question", "answer": "solution"})
    (row,) = rows_of(dataset)
    assert (row.prompt, row.answer, row.extra) == ("2+2?", "4", {"prompt": "kept as extra"})


def test_a_second_dataset_with_the_same_name_is_refused(alice, bob, jsonl_file, good_rows):
    path = jsonl_file(good_rows)
    import_dataset(alice, "same", path)
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "same", path)
    assert caught.value.errors[0]["field"] == "name"
    assert import_dataset(bob, "same", path).owner == bob  # names are per owner


def test_an_uploaded_file_object_imports_like_a_path(alice, good_rows):
    from django.core.files.uploadedfile import SimpleUploadedFile

    content = "\n".join(json.dumps(r) for r in good_rows).encode()
    dataset = import_dataset(alice, "uploaded", SimpleUploadedFile("rows.jsonl", content))
    assert dataset.row_count == 4 and dataset.source_name == "rows.jsonl"


def test_progress_is_reported_up_to_the_file_size(alice, jsonl_file):
    path = jsonl_file([{"prompt": f"row {i}"} for i in range(5000)])
    calls = []
    import_dataset(alice, "progress", path, progress=lambda done, total: calls.append((done, total)))
    import os

    size = os.path.getsize(path)
    assert len(calls) >= 3
    assert all(total == size for _, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert calls[-1] == (size, size)


def test_the_portable_bulk_create_path_stores_the_same_rows(alice, jsonl_file, good_rows, monkeypatch):
    # SQLite (embedded mode) takes this path; here it is forced on Postgres to compare.
    from rlweb.datasets import ingest, sinks

    copied = import_dataset(alice, "copied", jsonl_file(good_rows))
    monkeypatch.setattr(ingest, "open_sink", sinks.BulkCreateSink)
    bulk = import_dataset(alice, "bulk", jsonl_file(good_rows, name="again.jsonl"))
    fields = lambda d: [(r.index, r.split, r.prompt, r.messages, r.answer, r.data_source, r.extra) for r in rows_of(d)]  # noqa: E731
    assert fields(copied) == fields(bulk)


def test_exported_rows_are_what_the_engine_reads(alice, jsonl_file, good_rows, tmp_path):
    from pathlib import Path

    from workers.rl.data import read_jsonl

    dataset = import_dataset(alice, "export", jsonl_file(good_rows), eval_fraction=0.5, seed=3)
    out = tmp_path / "train.jsonl"
    count = services.export_rows_jsonl(dataset, "train", out)
    assert count == dataset.train_count
    engine_rows = read_jsonl(Path(out))
    stored = [r for r in rows_of(dataset) if r.split == "train"]
    assert [r["label"] for r in engine_rows] == [r.answer or None for r in stored]
    assert [r["prompt"] or r["messages"][-1]["content"] for r in engine_rows] == [r.prompt or r.messages[-1]["content"] for r in stored]
    everything = tmp_path / "all.jsonl"
    assert services.export_rows_jsonl(dataset, None, everything) == 4
    first = json.loads(everything.read_text().splitlines()[0])
    assert first == {"prompt": "What is 2+3?", "answer": "5", "data_source": "arith", "extra": {"id": "a"}, "index": 0}
