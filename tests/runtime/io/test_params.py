"""Params files: readable JSON of constrained weights, exact round trips, the
structure hash, and clear errors when params meet a different structure."""

from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest

import polc
from polc.runtime.io.params import (ParamsError, load_params, node_hashes, params_sha256, save_params,
                                 structure_sha256)

SRC = '''policy p "a small policy"
# a comment
obs x : real[3] in [-1, 1] "input"
weight k : real >= 0 = 0.8 "gain"
weight b : real in [0.01, 0.5] = 0.1
weight v : real[2] <= 1 = 0.5
latent y = k * sum(x) + v[0]
latent z = mlp(x, y; hidden = [4], out = 2, activation = tanh)
action a : real in [-1, 1] = y + z[0] ~ normal(std = b)
'''


def compile_(src: str):
    return polc.loads(src, "p.pol", analyze=False).compile()


def leaves_close(p, q, atol=1e-6):
    assert jax.tree.structure(p) == jax.tree.structure(q)
    for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(q)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=atol)


def test_round_trip_preserves_params_and_behaviour(tmp_path):
    policy = compile_(SRC)
    params = policy.init(jax.random.PRNGKey(3))
    rng = np.random.default_rng(0)
    for name in ("k", "b", "v"):  # fitted-looking values, not the tidy initial ones
        params[name] = params[name] + rng.normal(size=np.shape(params[name])).astype(np.float32)
    path = str(tmp_path / "p.params")
    save_params(path, policy, params)
    back = load_params(path, policy)
    for name in ("k", "b", "v"):  # weights reload bit for bit
        assert np.array_equal(np.asarray(params[name]), np.asarray(back[name])), name
    leaves_close(params["z.mlp"], back["z.mlp"])
    obs = {"x": np.float32([0.1, -0.4, 0.9])}
    a1, _ = policy.apply(params, obs)
    a2, _ = policy.apply(back, obs)
    np.testing.assert_allclose(a1["a"], a2["a"], rtol=1e-6)


def test_file_is_readable_json_with_constrained_weights_by_name(tmp_path):
    policy = compile_(SRC)
    path = tmp_path / "p.params"
    save_params(str(path), policy, policy.init(jax.random.PRNGKey(0)), {"val_loss": -1.5})
    text = path.read_text()
    doc = json.loads(text)
    assert doc["weights"] == {"k": 0.8, "b": 0.1, "v": [0.5, 0.5]}  # constrained, shortest float32 text
    assert '  "k": 0.8,\n' in text
    assert set(doc["mlps"]) == {"z.mlp"} and doc["fit"] == {"val_loss": -1.5}
    assert doc["structure_sha256"] == structure_sha256(policy.program) and doc["policy"] == "p"
    assert doc["polc_version"] == polc.__version__
    assert os.listdir(tmp_path) == ["p.params"]  # written atomically: no temporary left behind


def test_structure_hash_ignores_comments_docs_layout_and_initial_values():
    base = structure_sha256(polc.loads(SRC, "p.pol", analyze=False).typed)
    variant = (SRC.replace("# a comment\n", "").replace('"gain"', '"the gain"').replace("= 0.8", "= 0.3")
               .replace("latent y = k * sum(x) + v[0]", "latent   y =   k*sum(x) + v[0]   # spaced")
               .replace('policy p "a small policy"', 'policy q "renamed"'))
    assert structure_sha256(polc.loads(variant, "q.pol", analyze=False).typed) == base


@pytest.mark.parametrize("old, new", [("k * sum(x)", "k * mean(x)"), ("real >= 0 = 0.8", "real >= 0.1 = 0.8"),
                                      ("hidden = [4]", "hidden = [5]"), ("real[3] in", "real[4] in")])
def test_structure_hash_changes_with_the_dataflow(old, new):
    changed = SRC.replace(old, new)
    assert changed != SRC
    a = structure_sha256(polc.loads(SRC, "p.pol", analyze=False).typed)
    assert structure_sha256(polc.loads(changed, "p.pol", analyze=False).typed) != a


