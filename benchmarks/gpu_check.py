"""Stored CPU runs on a CUDA device: replay and timing.

For each stored run (a JSON file of a committed store) it
1. replays the first rounds on CUDA, through the first evaluation, and compares the training
   losses and accuracies with the stored CPU run under the replay check's cross-machine tolerance
   (`pflkit.replay`: losses 1e-3 relative, accuracies 1 point);
2. times a tenth of the run's rounds (at least 20) on CUDA, evaluation only at the end, and sets
   the estimate for the whole run beside the CPU time the stored run took (1 torch thread).

    PFLKIT_DATA=<folder with fashion-mnist/> python benchmarks/gpu_check.py results/pfedhn/<run>.json ... \
        [--out benchmarks/results/gpu_check.jsonl]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import time

import torch

from pflkit.engine import Federation, run
from pflkit.replay import _same, config_of, replay_rounds


def check(path: str) -> dict:
    rec = json.load(open(path))
    cfg = dataclasses.replace(config_of(rec), device="cuda")
    r = replay_rounds(cfg)
    now = run(cfg, Federation.from_config(cfg), stop_after=r)
    old = {h["round"]: h for h in rec["history"]}
    acc = [
        (row["round"], k, old[row["round"]][k], row[k], _same(old[row["round"]][k], row[k], False, k))
        for row in now["history"]
        if row["round"] in old
        for k in ("mean_acc", "pooled_acc")
        if k in row and k in old[row["round"]]
    ]
    loss = [(a, b, _same(a, b, False, "train_loss")) for a, b in zip(rec["round_loss"][:r], now["round_loss"])]
    n = max(20, cfg.rounds // 10)
    tcfg = dataclasses.replace(cfg, rounds=n, eval_every=n)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    run(tcfg, Federation.from_config(tcfg))
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    prov = rec["provenance"]
    return {
        "run": path.rsplit("/", 1)[-1], "method": cfg.method, "clients": cfg.clients, "rounds": cfg.rounds,
        "replayed_rounds": r, "gpu_s_per_round": dt / n, "gpu_est_run_s": dt / n * cfg.rounds,
        "cpu_run_s": prov.get("cpu_time_s") or prov["wall_time_s"] * prov.get("threads", 1),
        "replay_losses_within_tol": all(x[2] for x in loss), "replay_acc": acc, "first_losses": loss[:2],
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", default=None, help="append one JSON line per run")
    args = ap.parse_args()
    head = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0)}  # fmt: skip
    for path in args.runs:
        row = {**head, **check(path)}
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
