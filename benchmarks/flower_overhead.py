"""Per-round time of the in-process engine against Flower's simulation runtime, same workload,
measured in one run (a ratio; absolute times differ between machines).

FedAvg, LeNet, Fashion-MNIST, ``--clients`` clients, one local epoch each round, evaluation only
at the end.  The time compared is the round loop's training time (``timing.train_s``: messages,
local training, aggregation), so Flower's one-off Ray start is left out and reported apart.

    python benchmarks/flower_overhead.py [--clients 10] [--rounds 5] [--out benchmarks/results/flower_overhead.jsonl]
"""

from __future__ import annotations

import argparse
import datetime
import json
import time

import torch

from pflkit.engine import RunConfig, run
from pflkit.flower import run_flower


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None, help="append the result as one JSON line")
    args = ap.parse_args()
    cfg = RunConfig(
        method="fedavg", dataset="fashion-mnist", partition="pathological", clients=args.clients, rounds=args.rounds,
        local_epochs=1, train_images=12000, test_images=2000, eval_every=10**9, device="cpu",
    )  # fmt: skip
    local = run(cfg)
    t0 = time.perf_counter()
    flwr = run_flower(cfg)
    flwr_wall = time.perf_counter() - t0
    same = [h["train_loss"] for h in local["history"]] == [h["train_loss"] for h in flwr["history"]]
    row = {
        "time": datetime.datetime.now().isoformat(timespec="seconds"), "threads": torch.get_num_threads(),
        "clients": args.clients, "rounds": args.rounds,
        "inprocess_s_per_round": local["timing"]["train_s"] / args.rounds,
        "flower_s_per_round": flwr["timing"]["train_s"] / args.rounds,
        "ratio": flwr["timing"]["train_s"] / local["timing"]["train_s"],
        "flower_start_and_stop_s": flwr_wall - flwr["provenance"]["wall_time_s"],
        "same_losses": same,
    }  # fmt: skip
    print(json.dumps(row))
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
