"""Which Car Racing observations echo which action, measured on a demonstration.

    python scripts/echo_measure.py examples/car_racing/demo.parquet

For each observation x and action a, within episodes:
  change explained: R2(x[t+1] ~ x[t] + a[t]) - R2(x[t+1] ~ x[t]), over 1 - R2(x[t+1] ~ x[t]):
                    the share of x's step-to-step change that the action drives;
  predicts:         R2(a[t] ~ x[t]): how well x alone (linear) predicts the action read with it.
An echo has both near 1 (docs/environments.md, "Echo fields").
"""

from __future__ import annotations

import sys

import numpy as np
import pyarrow.parquet as pq


def r2(y: np.ndarray, xs: list[np.ndarray]) -> float:
    X = np.column_stack([np.ones(len(y))] + xs)
    b, *_ = np.linalg.lstsq(X, y, rcond=None)
    return 1.0 - float((y - X @ b).var() / y.var())


def main(path: str) -> None:
    t = pq.read_table(path).to_pydict()
    same = np.diff(np.asarray(t["episode"])) == 0
    acts = {k[len("action."):]: np.asarray(t[k], float) for k in t if k.startswith("action.")}
    ws, speed = np.asarray(t["obs.wheel_speed"], float), np.asarray(t["obs.speed"], float)
    obs = {"steer_ind": np.asarray(t["obs.steer_ind"], float), "ang_vel": np.asarray(t["obs.ang_vel"], float),
           "offset": np.asarray(t["obs.offset"], float), "speed": speed,
           "wheel_speed front": ws[:, :2].mean(1), "wheel_speed rear": ws[:, 2:].mean(1),
           "rear wheels - speed": ws[:, 2:].mean(1) - speed, "front wheels - speed": ws[:, :2].mean(1) - speed}
    names = list(acts)
    print(f"{len(t['episode'])} rows; columns: change explained by {' / '.join(names)} | predicts {' / '.join(names)}")
    for o, x in obs.items():
        x0, x1 = x[:-1][same], x[1:][same]
        base = r2(x1, [x0])
        change = [(r2(x1, [x0, a[:-1][same]]) - base) / (1 - base) for a in acts.values()]
        pred = [r2(a, [x]) for a in acts.values()]
        print(f"{o:22s}" + " / ".join(f"{c:.3f}" for c in change) + "  |  " + " / ".join(f"{p:.3f}" for p in pred))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "examples/car_racing/demo.parquet")
