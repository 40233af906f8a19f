"""The mean score of a user's expert (`--expert FILE.py:FUNCTION`) over unseen
seeds, the way `polc eval` scores a policy (the first N evaluation seeds):

    python examples/eval_user_expert.py examples/lunar_lander/env.toml examples/lunar_lander/expert.py:act 100
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from polc.runtime import envs
from polc.runtime.envs.user_expert import UserExpertFactory
from polc.runtime.trace.demos import run_expert


def main(env: str, expert: str, n: int) -> None:
    spec = dataclasses.replace(envs.get(env), _expert=UserExpertFactory(expert))
    seeds = list(spec.eval_seeds[:n])
    returns = np.array([run_expert(spec, s)[0].ret for s in seeds])
    print(f"{env} expert {expert}: return {returns.mean():.1f} ± {returns.std():.1f} over {n} unseen seeds "
          f"({seeds[0]}..{seeds[-1]}); min {returns.min():.1f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 100)