def test_loading_into_a_changed_expression_names_the_changed_nodes(tmp_path):
    path = str(tmp_path / "p.params")
    save_params(path, compile_(SRC), compile_(SRC).init(jax.random.PRNGKey(0)))
    other = compile_(SRC.replace("k * sum(x)", "k * mean(x)"))
    with pytest.raises(ParamsError) as e:
        load_params(path, other)
    msg = str(e.value)
    assert 'latent "y" changed' in msg and 'action "a"' not in msg and "Refit with `polc fit`" in msg
    params = load_params(path, other, allow_structure_change=True)  # a warm start is still possible
    assert set(params) == {"k", "b", "v", "z.mlp"}


def test_loading_into_different_weights_names_each_difference(tmp_path):
    path = str(tmp_path / "p.params")
    save_params(path, compile_(SRC), compile_(SRC).init(jax.random.PRNGKey(0)))
    other = compile_(SRC.replace("weight v : real[2] <= 1 = 0.5", "weight v : real[3] <= 1 = 0.5")
                     .replace("weight b :", "weight c :").replace("std = b", "std = c")
                     .replace("hidden = [4]", "hidden = [6]"))
    with pytest.raises(ParamsError) as e:
        load_params(path, other)
    msg = str(e.value)
    assert 'the file has weight "b", which the program does not declare' in msg
    assert 'weight "c" (real) is missing from the file' in msg
    assert 'weight "v" is declared real[3] but the file holds shape (2,)' in msg
    assert 'mlp "z.mlp" has layer shapes' in msg


def test_value_outside_its_constraint_is_refused(tmp_path):
    path = tmp_path / "p.params"
    policy = compile_(SRC)
    save_params(str(path), policy, policy.init(jax.random.PRNGKey(0)))
    doc = json.loads(path.read_text())
    doc["weights"]["k"] = -0.5
    path.write_text(json.dumps(doc))
    with pytest.raises(ParamsError, match=r'weight "k" = -0.5 is outside its constraint \[0.0, inf\]'):
        load_params(str(path), policy)


def test_value_on_a_bound_loads_to_a_finite_unconstrained_value(tmp_path):
    path = tmp_path / "p.params"
    policy = compile_(SRC)
    save_params(str(path), policy, policy.init(jax.random.PRNGKey(0)))
    doc = json.loads(path.read_text())
    doc["weights"]["b"] = 0.01  # printing can round a fitted 0.01 + tiny onto the bound
    path.write_text(json.dumps(doc))
    params = load_params(str(path), policy)
    assert np.isfinite(params["b"]) and abs(float(policy.constrain(params)["b"]) - 0.01) < 1e-6


@pytest.mark.parametrize("content, message", [("{not json", "invalid JSON"), ('{"a": 1}', "is not a polc params file")])
def test_not_a_params_file_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "p.params"
    path.write_text(content)
    with pytest.raises(ParamsError, match=message):
        load_params(str(path), compile_(SRC))


def test_node_hashes_and_params_hash_are_stable():
    tp = polc.loads(SRC, "p.pol", analyze=False).typed
    assert set(node_hashes(tp)) == {"y", "z", "a"}
    policy = compile_(SRC)
    p = policy.init(jax.random.PRNGKey(0))
    assert params_sha256(p) == params_sha256(jax.tree.map(np.asarray, p))
    q = dict(p, k=p["k"] + 1.0)
    assert params_sha256(q) != params_sha256(p)


