"""Sweep throughput: the same runs one after another vs in parallel worker processes.

Six FedAvg/Local runs (LeNet, Fashion-MNIST, 20 clients, a few rounds) are computed three ways,
each into a fresh store, in one process tree and one after another (nothing else should run):

* ``serial, 1 thread``   one run after another in this process, one torch thread;
* ``2 workers x 1``      the sweep's default on 2 cores: two worker processes, one thread each;
* ``serial, 2 threads``  one run after another with two torch threads (other numbers: the thread
  count changes the floating-point sums, which is why the sweep fixes it).

Prints runs per minute and the speed-up over the first, and appends a JSON line to
``benchmarks/results/sweep_throughput.jsonl``.  Ratios are comparable across machines;
absolute times are not.

    python benchmarks/sweep_throughput.py [--rounds 4] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from pflkit.engine import RunConfig, dataset
from pflkit.experiments import arms_for, cores, sweep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    base = RunConfig(dataset="fashion-mnist", clients=20, rounds=args.rounds, local_steps=10, eval_every=args.rounds)
    arms = arms_for(["fedavg", "local"], base)
    seeds = list(range(args.seeds))
    dataset("fashion-mnist")  # read once, before timing
    rows = {}
    for label, kw in [
        ("serial, 1 thread", dict(workers=1, threads=1)),
        ("2 workers x 1 thread", dict(workers=2, threads=1)),
        ("serial, 2 threads", dict(workers=1, threads=2)),
    ]:
        if kw["workers"] * kw["threads"] > cores():
            print(f"{label}: skipped ({cores()} cores)")
            continue
        with tempfile.TemporaryDirectory() as store:
            t0 = time.perf_counter()
            res = sweep(arms, seeds, store, progress=False, **kw)
            rows[label] = {"wall_s": round(time.perf_counter() - t0, 2), "runs": res.computed}
    first = next(iter(rows.values()))["wall_s"]
    for label, r in rows.items():
        r["runs_per_min"] = round(60 * r["runs"] / r["wall_s"], 2)
        r["speedup"] = round(first / r["wall_s"], 2)
        print(
            f"{label:22s} {r['runs']} runs in {r['wall_s']:7.1f} s  {r['runs_per_min']:6.2f} runs/min  x{r['speedup']}"
        )
    out = Path(__file__).resolve().parent / "results" / "sweep_throughput.jsonl"
    out.parent.mkdir(exist_ok=True)
    with out.open("a") as f:
        f.write(
            json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "cores": cores(), "rounds": args.rounds, **rows})
            + "\n"
        )


if __name__ == "__main__":
    main()
