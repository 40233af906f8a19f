"""Test-wide strictness (JAX never promotes ranks silently and runs on the CPU) and one
throwaway directory per test session for what would otherwise land in the user's home.

The session directory is made once, by the first process that loads this file (pytest itself,
or xdist's controller before it starts its workers), and its path is passed on through the
environment, so xdist's workers and every `polc` subprocess a test starts share it:
- `XDG_CACHE_HOME` points into it: no test reads or writes ~/.cache.
- JAX's persistent compilation cache lives in it, for every compile however small: the suite
  compiles the same small programs in many processes (each CLI test is one), and the first
  compile of each still happens in every session, so no test is weakened by it.
- Each xdist worker gets its own `TMPDIR` inside it, so a test that looks for processes left
  behind by the code it ran (the sandbox's) can tell them from another worker's.
"""

import atexit
import os
import shutil
import sys
import tempfile

# The tests live in folders by the part they test (tests/compiler/<room>/, tests/runtime/<part>/,
# tests/lsp/, tests/project/), and a few share a helper with a test module of another folder
# (`from test_differential import programs`): every folder is importable by module name, as the
# helpers here at the top (refine_helpers, llm_fake_server...) are, whichever files a run selects.
# Test modules' names are unique across the folders (there is no package here).
for _dir, _subdirs, _files in sorted(os.walk(os.path.dirname(os.path.abspath(__file__)))):
    _subdirs[:] = sorted(d for d in _subdirs if d not in ("__pycache__", "golden", "data"))
    if _dir not in sys.path:
        sys.path.append(_dir)

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Ray reads these when it is imported, so they are set here, before any test module imports it:
# with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 a local instance honours _node_ip_address="127.0.0.1"
# (without it, Ray binds the machine's own address, and the tests talk only to 127.0.0.1), and
# no usage report is attempted.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

if "POLC_TEST_SESSION_DIR" not in os.environ:
    os.environ["POLC_TEST_SESSION_DIR"] = tempfile.mkdtemp(prefix="polc-tests-")
    atexit.register(shutil.rmtree, os.environ["POLC_TEST_SESSION_DIR"], ignore_errors=True)
_SESSION = os.environ["POLC_TEST_SESSION_DIR"]
os.environ["XDG_CACHE_HOME"] = os.path.join(_SESSION, "cache")
# The compile cache as polc's own commands turn it on (every compile cached, XLA's log lines
# for cache loads silenced), in the session's directory; before jax is imported, `enable`
# sets it up through the environment, which the workers and subprocesses inherit.
from polc.runtime.il import jaxcache  # noqa: E402

os.environ.setdefault(jaxcache.JAX_VARIABLE, os.path.join(_SESSION, "jax-cache"))
jaxcache.enable()
if "PYTEST_XDIST_WORKER" in os.environ:
    _tmp = os.path.join(_SESSION, "tmp-" + os.environ["PYTEST_XDIST_WORKER"])
    os.makedirs(_tmp, exist_ok=True)
    os.environ["TMPDIR"] = _tmp
    tempfile.tempdir = _tmp

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


def pytest_collection_modifyitems(config, items):
    """Under xdist, the modules with a slow test first, so both workers finish together
    (tests/xdist_order.py); a serial run keeps the collection order."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        from xdist_order import heavy_modules_first

        items[:] = heavy_modules_first(items)


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


@pytest.fixture(autouse=True)
def _closed_llm_clients(monkeypatch):
    """Every SDK backend a test makes (Gemini, OpenAI, Anthropic) is closed after the test: a
    client left to the garbage collector warns about its open socket (an error here) in
    whichever later test the collection happens to fall."""
    from polc.runtime.llm.anthropic_backend import AnthropicBackend
    from polc.runtime.llm.gemini import GeminiBackend
    from polc.runtime.llm.openai_backend import OpenAIBackend

    made = []
    for cls in (GeminiBackend, OpenAIBackend, AnthropicBackend):
        def init(self, *args, _original=cls.__init__, **kwargs):
            _original(self, *args, **kwargs)
            made.append(self)

        monkeypatch.setattr(cls, "__init__", init)
    yield
    for backend in made:
        backend.abandon()  # closes its HTTP client, quietly if a test closed it already


@pytest.fixture(scope="session")
def quick_car_racing(tmp_path_factory):
    """`polc experiment car_racing --quick` from the checkout, on the tests' quick budget
    (tests/quick_budget.py: shorter episodes and IL fits), run once per session (per xdist
    worker): test_experiment checks its table, plots and accounting, and test_experiment_ray
    checks that Ray gives the same table (both modules are in the "ray" xdist group, so one
    worker runs the experiment once)."""
    from pathlib import Path

    from quick_budget import quick_budget

    from polc.cli import main

    out = tmp_path_factory.mktemp("experiment") / "car_racing"
    with pytest.MonkeyPatch.context() as mp, quick_budget():
        mp.chdir(Path(__file__).resolve().parents[1])
        assert main(["experiment", "car_racing", "--quick", "-q", "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def bundled_car_racing_quick(tmp_path_factory):
    """`polc refine examples/car_racing --quick` as the README's user runs it (no key: the
    bundled scripted session plays back; a `polc` process), once per session (per xdist worker):
    (run directory, process, summary.json), checked by `refine_helpers.replay_bundled_session`.
    Read only: test_refine_scripted checks its rounds, test_report draws its page, and
    test_refine_openai_car_racing compares an OpenAI run's table with it; those tests are in
    one xdist group (`refine_helpers.BUNDLED_CAR_RACING`), so it is played once."""
    from refine_helpers import replay_bundled_session

    run = tmp_path_factory.mktemp("bundled") / "car_racing"
    proc, summary = replay_bundled_session("car_racing", run, "--quick")
    return run, proc, summary


@pytest.fixture(scope="session")
def cluster():
    """A local Ray instance (2 CPUs, 127.0.0.1) for the Ray modules (tests/ray_helpers.py), started
    once and shut down at the end of the session: starting one took 6-8 s per module. Ray
    replaces a worker a test kills, and `polc ... --ray` joins the running instance."""
    import ray
    from ray_helpers import ray_warnings_ignored

    with ray_warnings_ignored():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        yield
    finally:
        with ray_warnings_ignored():
            ray.shutdown()
