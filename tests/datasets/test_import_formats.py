"""CSV/TSV, Parquet, local Hugging Face directories and the builtin arith task."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlweb.datasets.models import Dataset, DatasetRow
from rlweb.datasets.services import ImportFailed, check_server_path, generate_arith_dataset, import_dataset

pytestmark = pytest.mark.django_db


def rows_of(dataset):
    return list(DatasetRow.objects.filter(dataset=dataset).order_by("index"))


def test_csv_rows_keep_multiline_cells_and_json_messages(alice, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text(
        'prompt,answer,data_source,messages,note\n'
        '"Line one\nline two",5,arith,,first\n'
        ',,chat,"[{""role"": ""user"", ""content"": ""hi""}]",second\n',
        encoding="utf-8",
    )
    dataset = import_dataset(alice, "csv", str(path))
    multi, chat = rows_of(dataset)
    assert (multi.prompt, multi.answer, multi.data_source, multi.extra) == ("Line one\nline two", "5", "arith", {"note": "first"})
    assert chat.messages == [{"role": "user", "content": "hi"}] and chat.prompt == ""


def test_csv_errors_name_the_physical_line(alice, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(
        b'prompt,answer\n'
        b'"spans\ntwo lines",1\n'  # lines 2-3
        b'too,many,cells\n'  # line 4
        b',\n'  # line 5: empty prompt, no messages column
        b'caf\xe9,2\n'  # line 6: invalid UTF-8
        b'fine,3\n'
    )
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "bad-csv", str(path))
    errors = {e["line"]: e["message"] for e in caught.value.errors}
    assert sorted(errors) == [4, 5, 6]
    assert "has 3 fields; the header has 2" in errors[4]
    assert "missing prompt" in errors[5]
    assert "invalid UTF-8" in errors[6]


def test_a_csv_without_a_prompt_column_is_refused_at_the_header(alice, tmp_path):
    path = tmp_path / "nohead.csv"
    path.write_text("question,answer\nq,1\n")
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "nohead", str(path))
    assert caught.value.errors[0]["line"] == 1 and "no 'prompt' or 'messages' column" in caught.value.errors[0]["message"]
    assert import_dataset(alice, "mapped", str(path), columns={"prompt": "question"}).row_count == 1


def test_tsv_is_read_with_tabs(alice, tmp_path):
    path = tmp_path / "data.tsv"
    path.write_text("prompt\tanswer\na, b\t1\n")
    (row,) = rows_of(import_dataset(alice, "tsv", str(path)))
    assert (row.prompt, row.answer) == ("a, b", "1")


def test_parquet_rows_with_chat_prompts_and_row_numbered_errors(alice, tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(
        pa.table(
            {
                "prompt": [[{"role": "user", "content": "2+2?"}], [{"role": "user", "content": "3+3?"}]],  # verl style
                "answer": ["4", "6"],
                "data_source": ["math", "math"],
                "level": [1, 2],
            }
        ),
        good,
    )
    dataset = import_dataset(alice, "parquet", str(good))
    first, second = rows_of(dataset)
    assert first.messages == [{"role": "user", "content": "2+2?"}] and first.extra == {"level": 1}
    assert dataset.import_report["where"] == "row"

    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"prompt": ["ok", None, "ok too"], "answer": [1.5, 2.0, None]}), bad, row_group_size=1)
    with pytest.raises(ImportFailed) as caught:
        import_dataset(alice, "bad-parquet", str(bad))
    assert [(e["line"], e["field"]) for e in caught.value.errors] == [(2, "prompt")]


def test_a_file_that_is_not_parquet_is_refused(alice, tmp_path):
    path = tmp_path / "fake.parquet"
    path.write_text("prompt\nx\n")
    with pytest.raises(ImportFailed, match="not a readable Parquet file"):
        import_dataset(alice, "fake", str(path))


def make_hf_dir(path, splits: dict):
    """A save_to_disk directory written by the real `datasets` library, in a subprocess (so
    this test process keeps whatever modules it had)."""
    import json
    import subprocess
    import sys

    code = (
        "import datasets, json, sys; splits = json.loads(sys.argv[2]);"
        "d = {k: datasets.Dataset.from_list(v) for k, v in splits.items()};"
        "(d['_'] if list(d) == ['_'] else datasets.DatasetDict(d)).save_to_disk(sys.argv[1])"
    )
    subprocess.run([sys.executable, "-c", code, str(path), json.dumps(splits)], check=True, capture_output=True)
    return path


def test_a_saved_datasetdict_keeps_its_train_and_test_splits(alice, tmp_path, settings):
    settings.DATASET_ROOTS = [tmp_path]
    root = make_hf_dir(
        tmp_path / "gsm",
        {"train": [{"question": "a?", "answer": "1"}, {"question": "b?", "answer": "2"}], "test": [{"question": "c?", "answer": "3"}]},
    )
    dataset = import_dataset(alice, "hf", str(check_server_path(root)), "hf_dir", columns={"prompt": "question"})
    assert (dataset.train_count, dataset.eval_count) == (2, 1)
    assert [(r.prompt, r.split) for r in rows_of(dataset)] == [("a?", "train"), ("b?", "train"), ("c?", "eval")]
    assert dataset.source == Dataset.Source.HF_DIR and dataset.field_summary["split_from_file"]


def test_a_saved_single_dataset_imports_and_paths_outside_the_roots_are_refused(alice, tmp_path, settings):
    root = make_hf_dir(tmp_path / "one", {"_": [{"prompt": "x", "label": 3}]})
    settings.DATASET_ROOTS = [tmp_path / "elsewhere"]
    with pytest.raises(ImportFailed, match="not under an allowed dataset directory"):
        check_server_path(root)
    settings.DATASET_ROOTS = [tmp_path]
    (row,) = rows_of(import_dataset(alice, "single", str(check_server_path(root))))
    assert (row.prompt, row.answer) == ("x", "3")


def test_the_builtin_arith_task_has_disjoint_train_and_eval_problems(alice):
    dataset = generate_arith_dataset(alice, "arith", n_train=300, n_eval=50, seed=1)
    assert (dataset.row_count, dataset.train_count, dataset.eval_count) == (350, 300, 50)
    rows = rows_of(dataset)
    train = {r.prompt for r in rows if r.split == "train"}
    evaluation = {r.prompt for r in rows if r.split == "eval"}
    assert not train & evaluation
    sample = rows[0]
    a, b = sample.prompt.rstrip("=").split("+")
    assert sample.answer == str(int(a) + int(b)) and sample.data_source == "arith"
    assert dataset.source == Dataset.Source.BUILTIN
