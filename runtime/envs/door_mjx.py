"""door_mjx on MJX: a brax `Env` written directly on `mujoco.mjx` (as MuJoCo
Playground environments are; not brax's unmaintained `PipelineEnv`).

    env = DoorMJX()
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))   # State; obs (16,) float32
    state = jax.jit(env.step)(state, jnp.zeros(3))        # action (dx, dy, dz) in [-1, 1]

The task, its schema, reward and metric are `door_mjx_scene`'s, shared with the
C MuJoCo gymnasium env (`door_mjx_gym`, float64) that `polc eval` runs; the
observation is the schema's named fields packed in schema order into one
float32 vector (`TraceLayout.pack_obs`'s layout: hand, handle, prev_hand,
prev_handle, goal, door_angle), so `collect.unflatten` reads it by name.
Physics in float32 (JAX's default); a step is ctrl = clip(action, -1, 1), then
2 MJX physics steps of 0.005 s.

All episode state lives in `pipeline_state` (the `mjx.Data`): the door
position is the mocap body's `mocap_pos`, the previous hand/handle positions
are recomputed from the previous `Data`, and the running metric sits in
`userdata` = [min |handle - goal| so far, the part of it already reported].
So brax's `AutoResetWrapper`, which restores only `pipeline_state` and `obs`
to the slot's first state, restarts an episode exactly (same door as that
slot's first episode: brax's semantics; `num_resets_per_eval` redraws them).

`state.metrics["min_handle_to_target"]` is the metric as a telescoping sum:
each step reports the decrease of the running minimum (the first step the
initial distance), so brax's per-episode SUM of it (`EpisodeWrapper`,
`EvalWrapper`) is the episode's minimum handle-to-goal distance over the
states the policy acted in, the metric `polc eval` reports on the C env.
`done` is always 0: episodes end by brax's `episode_length` (500).
"""

from __future__ import annotations

import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

with warnings.catch_warnings():
    # brax.envs imports its generalized pipeline, which imports jaxopt, whose import
    # warns that it is unmaintained (a DeprecationWarning); polc never calls jaxopt.
    warnings.filterwarnings("ignore", message="JAXopt is no longer maintained", category=DeprecationWarning)
    from brax.envs.base import Env, State

from . import door_mjx_scene as S

METRIC_KEY = S.DOOR_MJX_METRIC.key


class DoorMJX(Env):
    """The door_mjx task on MJX (see the module docstring). Unbatched: brax's
    training wrapper vmaps it."""

    def __init__(self, xml_path: str = S.XML):
        self.mj_model = mujoco.MjModel.from_xml_path(xml_path)
        self.model = mjx.put_model(self.mj_model)
        data = mujoco.MjData(self.mj_model)
        mujoco.mj_forward(self.mj_model, data)
        self._data0 = mjx.put_data(self.mj_model, data)
        self._hand = self.mj_model.body("hand").id
        self._handle = self.mj_model.geom("handle").id
        self._hinge = int(self.mj_model.joint("hinge").qposadr[0])
        self._frame = self.mj_model.body("door_frame").id

    # ---- brax Env ----

    @property
    def observation_size(self) -> int:
        return S.OBS_SIZE

    @property
    def action_size(self) -> int:
        return len(S.ACTION_NAMES)

    @property
    def backend(self) -> str:
        return "mjx"

    def reset(self, rng: jax.Array) -> State:
        door = S.door_from_uniform(jax.random.uniform(rng, (3,)), jnp).astype(jnp.float32)
        return self.reset_to(door)

    def reset_to(self, door: jax.Array) -> State:
        """An episode with the door (hinge) at `door` (3,)."""
        data = self._data0.replace(mocap_pos=jnp.reshape(jnp.asarray(door, jnp.float32), (1, 3)))
        # Kinematics is all the first observation reads (body and geom positions). A step
        # recomputes the rest from qpos and qvel, so the episode is the one a whole
        # `mjx.forward` here gave, bit for bit (observations, rewards, qpos and qvel of 4
        # doors over 15 random steps, compared when this changed); the C MuJoCo comparison in
        # tests/runtime/envs/test_door_mjx.py still holds. A reset now traces and compiles in
        # about a fifth of the CPU (1.9 s against 8.6 s, jitted and vmapped): brax's PPO traced
        # forward's collision and constraint code in each of its four resets of a run.
        with jax.numpy_rank_promotion("allow"):  # MJX broadcasts implicitly; polc's tests forbid it
            data = mjx.kinematics(self._model_at(data), data)
        hand, handle, angle = self._quantities(data)
        goal = self._goal(data)
        d0 = _norm(handle - goal)
        data = data.replace(userdata=jnp.stack([d0, jnp.zeros_like(d0)]))
        obs = S.pack_obs(hand, handle, hand, handle, goal, angle, jnp)
        zero = jnp.zeros((), jnp.float32)
        return State(data, obs, zero, zero, {METRIC_KEY: zero}, {})

    def step(self, state: State, action: jax.Array) -> State:
        prev = state.pipeline_state
        prev_hand, prev_handle, _ = self._quantities(prev)
        goal = self._goal(prev)
        data = prev.replace(ctrl=jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0))
        with jax.numpy_rank_promotion("allow"):
            model = self._model_at(prev)
            data = jax.lax.fori_loop(0, S.SUBSTEPS, lambda _, d: mjx.step(model, d), data)
        # The metric: the states acted in so far are s_0..s_{t-1}; prev is s_{t-1}.
        low, reported = prev.userdata[0], prev.userdata[1]
        low = jnp.minimum(low, _norm(prev_handle - goal))
        data = data.replace(userdata=jnp.stack([low, low]))
        hand, handle, angle = self._quantities(data)
        obs = S.pack_obs(hand, handle, prev_hand, prev_handle, goal, angle, jnp)
        reward = S.reward(hand, handle, goal, angle, jnp).astype(jnp.float32)
        metrics = {**state.metrics, METRIC_KEY: low - reported}  # keep keys wrappers added
        return state.replace(pipeline_state=data, obs=obs, reward=reward, metrics=metrics)

    # ---- helpers ----

    def _model_at(self, data: mjx.Data) -> mjx.Model:
        """The model with the door frame's body_pos at its mocap position. MJX 3.3.0's
        kinematics places a mocap body at mocap_pos only AFTER walking the body tree, so
        its children (the door) would stay at the MJCF's position; C MuJoCo moves them."""
        return self.model.replace(body_pos=self.model.body_pos.at[self._frame].set(data.mocap_pos[0]))

    def _quantities(self, data: mjx.Data) -> tuple[jax.Array, jax.Array, jax.Array]:
        """hand (3,), handle (3,) positions and the door angle () of `data`."""
        return data.xpos[self._hand], data.geom_xpos[self._handle], data.qpos[self._hinge]

    def _goal(self, data: mjx.Data) -> jax.Array:
        return S.goal_of(data.mocap_pos[0], jnp).astype(jnp.float32)


def _norm(v: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.sum(jnp.square(v)))


def make(xml_path: Optional[str] = None) -> DoorMJX:
    """The MJX door env (the brax engine's `--env door_mjx`)."""
    return DoorMJX(xml_path or S.XML)

