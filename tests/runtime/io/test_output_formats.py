"""An output's extension names its format (issue 12, item 2): `plot` writes PNG, SVG
or PDF by extension, `graph` SVG or DOT, `compile` Python, StableHLO or JSON; an
extension that names another format (or one the command cannot write) is a usage
error (exit 2) and writes nothing. Also the CLI's answers to a misspelled command
and to an unreadable file under `check --format json`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polc.cli import main
from polc.runtime.io.table import ColumnSpec, TableWriter, step_columns

ROOT = Path(__file__).resolve().parents[3]
POLICY = str(ROOT / "examples" / "car_racing" / "initial.pol")
MAGIC = {".png": b"\x89PNG", ".svg": b"<?xml", ".pdf": b"%PDF"}


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("formats") / "trace.parquet")
    body = (ColumnSpec("latent.slip", (), "float32", "rear-wheel slip"),)
    with TableWriter(path, step_columns(body), {}) as w:
        n = 20
        w.write_episode({"episode": np.zeros(n, np.int32), "step": np.arange(n, dtype=np.int32),
                         "seed": np.zeros(n, np.int64), "latent.slip": np.linspace(0, 1, n, dtype=np.float32),
                         "reward": np.zeros(n, np.float32), "terminated": np.zeros(n, bool),
                         "truncated": np.arange(n) == n - 1})
    return path


@pytest.mark.parametrize("ext", [".png", ".svg", ".pdf"])
def test_plot_follows_the_extension(trace, tmp_path, ext):
    out = tmp_path / f"slip{ext}"
    assert main(["plot", trace, "latent.slip", "-o", str(out)]) == 0
    assert out.read_bytes().startswith(MAGIC[ext])


@pytest.mark.parametrize("name", ["slip.jpg", "slip", "slip.png.txt"])
def test_plot_refuses_an_extension_it_cannot_write(trace, tmp_path, capsys, name):
    assert main(["plot", trace, "latent.slip", "-o", str(tmp_path / name)]) == 2
    assert ".png, .svg or .pdf" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_graph_follows_the_extension(tmp_path):
    assert main(["graph", POLICY, "-o", str(tmp_path / "g.dot")]) == 0
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    assert main(["graph", POLICY, "-o", str(tmp_path / "g.svg")]) == 0
    assert (tmp_path / "g.svg").read_bytes().lstrip().startswith(b"<")


@pytest.mark.parametrize("argv, says", [
    (["graph", POLICY, "-o", "{tmp}/g.png"], "this command writes .svg, .dot, .gv files"),
    (["graph", POLICY, "--format", "svg", "-o", "{tmp}/g.dot"], "names dot output but --format is svg"),
    (["compile", POLICY, "--emit", "python", "-o", "{tmp}/c.mlir"], "names hlo output but --emit is python"),
    (["compile", POLICY, "-o", "{tmp}/c.txt"], "this command writes .py, .mlir, .json, .c files"),
    (["compile", POLICY, "--emit", "c", "-o", "{tmp}/c.py"], "names python output but --emit is c"),
])
def test_a_mismatched_extension_is_a_usage_error(tmp_path, capsys, argv, says):
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    assert says in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_compile_follows_the_extension(tmp_path):
    assert main(["compile", POLICY, "-o", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text())["policy"] == "car_racing"
    assert main(["compile", POLICY, "-o", str(tmp_path / "c.py")]) == 0
    assert "import jax" in (tmp_path / "c.py").read_text()


@pytest.mark.slow  # the StableHLO export compiles the policy with JAX
def test_compile_to_mlir_writes_stablehlo(tmp_path):
    assert main(["compile", POLICY, "-o", str(tmp_path / "c.mlir")]) == 0
    assert "stablehlo" in (tmp_path / "c.mlir").read_text()


@pytest.mark.parametrize("typo, guess", [("chekc", '"check"'), ("evl", '"eval"'), ("refien", '"refine"')])
def test_a_misspelled_command_gets_did_you_mean(capsys, typo, guess):
    with pytest.raises(SystemExit) as info:  # as argparse exits on every other usage error
        main([typo, POLICY])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f'"{typo}" is not a polc command. Did you mean {guess}?' in err


def test_check_json_reports_an_unreadable_file_as_json(tmp_path, capsys):
    assert main(["check", "--format", "json", str(tmp_path / "missing.pol")]) == 2
    (diag,) = json.loads(capsys.readouterr().out)
    assert diag["code"] == "E0000" and diag["severity"] == "error" and diag["span"] is None
    assert "missing.pol" in diag["message"] and "no such file" in diag["message"]
    (tmp_path / "latin1.pol").write_bytes(b"action a : real = 1 \xe9")
    assert main(["check", "--format", "json", str(tmp_path / "latin1.pol")]) == 2
    (diag,) = json.loads(capsys.readouterr().out)
    assert "not UTF-8" in diag["message"]
