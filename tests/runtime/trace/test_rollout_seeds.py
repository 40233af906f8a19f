"""`polc rollout` traces training seeds unless asked for evaluation seeds, so the manual
loop (rollout, analyze, revise, eval) never tunes on the tracks eval reports as unseen."""

from __future__ import annotations

import pytest

from polc.runtime.io.table import read_table

from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)


@pytest.mark.parametrize("flags, seeds, kind", [
    ((), [0, 1], "training"),
    (("--eval-seeds",), [10_000, 10_001], "evaluation"),
    (("--seed", "10005"), [10_005, 10_006], "evaluation"),
    (("--seed", "999"), [999, 1000], "mixed"),
])
def test_rollout_seeds_and_their_kind_in_the_trace(pol, tmp_path, capsys, flags, seeds, kind):
    out = str(tmp_path / "t.parquet")
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "2", *flags, "-o", out, "-q")
    assert code == 0, err
    meta = read_table(out, columns=[]).metadata
    assert meta["seeds"] == seeds
    assert meta["seed_kind"] == kind


def test_seed_and_eval_seeds_together_are_a_usage_error(pol, tmp_path, capsys):
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "2", "--seed", "3",
                        "--eval-seeds", "-o", str(tmp_path / "t.parquet"), "-q")
    assert code == 2
    assert "give --seed or --eval-seeds, not both" in err


def test_eval_spells_episodes_and_seed_as_rollout_does(pol, capsys):
    """One spelling everywhere (issue 12, item 6); eval's older --seeds/--seed-start still work."""
    import json

    runs = [polc(capsys, "eval", pol, "--env", "toy_reach", *flags, "--json") for flags in
            (("--episodes", "2", "--seed", "10003"), ("--seeds", "2", "--seed-start", "10003"))]
    assert all(code == 0 for code, _, _ in runs)
    new, old = (json.loads(out) for _, out, _ in runs)
    assert [s["seed"] for s in new["per_seed"]] == [10003, 10004] and new == old
