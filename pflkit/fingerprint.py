"""A run's prefix fingerprint: the first steps of its first optimiser.

The replay check (:mod:`pflkit.replay`) must tell a stored run recomputed on another CPU from a
stored run that today's config, data or code no longer give.  Whole rounds cannot tell them
apart: the last-bit differences between two CPUs' kernels grow with every SGD step until, after
a few hundred, they are as large as those of a learning rate changed by 1 %.  The first steps of
a run can.  So every run records, as it trains, the first :data:`PREFIX_STEPS` steps of the first
:data:`PREFIX_OPTIMIZERS` optimiser(s) that step (in the book's runs: the first client's local
training in round 1, from the initial model): per step the norm of the gradient it applies and
the norm of the change it makes, in float64.  The replay recomputes those steps alone (about a
second) and compares them within :data:`PREFIX_RTOL`.

``benchmarks/prefix_drift.py`` measured both sides on 18 stored runs of all six chapters: between
compute paths that must agree (oneDNN limited to AVX2 or SSE4.1, ATen to AVX2, two threads,
channels-last models) the first optimiser's first 4 steps differ by at most 2.8e-4 (relative;
most by 1e-7); a learning rate × 1.01 moves the first update norm by 1e-2, momentum × 0.99 the
second by 1e-3 or more, a seed everything.  Later optimisers drift faster than they
discriminate: the second optimiser of a pFedHN-PC run is the hypernetwork's, whose first
gradient follows a client's whole 50 local steps (5.7e-3 apart under oneDNN's AVX2 kernels), and
the third of a KT-pFL run differs by 1e-1.  What acts only after local training (a server's
aggregation, a clustering threshold, the evaluation) does not show in the prefix: whole rounds,
compared where the CPU and compute path match, see it.

The hooks are torch's global optimizer step hooks: methods need no change, and recording does
not touch the computation (it reads gradients and parameters).
"""

from __future__ import annotations

import contextlib
import math
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

PREFIX_OPTIMIZERS = 1  # the optimisers whose first steps a run records, in the order they first step
PREFIX_STEPS = 4  # the steps recorded of each
PREFIX_RTOL = 3e-3  # about 10 × the largest drift measured between compute paths (2.8e-4)


class PrefixRecorded(Exception):
    """Raised by a recorder with ``stop=True`` once it holds its steps: the replay needs no more."""


@contextlib.contextmanager
def recording(optimizers: int = PREFIX_OPTIMIZERS, steps: int = PREFIX_STEPS, stop: bool = False):
    """Record the first ``steps`` steps of each of the first ``optimizers`` optimisers that step
    from now on (each a client's local training, a server's or a hypernetwork's optimiser): per
    step the norm of the gradient it applies and the norm of the change it makes to the
    parameters, into the yielded dict's lists ``grad`` and ``update`` (in the order the steps
    happen).  With ``stop``, :class:`PrefixRecorded` is raised once they are all recorded."""
    out: dict[str, list] = {"grad": [], "update": [], "optimizer": []}
    seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimiser -> [index, steps recorded]
    counter = [0]  # optimisers seen so far
    before: list[torch.Tensor] = []

    def params(optimizer):
        return [p for group in optimizer.param_groups for p in group["params"]]

    def pre(optimizer, args, kwargs):
        before.clear()
        if optimizer not in seen:
            if counter[0] >= optimizers:
                return
            seen[optimizer] = [counter[0], 0]  # its index, the steps recorded
            counter[0] += 1
        index, done = seen[optimizer]
        if done >= steps:
            return
        sq = sum((p.grad.detach().double().pow(2).sum().cpu() for p in params(optimizer) if p.grad is not None), 0.0)
        out["grad"].append(math.sqrt(float(sq)))
        out["optimizer"].append(index)
        before.extend(p.detach().clone() for p in params(optimizer))

    def post(optimizer, args, kwargs):
        if not before:
            return
        sq = sum(((p.detach() - b).double().pow(2).sum().cpu() for p, b in zip(params(optimizer), before)), 0.0)
        out["update"].append(math.sqrt(float(sq)))
        before.clear()
        seen[optimizer][1] += 1
        if stop and len(out["update"]) >= optimizers * steps:
            raise PrefixRecorded

    handles = [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]
    try:
        yield out
    finally:
        for h in handles:
            h.remove()


def first_optimisers(prefix: dict, n: int) -> dict:
    """The part of a recorded prefix that belongs to its first ``n`` optimisers."""
    keep = [i for i, o in enumerate(prefix["optimizer"]) if o < n]
    return {k: [prefix[k][i] for i in keep if i < len(prefix[k])] for k in ("grad", "update", "optimizer")}


def truncated(prefix: dict, n: int) -> dict:
    """The first ``n`` recorded steps of a prefix."""
    return {k: prefix[k][:n] for k in ("grad", "update", "optimizer")}


def differences(stored: dict, now: dict, rtol: float = PREFIX_RTOL) -> list[str]:
    """The recorded steps whose gradient or update norms differ by more than ``rtol`` (relative),
    one line each."""
    out = []
    for what in ("grad", "update"):
        a_all, b_all = stored.get(what, []), now.get(what, [])
        if len(a_all) != len(b_all):
            out.append(f"{len(a_all)} optimiser steps in the stored prefix, {len(b_all)} now")
            break
        for i, (a, b) in enumerate(zip(a_all, b_all), start=1):
            if relative(a, b) > rtol:
                out.append(f"recorded step {i}: {what} norm {a!r} stored, {b!r} now ({relative(a, b):.1e} apart)")
    return out


def relative(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def prefix_of(cfg, fed=None, optimizers: int = PREFIX_OPTIMIZERS, steps: int = PREFIX_STEPS, rounds: int = 2) -> dict:
    """Recompute the prefix of the run ``cfg`` describes (:func:`recording`; fewer steps where its
    first ``rounds`` rounds take fewer), with the torch threads and compute path in force."""
    from .engine import Federation, run
    from .errors import TrainingDiverged

    fed = fed or Federation.from_config(cfg)
    with recording(optimizers, steps, stop=True) as norms:
        try:
            run(cfg, fed, stop_after=min(rounds, cfg.rounds))
        except (PrefixRecorded, TrainingDiverged):  # a run that diverges early records what it stepped
            pass
    return norms
