"""JSON encoding (orjson) and atomic, durable file writes.

A reader of a file written here sees either the old or the new content,
never a mix: the new bytes go to a temporary file in the same directory,
which is fsynced, renamed over the target, and the directory is fsynced so
that the rename itself survives a crash.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import orjson

JSONError = orjson.JSONDecodeError


def dumps(value: Any, *, sort_keys: bool = False, indent: bool = False) -> bytes:
    """Encode C{value} as compact UTF-8 JSON bytes."""
    option = orjson.OPT_NON_STR_KEYS
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    if indent:
        option |= orjson.OPT_INDENT_2
    return orjson.dumps(value, option=option)


def loads(data: bytes | str) -> Any:
    """Decode JSON; raises L{JSONError} (a C{ValueError}) on bad input."""
    return orjson.loads(data)


def fsync_dir(path: str) -> None:
    """Make a rename or unlink in directory C{path} durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(
    path: str,
    data: bytes | str,
    *,
    mode: int = 0o644,
    durable: bool = True,
    uid: int = -1,
    gid: int = -1,
    sync_dir: bool = True,
    blank: str | None = None,
) -> None:
    """Replace C{path} with C{data} atomically.

    With C{durable} (the default) the data and the rename are fsynced
    before this returns; without, the write survives a crash of this
    process but not necessarily of the machine.  C{sync_dir=False} leaves
    the directory's fsync (the rename's durability) to the caller, who
    writes several files and fsyncs their directory once.  C{blank}: an
    empty file made ahead in the same directory (L{ganeti.jobs.blanks}),
    written and renamed instead of a temporary file made now.
    """
    tmp, fd = stage_file(path, data, mode=mode, uid=uid, gid=gid, blank=blank)
    try:
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    put_in_place(tmp, fd, path)
    if durable and sync_dir:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def stage_file(
    path: str, data: bytes | str, *, mode: int = 0o644, uid: int = -1, gid: int = -1, blank: str | None = None
) -> tuple[str, int]:
    """The first half of L{write_file}: C{data} written to a temporary file
    beside C{path} (or C{blank}), not fsynced; returns its path and its open
    descriptor, for L{put_in_place} (after an fsync, if it is to be durable)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    directory = os.path.dirname(os.path.abspath(path))
    # the thread too: two threads of one daemon may replace the same file at once (NodeD's take-over
    # fetching the queue serial while a replication writes it), and must not share a temporary file
    fd = -1
    if blank is not None and os.path.dirname(blank) == directory:
        try:
            fd = os.open(blank, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW)
            tmp = blank
        except OSError:  # (removed meanwhile) a temporary file of its own
            pass
    if fd < 0:
        tmp = os.path.join(directory, ".%s.%d.%d.tmp" % (os.path.basename(path), os.getpid(), threading.get_ident()))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fchmod(fd, mode)
        if uid != -1 or gid != -1:
            os.fchown(fd, uid, gid)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    return tmp, fd


def put_in_place(tmp: str, fd: int, path: str) -> None:
    """The second half of L{write_file}: close C{fd} and rename C{tmp} over C{path} (removed if that fails)."""
    os.close(fd)
    try:
        os.rename(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def drop_staged(staged: list[tuple[str, int]]) -> None:
    """Close and remove files L{stage_file} made that are not to be put in place."""
    for tmp, fd in staged:
        os.close(fd)
        _unlink_quietly(tmp)


def read_file(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def write_json(path: str, value: Any, *, mode: int = 0o644, durable: bool = True) -> None:
    write_file(path, dumps(value), mode=mode, durable=durable)


def read_json(path: str) -> Any:
    return loads(read_file(path))


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
