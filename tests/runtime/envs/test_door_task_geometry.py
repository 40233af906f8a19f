"""examples/door/task.md describes the handle's shape (issue 37, item 9: a model inferred the
face it must be behind over three rounds). The numbers there are measured from the
environment's MuJoCo model; this test measures them again, so the text cannot drift from
the environment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("metaworld")

TASK = Path(__file__).resolve().parents[3] / "examples" / "door" / "task.md"


@pytest.fixture(scope="module")
def shape():
    """Collision geometry of the door and its handle, door shut, relative to obs["handle"]."""
    from polc.runtime.envs.door import SemanticDoorOpen

    env = SemanticDoorOpen()
    obs, _ = env.reset(seed=10000)
    m, d = env.sim.model, env.sim.data
    h = np.asarray(obs["handle"], float)
    door_body = m.geom_bodyid[[g for g in range(m.ngeom) if m.geom_bodyid[g] == m.geom_bodyid[43]][0]]
    parts = []
    for g in range(m.ngeom):
        if m.geom_bodyid[g] != door_body or not m.geom_contype[g]:
            continue
        axis, c = d.geom_xmat[g].reshape(3, 3)[:, 2], d.geom_xpos[g] - h
        if m.geom_type[g] == 5:  # a cylinder: radius, then its two ends
            r, half = m.geom_size[g][:2]
            parts.append(("cylinder", round(float(r), 3), c - half * axis, c + half * axis))
        elif m.geom_type[g] == 6:  # the leaf: half-sizes, centre
            parts.append(("box", m.geom_size[g].copy(), c - m.geom_size[g], c + m.geom_size[g]))
    env.close()
    return parts


def test_the_handle_geometry_in_task_md_is_the_environments(shape):
    text = TASK.read_text(encoding="utf-8")
    (leaf,) = [p for p in shape if p[0] == "box"]
    _, half, lo, hi = leaf
    assert f"The door leaf is {2 * half[1] * 100:.0f} cm thick" in text
    assert f"its front face is at handle y + {lo[1]:.3f}" in text
    assert f"it spans x from handle x - {-lo[0]:.2f} to handle x - {-hi[0]:.2f}" in text
    assert f"z within ±{half[2]:.3f} of the handle's height" in text
    cylinders = [p for p in shape if p[0] == "cylinder"]
    post = [p for p in cylinders if abs(p[2][0] - p[3][0]) < 1e-3 and p[1] < 0.02]
    bars = [p for p in cylinders if abs(p[2][1] - p[3][1]) < 1e-3]
    (post,) = post
    ends = sorted([post[2][1], post[3][1]])
    assert (f"A post of radius {post[1] * 100:.1f} cm sticks out of the front face toward the robot at handle "
            f"x - {-post[2][0]:.3f}, from y = handle y + {ends[1]:.3f} to handle y - {-ends[0]:.3f}") in text
    radii = sorted(p[1] for p in bars)
    x_lo, x_hi = min(min(p[2][0], p[3][0]) for p in bars), max(max(p[2][0], p[3][0]) for p in bars)
    y = bars[0][2][1]
    assert (f"radius {radii[0] * 100:.1f} to {radii[-1] * 100:.1f} cm, along x from handle x - {-x_lo:.3f} to "
            f"handle x + {x_hi:.3f}, at handle y - {-y:.3f}") in text
    gap_lo = y + radii[-1]
    assert f"y from handle y + {gap_lo:.3f} to handle y + {lo[1]:.3f}" in text
    assert f"there are about {(lo[1] - gap_lo) * 100:.0f} cm" in text
