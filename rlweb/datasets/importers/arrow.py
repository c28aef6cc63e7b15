"""Parquet files and local Hugging Face `datasets` directories (`save_to_disk`), both read
batch by batch with pyarrow: neither `datasets` nor torch is imported in the web process.

A `save_to_disk` directory holds either one dataset (`state.json` naming its Arrow stream
files) or a DatasetDict (`dataset_dict.json` listing split subdirectories). Split names map to
our splits: `train` to train; `test`, `validation`, `valid`, `eval`, `dev` to eval.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .base import FileError, Source

BATCH_ROWS = 4096
EVAL_SPLIT_NAMES = frozenset({"test", "validation", "valid", "eval", "evaluation", "dev"})


def _rows(batches, first_row: int, split: str | None, source: "Source"):
    row = first_row
    for batch in batches:
        try:
            records = batch.to_pylist()
        except Exception as exc:  # e.g. invalid UTF-8 in a string column
            raise FileError(f"rows {row + 1}-{row + batch.num_rows} cannot be read: {exc}", line=row + 1) from None
        for record in records:
            row += 1
            yield row, record, split
        source._advance(batch)


class ParquetSource(Source):
    unit = "rows"
    where_name = "row"

    def __init__(self, path, columns):
        super().__init__(path, columns)
        import pyarrow.parquet as pq

        try:
            self._file = pq.ParquetFile(path)
        except Exception as exc:
            raise FileError(f"not a readable Parquet file: {exc}") from None
        self.total = self._file.metadata.num_rows
        self._done = 0
        names = set(self._file.schema_arrow.names)
        if columns.prompt not in names and columns.messages not in names:
            raise FileError(
                f"the file has no '{columns.prompt}' or '{columns.messages}' column (columns: {', '.join(sorted(names))})",
                field="header",
            )

    def _advance(self, batch) -> None:
        self._done += batch.num_rows

    def position(self) -> int:
        return self._done

    def close(self) -> None:
        self._file.close()

    def __iter__(self):
        return _rows(self._file.iter_batches(batch_size=BATCH_ROWS), 0, None, self)


class HfDirSource(Source):
    """A directory written by `datasets.Dataset.save_to_disk` or `DatasetDict.save_to_disk`."""

    unit = "bytes"
    where_name = "row"

    def __init__(self, path, columns):
        super().__init__(path, columns)
        root = Path(path)
        if not root.is_dir():
            raise FileError(f"{root} is not a directory")
        self.parts = self._parts(root)  # [(split or None, [arrow files])]
        files = [f for _, fs in self.parts for f in fs]
        if not files:
            raise FileError("the dataset directory has no data files")
        self.total = sum(f.stat().st_size for f in files)
        self._done = 0

    @staticmethod
    def _parts(root: Path) -> list[tuple[str | None, list[Path]]]:
        if (root / "dataset_dict.json").exists():
            try:
                splits = json.loads((root / "dataset_dict.json").read_text())["splits"]
            except (ValueError, KeyError, TypeError) as exc:
                raise FileError(f"dataset_dict.json cannot be read: {exc}") from None
            parts = []
            for name in splits:
                if name == "train":
                    ours = "train"
                elif name in EVAL_SPLIT_NAMES:
                    ours = "eval"
                else:
                    raise FileError(
                        f"split {name!r} is neither train nor an eval split ({', '.join(sorted(EVAL_SPLIT_NAMES))})",
                        field="split",
                    )
                parts.append((ours, HfDirSource._files(root / name)))
            return parts
        if (root / "state.json").exists():
            return [(None, HfDirSource._files(root))]
        raise FileError("not a Hugging Face dataset directory (no state.json or dataset_dict.json; use save_to_disk)")

    @staticmethod
    def _files(directory: Path) -> list[Path]:
        try:
            state = json.loads((directory / "state.json").read_text())
            names = [item["filename"] for item in state["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FileError(f"{directory.name}/state.json cannot be read: {exc}") from None
        files = []
        for name in names:
            file = (directory / name).resolve()
            if file.parent != directory.resolve() or not file.is_file():
                raise FileError(f"{directory.name}/state.json names a data file that is not there: {name}")
            files.append(file)
        return files

    def _advance(self, batch) -> None:
        self._done += batch.nbytes

    def position(self) -> int:
        return min(self._done, self.total)

    def __iter__(self):
        import pyarrow as pa

        row = 0
        for split, files in self.parts:
            for file in files:
                try:
                    reader = pa.ipc.open_stream(pa.memory_map(os.fspath(file)))
                except Exception as exc:
                    raise FileError(f"{file.name} is not an Arrow stream: {exc}") from None
                names = set(reader.schema.names)
                if self.columns.prompt not in names and self.columns.messages not in names:
                    raise FileError(
                        f"{file.name} has no '{self.columns.prompt}' or '{self.columns.messages}' column (columns: {', '.join(sorted(names))})",
                        field="header",
                    )
                for item in _rows(reader, row, split, self):
                    row = item[0]
                    yield item
