"""Every memory construct example (examples/memory/*.pol) fits on its task's demonstration and
rolls out to a trace with a column per state (issue 38, "every example checks, compiles, fits,
evaluates and traces"): `polc fit` through time on the folder's demo.parquet (a tiny budget: the
fit runs, its quality is examples/memory/README.md's business), then `polc rollout` of the fit in
the folder's env.toml, whose trace holds `state.NAME` for every state, inside the state's
declared range. The pick-place state machine's five modes and a retry appear in the trace of its
fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import polc
from polc.cli import main

ROOT = Path(__file__).resolve().parents[3]
MEMORY = ROOT / "examples" / "memory"
NAMES = sorted(p.stem for p in MEMORY.glob("*.pol"))
RETRY_SEED = 1  # a training seed whose first pick-place grasp slips: one retry, then placed


def _trace(tmp_path: Path, name: str, params: Path, seed: int, episodes: int = 1) -> dict[str, np.ndarray]:
    out = tmp_path / f"{name}.parquet"
    assert main(["rollout", str(MEMORY / f"{name}.pol"), "--params", str(params), "--env",
                 str(MEMORY / name / "env.toml"), "--episodes", str(episodes), "--seed", str(seed), "-o", str(out),
                 "-q"]) == 0
    table = pq.read_table(out)
    return {c: table.column(c).to_numpy() for c in table.column_names}


@pytest.mark.slow  # a fit's compile and a rollout's: 2 to 5 s of CPU each
@pytest.mark.parametrize("name", NAMES)
def test_the_example_fits_on_its_demonstration_and_traces_its_states(name, tmp_path):
    params = tmp_path / f"{name}.params"
    assert main(["fit", str(MEMORY / f"{name}.pol"), "--demos", str(MEMORY / name / "demo.parquet"), "-o",
                 str(params), "--restarts", "1", "--epochs", "2", "--check-episodes", "0", "-q"]) == 0
    saved = json.loads(params.read_text())
    tp = polc.load(str(MEMORY / f"{name}.pol"), analyze=False).typed
    assert set(saved["weights"]) == {w.name for w in tp.weights} and saved["fit"]["rows_train"] > 0
    moved = [w.name for w in tp.weights if not np.allclose(saved["weights"][w.name], w.init, rtol=1e-6, atol=0)]
    assert moved, "two epochs of the fit moved no weight from its declared value"
    columns = _trace(tmp_path, name, params, seed=RETRY_SEED)
    for st in tp.states:
        values = columns[f"state.{st.name}"].astype(np.float64)
        assert values.shape[0] == columns["step"].shape[0] > 1
        lo, hi = (st.lo, st.hi) if st.type.base == "real" else (0, 1)
        assert np.all(values >= lo) and np.all(values <= hi), (st.name, values.min(), values.max())
        assert values[0] == pytest.approx(float(np.asarray(st.init).reshape(-1)[0]))  # from its initial value
    if name == "pick_place":
        _walks_through_every_mode_and_a_retry(columns)


def _walks_through_every_mode_and_a_retry(columns: dict[str, np.ndarray]) -> None:
    """The state machine's modes in the trace: APPROACH (0) to TRANSPORT (4); at RETRY_SEED the first
    grasp slips (the env draws one number per grasp, whatever the gains), LIFT goes back to DESCEND
    and `retries` counts it; then the object is placed."""
    mode, retries = columns["state.mode"], columns["state.retries"]
    assert set(np.unique(mode).tolist()) == {0.0, 1.0, 2.0, 3.0, 4.0}
    back = np.flatnonzero((mode[:-1] == 3) & (mode[1:] == 1))
    assert back.size >= 1 and retries[-1] == back.size
    assert columns["reward"].sum() == 1.0 and columns["terminated"][-1]
