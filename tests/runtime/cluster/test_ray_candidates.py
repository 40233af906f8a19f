"""A refinement round's candidates on Ray (`POLC_RAY_ADDRESS` with `--candidates K`, issue 17):
one Ray task per candidate on a local instance (2 CPUs, 127.0.0.1), the local scores in the
local order, a candidate's own failure kept as its verdict, a dead worker's candidate rerun."""

from __future__ import annotations

import os
from dataclasses import replace

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"  # before Ray is imported

import pytest

ray = pytest.importorskip("ray")

from ray_helpers import RAY_MARKS  # noqa: E402

from polc.runtime.cluster.flags import ENV  # noqa: E402
from polc.runtime.envs import toy  # noqa: E402
from polc.runtime.refine.candidates import Candidate, evaluate_candidates  # noqa: E402

pytestmark = RAY_MARKS


def _population():
    import polc

    spec = toy.register()
    texts = [toy.reach_policy(std=s, name=f"c{i + 1}") for i, s in enumerate((0.1, 0.3, 0.5))]
    return spec, [Candidate(i + 1, t, polc.loads(t, f"c{i + 1}.pol")) for i, t in enumerate(texts)]


def _fake_fit(marker: str = ""):
    """A fit (sent to the workers by value): the policy's init params from a key of its std;
    candidate 3 cannot be fitted; with `marker`, the first call kills its worker."""
    def fit(program, demo, settings):
        import jax

        from polc.runtime.refine.work import FitFailed, Fitted

        if marker and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker dies, as if killed or out of memory
        policy = program.compile()
        if policy.program.name == "c3":
            raise FitFailed("the loss is not finite")
        return Fitted(policy, policy.init(jax.random.PRNGKey(int(policy.program.name[1:]))), {"val_loss": 0.25}, {})
    return fit


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_candidates_on_ray_get_the_local_scores_in_order(cluster, monkeypatch):
    from polc.runtime.refine.work import Settings

    spec, population = _population()
    seeds, settings, fit = [0, 1, 2], Settings(), _fake_fit()
    monkeypatch.setenv(ENV, "auto")  # the settings name the cluster, not the environment
    local = evaluate_candidates(population, None, spec, seeds, settings, fit)
    remote = evaluate_candidates(population, None, spec, seeds, replace(settings, ray_address="auto"), fit)
    assert remote == local
    assert [s.index for s in remote] == [1, 2, 3] and len(remote[0].scores) == 3
    assert [s.verdict for s in remote] == ["scored", "scored", "unfittable: the loss is not finite"]


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_candidate_whose_worker_dies_is_rerun(cluster, monkeypatch, tmp_path):
    from polc.runtime.refine.work import Settings

    spec, population = _population()
    marker = tmp_path / "died"
    scores = evaluate_candidates(population[:2], None, spec, [0, 1], Settings(ray_address="auto"),
                                 _fake_fit(str(marker)))
    assert marker.exists() and [s.index for s in scores] == [1, 2]
    assert all(s.verdict == "scored" for s in scores)
