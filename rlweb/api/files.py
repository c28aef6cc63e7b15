"""Streaming checkpoint files to a client, only from under DATA_DIR.

A checkpoint path comes from the database; a path that (after resolving symlinks) leaves
DATA_DIR is refused, so a forged or stale row can never turn the API into a file server for the
rest of the disk. A checkpoint directory streams as an uncompressed tar (weights hardly
compress) built block by block: memory stays flat however large the checkpoint."""

from __future__ import annotations

import tarfile
from pathlib import Path

from django.conf import settings

CHUNK = 1024 * 1024


class OutsideDataDir(Exception):
    pass


def resolve_under_data_dir(raw: str) -> Path:
    root = Path(settings.DATA_DIR).resolve()
    path = Path(raw)
    if not path.is_absolute():
        path = root / path
    path = path.resolve()
    if not path.is_relative_to(root):
        raise OutsideDataDir(str(path))
    return path


def _file_chunks(path: Path):
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def tar_files(root: Path) -> list[Path]:
    """Regular files under `root`; symlinks are skipped (they could point anywhere)."""
    data_dir = Path(settings.DATA_DIR).resolve()
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        if not path.resolve().is_relative_to(data_dir):
            continue
        files.append(path)
    return files


def tar_stream(root: Path):
    """Yield a tar archive of `root` (top folder named like it) without building it in memory."""
    for path in tar_files(root):
        stat = path.stat()
        info = tarfile.TarInfo(f"{root.name}/{path.relative_to(root).as_posix()}")
        info.size, info.mtime, info.mode = stat.st_size, int(stat.st_mtime), 0o644
        yield info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        sent = 0
        for chunk in _file_chunks(path):
            # A file growing while we read must not corrupt the archive: stop at the header size.
            chunk = chunk[: info.size - sent]
            sent += len(chunk)
            yield chunk
            if sent >= info.size:
                break
        if sent < info.size:  # the file shrank: pad to the size the header announced
            yield b"\0" * (info.size - sent)
        if info.size % tarfile.BLOCKSIZE:
            yield b"\0" * (tarfile.BLOCKSIZE - info.size % tarfile.BLOCKSIZE)
    yield b"\0" * (2 * tarfile.BLOCKSIZE)  # end-of-archive marker


def file_chunks(path: Path):
    return _file_chunks(path)


def streamed(request, chunks):
    """`chunks` as a StreamingHttpResponse body that really streams under ASGI too: Django
    materialises a synchronous iterator before sending it under daphne, which for a checkpoint
    of gigabytes would mean all of it in memory. Under ASGI hand it an asynchronous iterator
    that pulls one chunk at a time in a worker thread."""
    from asgiref.sync import sync_to_async
    from django.core.handlers.asgi import ASGIRequest

    raw = getattr(request, "_request", request)
    if not isinstance(raw, ASGIRequest):
        return chunks
    iterator = iter(chunks)

    async def pull():
        while True:
            chunk = await sync_to_async(next, thread_sensitive=True)(iterator, None)
            if chunk is None:
                return
            yield chunk

    return pull()
