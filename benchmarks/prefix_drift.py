"""How far the replay check's prefix fingerprint drifts between compute paths that must agree,
against how far it moves when a run's config changes a little: the measurement behind
``pflkit.fingerprint.PREFIX_STEPS`` and ``PREFIX_RTOL``.

For stored runs of every chapter (two each, drawn with a fixed seed) it recomputes the gradient
norms of the first ``--steps`` optimiser steps

* on compute paths that must give the same run: the default one, oneDNN limited to AVX2 and to
  SSE4.1 (``ONEDNN_MAX_CPU_ISA``), ATen's kernels limited to AVX2 (``ATEN_CPU_CAPABILITY``), two
  torch threads instead of one, channels-last models instead of contiguous ones;
* with the config changed: learning rate × 1.01, momentum × 0.99, another seed, one method option
  × 1.01 (a number) or flipped (a flag),

each path in its own process (the variables act when the libraries load), and writes, per run
and step, the relative difference to the default path (``benchmarks/results/prefix_drift.jsonl``)
and a summary: the largest drift between paths and the smallest change a tampered config makes,
per step.

    python benchmarks/prefix_drift.py [--steps 40] [--per-chapter 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "prefix_drift.jsonl"
PATHS = {
    "default": ({}, {}),
    "onednn-avx2": ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, {}),
    "onednn-sse41": ({"ONEDNN_MAX_CPU_ISA": "SSE41"}, {}),
    "aten-avx2": ({"ATEN_CPU_CAPABILITY": "avx2"}, {}),
    "threads-2": ({}, {"threads": 2}),
    "channels-last": ({}, {"memory_format": "channels_last"}),
}
TAMPERS = ("lr×1.01", "momentum×0.99", "seed+1", "option")


def tampered(cfg, how: str):
    if how == "lr×1.01":
        return dataclasses.replace(cfg, lr=cfg.lr * 1.01)
    if how == "momentum×0.99":
        return dataclasses.replace(cfg, momentum=cfg.momentum * 0.99) if cfg.momentum else None
    if how == "seed+1":
        return dataclasses.replace(cfg, seed=cfg.seed + 1)
    for name, value in cfg.options.items():  # the first numeric option × 1.01, or a flag flipped
        if isinstance(value, bool) or value in (0, 1) and isinstance(value, int):
            return dataclasses.replace(cfg, options={**cfg.options, name: int(not value)})
        if isinstance(value, float) and value:
            return dataclasses.replace(cfg, options={**cfg.options, name: value * 1.01})
    return None


def worker(files: list[str], optimizers: int, steps: int, threads: int, memory_format: str, tamper: bool) -> None:
    import torch

    from pflkit.compute import set_memory_format
    from pflkit.errors import PflkitError
    from pflkit.fingerprint import prefix_of
    from pflkit.replay import config_of

    torch.set_num_threads(threads)
    set_memory_format(memory_format)
    for f in files:
        cfg = config_of(json.loads(Path(f).read_text()))
        variants = {"": cfg} | ({t: tampered(cfg, t) for t in TAMPERS} if tamper else {})
        for name, c in variants.items():
            if c is None:
                continue
            t0 = time.perf_counter()
            try:
                norms = prefix_of(c, optimizers=optimizers, steps=steps)
            except PflkitError:  # a tampered option out of its range: no variant
                continue
            print(json.dumps({"file": f, "variant": name, "norms": norms, "s": time.perf_counter() - t0}), flush=True)


def pick(per_chapter: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for chapter in sorted(p for p in (ROOT / "results").iterdir() if p.is_dir()):
        files = sorted(str(f.relative_to(ROOT)) for f in chapter.glob("*.json"))
        out += sorted(rng.choice(files, min(per_chapter, len(files)), replace=False).tolist())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--optimizers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--per-chapter", type=int, default=2)
    ap.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--memory-format", default="contiguous", help=argparse.SUPPRESS)
    ap.add_argument("--tamper", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return worker(args.worker, args.optimizers, args.steps, args.threads, args.memory_format, args.tamper)
    files = pick(args.per_chapter)
    got: dict[tuple[str, str], dict] = {}
    for path, (env, opts) in PATHS.items():
        cmd = [sys.executable, __file__, "--optimizers", str(args.optimizers), "--steps", str(args.steps),
               "--threads", str(opts.get("threads", 1)),
               "--memory-format", opts.get("memory_format", "contiguous"), "--worker", *files]  # fmt: skip
        if path == "default":
            cmd.append("--tamper")
        out = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, check=True)
        for line in out.stdout.splitlines():
            r = json.loads(line)
            label = r["variant"] or path
            got[r["file"], label] = r["norms"]
        print(f"{path}: done", flush=True)
    rows = []
    for (f, label), norms in got.items():
        if label == "default":
            continue
        ref = got[f, "default"]
        rel = {}
        for what in ("grad", "update"):
            a, b = np.array(ref[what]), np.array(norms[what])
            n = min(len(a), len(b))
            rel[what] = (np.abs(a[:n] - b[:n]) / np.maximum(np.maximum(np.abs(a[:n]), np.abs(b[:n])), 1e-300)).tolist()
        step, count = [], {}
        for o in ref["optimizer"]:  # each recorded step's number within its optimiser
            count[o] = count.get(o, 0) + 1
            step.append(count[o])
        kind = "tamper" if label in TAMPERS else "path"
        rows.append(
            {"file": f, "variant": label, "kind": kind, "rel": rel, "optimizer": ref["optimizer"], "step": step}
        )
    with open(OUT, "a") as fh:
        for row in rows:
            fh.write(json.dumps(row | {"date": time.strftime("%Y-%m-%d")}) + "\n")
    summarize(rows, args.optimizers, args.steps)


def largest(row: dict, optimizers: int, steps: int) -> float:
    """A row's largest relative difference over the first ``steps`` steps of its first ``optimizers``."""
    keep = [i for i, (o, k) in enumerate(zip(row["optimizer"], row["step"])) if o < optimizers and k <= steps]
    values = [row["rel"][w][i] for w in ("grad", "update") for i in keep if i < len(row["rel"][w])]
    return max(values, default=float("nan"))


def summarize(rows: list[dict], optimizers: int, steps: int) -> None:
    """Per prefix (the first k steps of the first N optimisers): the largest drift between compute
    paths, and the smallest change a tampered config makes (its own largest over the prefix);
    a changed seed is left out of the minimum (it changes everything)."""
    from pflkit.fingerprint import PREFIX_RTOL

    print(f"{'N':>2} {'k':>3} {'paths: max drift':>17} {'tampered: min change':>21} {'undetected':>12}")
    for n in range(1, optimizers + 1):
        for k in range(1, steps + 1):
            paths = [largest(r, n, k) for r in rows if r["kind"] == "path"]
            tamp = [largest(r, n, k) for r in rows if r["kind"] == "tamper" and r["variant"] != "seed+1"]
            missed = sum(1 for t in tamp if not t > PREFIX_RTOL)
            print(f"{n:>2} {k:>3} {np.nanmax(paths):>17.2e} {np.nanmin(tamp):>21.2e} {missed:>12}/{len(tamp)}")


if __name__ == "__main__":
    main()
