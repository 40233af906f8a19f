"""Writing files so that no half-written file ever stands under its final name.

Shared by every command that writes: the compiler's outputs, params files,
traces, run directories. A file is written to a hidden temporary file beside
its target, flushed to disk, given the mode an ordinary new file would have
(mkstemp's 0600 would otherwise carry over), then renamed onto the target in
one atomic step.
"""

from __future__ import annotations

import os
import tempfile
from typing import Union

PathLike = Union[str, "os.PathLike[str]"]


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def temporary_beside(path: PathLike) -> str:
    """A new, empty hidden temporary file in `path`'s directory (created if needed),
    for an atomic `os.replace` onto `path`. Its mode follows the umask."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    os.close(fd)
    os.chmod(tmp, _umask_mode())
    return tmp


def write_atomic(path: PathLike, data: Union[str, bytes]) -> None:
    """Write `data` (text as UTF-8) to `path` through a temporary file, fsync'd, then renamed."""
    tmp = temporary_beside(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.fspath(path))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
