"""Files to import, written the way people's files are (good ones, and every kind of broken)."""

import json

import pytest


def write_jsonl(path, rows) -> str:
    """Rows are dicts (written as JSON) or raw strings/bytes (written as they are)."""
    with open(path, "wb") as out:
        for row in rows:
            if isinstance(row, dict):
                row = json.dumps(row)
            if isinstance(row, str):
                row = row.encode("utf-8")
            out.write(row + b"\n")
    return str(path)


@pytest.fixture
def jsonl_file(tmp_path):
    def make(rows, name="data.jsonl"):
        return write_jsonl(tmp_path / name, rows)

    return make


@pytest.fixture
def good_rows():
    return [
        {"prompt": "What is 2+3?", "answer": "5", "data_source": "arith", "id": "a"},
        {"prompt": "What is 7*6?", "answer": 42, "data_source": "arith", "id": "b"},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Capital of France?"}], "label": "Paris", "data_source": "geo"},
        {"prompt": "Say hi", "topic": {"nested": [1, 2]}},
    ]
