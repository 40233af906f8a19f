"""Test-wide strictness: JAX never promotes ranks silently and runs on the CPU."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import warnings  # noqa: E402

import jax  # noqa: E402

# Box2D's SWIG types warn when first imported, and under warnings-as-errors that
# import segfaults: import it once here, before any test, with the warning off.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import Box2D  # noqa: F401
    except ImportError:  # pragma: no cover
        pass

jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_platforms", "cpu")


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.expected from polc's current output instead of comparing")


import pytest  # noqa: E402


@pytest.fixture
def cli_stderr(monkeypatch):
    """Make `polc.cli` write diagnostics to the `sys.stderr` of the moment, so
    capsys sees them: `cli._emit_diagnostics(..., out=sys.stderr)` binds the
    stream when the module is imported (a no-op once that default is fixed)."""
    import sys

    from polc import cli

    original = cli._emit_diagnostics

    def emit(diags, text, fmt, out=None):
        return original(diags, text, fmt, out if out is not None else sys.stderr)

    monkeypatch.setattr(cli, "_emit_diagnostics", emit)
