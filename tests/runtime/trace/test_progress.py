"""Progress that progresses (issue 12, item 7): a vectorised rollout finishes its episodes
together, so the progress counts steps as they run; without a terminal it prints a line
now and then instead of nothing until the end."""

from __future__ import annotations

import io

from polc.runtime.cli import EpisodeProgress
from polc.runtime.envs import toy
from polc.runtime.trace.rollout import RolloutConfig, rollout
from toy_cli import pol, polc, toy_env  # noqa: F401  (fixtures and the in-process runner)


def test_a_vectorised_rollout_reports_its_steps_before_any_episode_ends(pol):
    import jax

    import polc as polc_lib

    policy = polc_lib.load(pol).compile()
    seen: list[tuple[int, int]] = []  # (steps so far, episodes finished) at each report
    done = [0]
    steps = [0]

    def on_steps(n: int) -> None:
        steps[0] += n
        seen.append((steps[0], done[0]))

    result = rollout(policy, policy.init(jax.random.PRNGKey(0)), toy.SPEC, [0, 1, 2, 3],
                     RolloutConfig(n_envs=4), lambda ep: done.__setitem__(0, done[0] + 1), on_steps)
    assert steps[0] == int(result.lengths.sum())  # every recorded step counted, idle reruns not
    assert [s for s, d in seen if d == 0][-1] >= 4 * 10  # steps kept moving while no episode had ended


def test_without_a_terminal_a_line_is_printed_every_interval():
    out = io.StringIO()  # not a terminal
    with EpisodeProgress("rollout", 4, quiet=False, interval=0.0, stream=out) as p:
        p.steps(120)
        p.episode("seed 0: return -3.0")
    lines = out.getvalue().splitlines()
    assert lines == ["polc rollout: 0/4 episodes, 120 steps, 0 s",
                     "polc rollout: 1/4 episodes, 120 steps, 0 s; last: seed 0: return -3.0"]


def test_quiet_prints_nothing_and_a_long_interval_waits():
    out = io.StringIO()
    with EpisodeProgress("eval", 2, quiet=True, interval=0.0, stream=out) as p:
        p.steps(5)
        p.episode("x")
    with EpisodeProgress("eval", 2, quiet=False, interval=3600.0, stream=out) as p:
        p.steps(5)
    assert out.getvalue() == ""


def test_polc_rollout_with_progress_on_a_non_terminal_still_writes_its_trace(pol, tmp_path, capsys):
    code, _, err = polc(capsys, "rollout", pol, "--env", "toy_reach", "--episodes", "3", "-o",
                        str(tmp_path / "t.parquet"))
    assert code == 0 and "wrote" in err and "3 episode(s)" in err