def _saved_doc(tmp_path):
    path = tmp_path / "p.params"
    policy = compile_(SRC)
    save_params(str(path), policy, policy.init(jax.random.PRNGKey(0)))
    return path, policy, json.loads(path.read_text())


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["weights"].update(k=True), r"weight \"k\" is true, not a number"),
    (lambda d: d["weights"].update(k="4.8"), r"weight \"k\" is the string \"4.8\", not a number"),
    (lambda d: d["weights"].update(k=None), r"weight \"k\" is null, not a number"),
    (lambda d: d["weights"].update(v=[0.5, "x"]), r"weight \"v\"\[1\] is the string \"x\""),
    (lambda d: d["weights"].update(v=[0.5, [0.1]]), r"weight \"v\" is not a regular array"),
    (lambda d: d["weights"].update(v=[]), r"weight \"v\" is an empty list"),
    (lambda d: d["weights"].update(k=1e39), r"weight \"k\" is 1e\+39; params must be finite float32 numbers"),
    (lambda d: d["weights"].update(k=10 ** 400), r"weight \"k\" is an integer of 401 digits"),
    (lambda d: d["mlps"]["z.mlp"]["Dense_0"].__setitem__("bias", [False] * 4),
     r"mlp \"z.mlp\" Dense_0/bias\[0\] is false, not a number"),
    (lambda d: d["mlps"].update({"z.mlp": [1, 2]}), r"mlp \"z.mlp\" is list, not a number; an mlp block is an object"),
    (lambda d: d.update(mlps=[]), r"\"mlps\" must be an object"),
])
def test_values_that_are_not_finite_numbers_are_refused(tmp_path, edit, message):
    path, policy, doc = _saved_doc(tmp_path)
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(ParamsError, match=message) as e:
        load_params(str(path), policy)
    assert str(e.value).startswith(f"'{path}': ")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_values_are_refused_in_weights_and_mlps(tmp_path, literal):
    path, policy, doc = _saved_doc(tmp_path)
    text = json.dumps(doc)
    kernel = json.dumps(doc["mlps"]["z.mlp"]["Dense_1"]["kernel"])
    first = kernel[:kernel.index(",")].lstrip("[")  # the first number of the kernel
    path.write_text(text.replace(kernel, kernel.replace(first, literal, 1)))
    with pytest.raises(ParamsError, match=r'mlp "z.mlp" Dense_1/kernel\[0\]\[0\] is (nan|inf|-inf); params must be'):
        load_params(str(path), policy)
    doc["weights"]["k"] = float(literal.lower().replace("infinity", "inf"))
    path.write_text(json.dumps(doc))  # json writes NaN / Infinity literals, which json.load accepts
    with pytest.raises(ParamsError, match=r'weight "k" is (nan|inf|-inf); params must be finite'):
        load_params(str(path), policy)


def test_deeply_nested_params_file_is_a_clear_error(tmp_path):
    path, policy, doc = _saved_doc(tmp_path)
    path.write_text('{"polc_params": 1, "weights": {"k": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    with pytest.raises(ParamsError, match="nested too deeply to read"):
        load_params(str(path), policy)
    doc["weights"]["k"] = json.loads("[" * 70 + "1" + "]" * 70)
    path.write_text(json.dumps(doc))
    with pytest.raises(ParamsError, match=r'weight "k" nests lists more than 64 deep'):
        load_params(str(path), policy)


def test_a_nan_params_file_is_a_failure_of_the_command_naming_the_weight(tmp_path):
    from polc.runtime.cli import Failure, params_for

    path, policy, doc = _saved_doc(tmp_path)
    doc["weights"]["k"] = float("nan")
    path.write_text(json.dumps(doc))
    with pytest.raises(Failure, match=r'p.params\': weight "k" is nan'):  # exit 1 through rc.guard
        params_for(policy, str(path))


def test_polc_analyze_reads_params_files_with_the_same_checks(tmp_path):
    from polc.runtime.diagnostics.base import DiagnosticsError, load_params as diagnostics_params

    path, policy, doc = _saved_doc(tmp_path)
    tp = policy.program
    assert set(diagnostics_params(str(path), tp).weights) == {"k", "b", "v"}
    doc["weights"]["k"] = "4.8"
    path.write_text(json.dumps(doc))
    with pytest.raises(DiagnosticsError, match=r'p.params\': weight "k" is the string "4.8", not a number\.$'):
        diagnostics_params(str(path), tp)
    doc["weights"]["k"] = 0.5
    doc["mlps"]["z.mlp"]["Dense_0"]["bias"][1] = float("inf")
    with pytest.raises(DiagnosticsError, match=r'mlp "z.mlp" Dense_0/bias\[1\] is inf'):
        diagnostics_params(doc, tp)  # a params file's JSON given in-process
