# The two quickstart commands: `make demo` and `make test`. Each sets up
# .venv on its first run (pinned dependencies from pyproject.toml).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: setup system-deps demo compile-demo test test-fast bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) -m pip check
	touch $@

setup: $(VENV)/.installed

# Debian's chromium and neovim, which the tests drive (a real browser, a real LSP client).
system-deps:
	bash scripts/system-deps.sh

# The main job on the embedded default: the paper's refinement loop on Car Racing,
# with the bundled scripted session when no API key is set (the run says so).
demo: setup
	$(VENV)/bin/polc refine examples/car_racing

# The compiler alone: check, compile and run the Car Racing structure, draw its graph.
compile-demo: setup
	$(PY) examples/quickstart.py

# Every test, the slow ones included (CI runs exactly this), on both cores as test-fast.
test: setup system-deps
	$(PY) -m pytest -q -n 2 --dist loadgroup --durations=25

# Everything but the tests marked slow, for the edit-test loop.
# Both cores (pytest-xdist): tests that share a Ray instance or measure the sandbox's
# limits are grouped onto one worker (`xdist_group`); docs/performance.md, "The test suite".
test-fast: setup
	POLC_TESTS=fast $(PY) -m pytest -q -m "not slow" -n 2 --dist loadgroup --durations=15

# grammar/pol_tables.py, the LALR tables `polc check` parses with, regenerated from
# grammar/pol.lark (the one source of the syntax) after every edit of it.
.PHONY: parser
parser: setup
	$(PY) -m polc.grammar.regen

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build dist *.egg-info out
