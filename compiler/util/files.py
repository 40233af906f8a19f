"""Writing files so that no half-written file ever stands under its final name.

Shared by every command that writes: the compiler's outputs, params files,
traces, run directories. A file is written to a hidden temporary file beside
its target, flushed to disk, given the mode an ordinary new file would have
(mkstemp's 0600 would otherwise carry over), then renamed onto the target in
one atomic step.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from typing import Iterator, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]

# The errors only writing raises (a full or read-only disk): the user's to fix, never a bug in
# polc, even where no writer named the file (`WriteFailed` does).
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


class WriteFailed(OSError):
    """Writing an output failed; `filename` is the file the user asked for (never a
    temporary one), `strerror` the system's words. The CLI prints `write_error_text`."""


@contextlib.contextmanager
def naming(path: PathLike) -> Iterator[None]:
    """OSErrors (with an errno) raised in the block become `WriteFailed` naming `path`."""
    try:
        yield
    except WriteFailed:
        raise
    except OSError as e:
        if e.errno is None:
            raise
        raise WriteFailed(e.errno, os.strerror(e.errno), os.fspath(path)) from e


def write_error_text(e: OSError) -> Optional[str]:
    """One sentence for a failed output (`polc: cannot write PATH: No space left on device
    (ENOSPC).`), or None when `e` is not one (a bug, or a reading error)."""
    if not isinstance(e, WriteFailed) and e.errno not in OUTPUT_ERRNOS:
        return None
    if e.errno is None:
        return None
    what = e.strerror if isinstance(e, WriteFailed) and e.strerror else os.strerror(e.errno)
    name = errno.errorcode.get(e.errno, str(e.errno))
    where = f" {e.filename}" if e.filename else ""
    return f"polc: cannot write{where}: {what} ({name})."


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def temporary_beside(path: PathLike) -> str:
    """A new, empty hidden temporary file in `path`'s directory (created if needed),
    for an atomic `os.replace` onto `path`. Its mode follows the umask."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    with naming(directory):
        os.makedirs(directory, exist_ok=True)
    with naming(path):
        fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    os.close(fd)
    os.chmod(tmp, _umask_mode())
    return tmp


def write_atomic(path: PathLike, data: Union[str, bytes]) -> None:
    """Write `data` (text as UTF-8) to `path` through a temporary file, fsync'd, then renamed;
    `WriteFailed` naming `path` when the disk is full or read-only (nothing left behind, an
    earlier file under `path` untouched)."""
    tmp = temporary_beside(path)
    try:
        with naming(path):
            with open(tmp, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, os.fspath(path))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


__all__ = ["OUTPUT_ERRNOS", "PathLike", "WriteFailed", "naming", "temporary_beside", "write_atomic", "write_error_text"]
