"""The language gaps a hand translation of the paper authors' PyTorch policies found (issue 15):
every analysis finding at once, one namespace said clearly, rational forms' directions, named
constants, per-element observation ranges, and guards for non-finite values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polc
from polc import PolError, loads

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


def codes(diags) -> list[str]:
    return [d.code for d in diags]


# ---- 1. an analysis error does not hide the analysis' warnings -----------------------------


def test_an_analysis_error_comes_with_every_analysis_warning():
    path = GOLDEN / "79_analysis_error_keeps_warnings.pol"
    with pytest.raises(PolError) as e:
        polc.load(str(path))
    assert codes(e.value.diagnostics) == ["W0402", "E0401", "W0406"]


def test_the_language_server_reports_them_all_as_well():
    from polc.lsp.document import analyze_document

    path = GOLDEN / "79_analysis_error_keeps_warnings.pol"
    doc = analyze_document(path.read_text(), str(path))
    assert codes(doc.diagnostics) == ["W0402", "E0401", "W0406"]


# ---- 5. one namespace, said so ------------------------------------------------------------------


def test_a_latent_named_like_an_observation_says_one_namespace_and_suggests_a_free_name():
    text = ("obs speed : real in [0, 1.5]\nobs speed_latent : real\nlatent speed = 2 * speed\n"
            "action gas : real in [0, 1] = clip(speed + speed_latent, 0, 1)\n")
    with pytest.raises(PolError) as e:
        loads(text, "car.pol")
    d = next(d for d in e.value.diagnostics if d.code == "E0113")
    assert d.span.line == 3 and d.span.column == 8
    assert d.message.startswith('"speed" is already the name of an observation (line 1)')
    assert "share one namespace" in d.message
    assert '"speed_latent2"' in d.hint  # "speed_latent" is taken


def test_two_latents_of_one_name_are_still_a_duplicate():
    with pytest.raises(PolError) as e:
        loads("obs x : real\nlatent y = x\nlatent y = 2 * x\naction a : real = y\n")
    assert codes(e.value.diagnostics) == ["E0102"]
