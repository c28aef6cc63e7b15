"""File formats a dataset can be imported from, and how to tell which one a file is."""

from __future__ import annotations

import os

from .arrow import HfDirSource, ParquetSource
from .base import FileError, Source
from .csvfile import CsvSource
from .jsonl import JsonlSource

FORMATS = {
    "jsonl": "JSON Lines (.jsonl)",
    "csv": "CSV with a header row (.csv, .tsv)",
    "parquet": "Parquet (.parquet)",
    "hf_dir": "Hugging Face datasets directory (save_to_disk)",
}
_BY_SUFFIX = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def detect_format(name: str, path=None) -> str:
    """The format of a file from its name (or a directory: hf_dir); FileError if unknown."""
    if path is not None and os.path.isdir(path):
        return "hf_dir"
    suffix = os.path.splitext(name.lower())[1]
    try:
        return _BY_SUFFIX[suffix]
    except KeyError:
        raise FileError(f"cannot tell the format of {name!r}: use .jsonl, .csv, .tsv or .parquet, or choose the format") from None


def open_source(path, fmt: str, columns, name: str = "") -> Source:
    if fmt == "jsonl":
        return JsonlSource(path, columns)
    if fmt == "csv":
        delimiter = "\t" if (name or str(path)).lower().endswith(".tsv") else ","
        return CsvSource(path, columns, delimiter=delimiter)
    if fmt == "parquet":
        return ParquetSource(path, columns)
    if fmt == "hf_dir":
        return HfDirSource(path, columns)
    raise FileError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")


__all__ = ["FORMATS", "FileError", "Source", "detect_format", "open_source"]
