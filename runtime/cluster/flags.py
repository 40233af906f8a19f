"""The --ray flags every command that can run on a cluster shares. Imported by the CLI on
every call, so nothing heavy here (and never Ray)."""

from __future__ import annotations

import argparse
import os
from typing import Optional

ENV = "POLC_RAY_ADDRESS"


def add_ray_flags(c: argparse.ArgumentParser, workers: bool = True) -> None:
    """--ray, and (`workers`) --ray-workers for a command whose episodes rollout workers step."""
    c.add_argument("--ray", metavar="auto|ADDRESS",
                   help="run on a Ray cluster: auto joins the running one or starts a local one; ADDRESS "
                        f"(host:port, ray://host:10001) joins that one (default: ${ENV}; docs/ray.md)")
    if not workers:
        return
    c.add_argument("--ray-workers", type=int, default=None, metavar="N",
                   help="with --ray: rollout-worker actors (default: one per CPU of the cluster)")


def ray_address(args: argparse.Namespace) -> Optional[str]:
    """The cluster the command runs on: --ray, else $POLC_RAY_ADDRESS, else None (in process)."""
    given = getattr(args, "ray", None)
    if given:
        return given
    return os.environ.get(ENV) or None


def pool_for(args: argparse.Namespace, spec, policy):
    """A context manager: the command's worker pool with --ray (or $POLC_RAY_ADDRESS), else
    None (the command runs in this process and Ray is not imported)."""
    import contextlib

    address = ray_address(args)
    if not address:
        return contextlib.nullcontext()
    from .pool import worker_pool

    return worker_pool(address, spec, policy, getattr(args, "ray_workers", None))


def ray_label(what: str, pool) -> str:
    """A progress label that says where the episodes run."""
    return what if pool is None else f"{what} on {pool.size} Ray worker{'s' if pool.size != 1 else ''}"
