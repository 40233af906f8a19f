"""Errors a user fixes in what they gave polc about an environment (a schema file,
a gymnasium id, an expert): each carries the exit code the CLI returns (2 for
input polc cannot use, 1 for a run that failed) and a message that names the
file or the id. Plain exceptions, so that `polc.runtime.cli.guard` can catch
them without importing gymnasium."""

from __future__ import annotations

from typing import Optional


class EnvError(Exception):
    """Something about an environment the user must fix; `exit_code` for the CLI."""

    exit_code = 2


class SchemaFileError(EnvError, ValueError):
    """A schema file that cannot be used; str() is `FILE, line N: what is wrong`."""

    def __init__(self, path: str, line: Optional[int], message: str):
        self.path, self.line, self.message = path, line, message
        where = f"{path}, line {line}" if line else path
        super().__init__(f"{where}: {message}")


class NeedsSchema(EnvError):
    """A flat Box space and no schema file: the message ends with a starter file."""


class GymEnvError(EnvError):
    """gymnasium cannot make the id, or its spaces are not ones polc can name."""


class ExpertError(EnvError):
    """A user's expert cannot be loaded, raised, or returned something unusable."""

    exit_code = 1


class MetricError(EnvError):
    """A metric function (`--metric`, a schema file's [metric]) raised or returned something that
    is not one finite number per step."""

    exit_code = 1


__all__ = ["EnvError", "ExpertError", "MetricError", "GymEnvError", "NeedsSchema", "SchemaFileError"]
