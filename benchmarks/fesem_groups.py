"""Sanity check: FeSEM on the grouped Fashion-MNIST federation, against FedAvg.

20 clients in 4 latent groups (identity, rot90, invert, thicken; :mod:`pflkit.grouped`) with
Dirichlet(0.5) label mixes, LeNet, a few short rounds.  Prints FeSEM(K = 4)'s adjusted Rand
index to the true groups after every round, and the accuracies (macro = mean over clients,
micro = pooled) of FeSEM(K = 4), FeSEM(K = 1) (the same head start from the initial local
models, one centre) and FedAvg.

    python benchmarks/fesem_groups.py [--rounds 4] [--local-steps 20] [--device cpu]
"""

from __future__ import annotations

import argparse
import time

from sklearn.metrics import adjusted_rand_score

from pflkit.data import load_dataset
from pflkit.engine import Federation, RunConfig, pick_device, run
from pflkit.grouped import grouped_federation


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--local-steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()

    g = grouped_federation(load_dataset("fashion-mnist"), args.clients, seed=args.seed, alpha=0.5)
    fed = Federation(g.ds, g.partition, pick_device(args.device))
    base = dict(dataset="fashion-mnist", partition="groups", clients=args.clients, rounds=args.rounds,
                seed=args.seed, local_steps=args.local_steps, device=args.device)  # fmt: skip
    # FeSEM(K = 1) has FeSEM's head start (the initial local models' steps) but one centre
    runs = (("fesem", {"centers": len(g.transforms)}), ("fesem", {"centers": 1}), ("fedavg", {}))
    for method, options in runs:
        t0 = time.perf_counter()
        ari = []

        def score(rnd, row, server, clients, ari=ari):
            if hasattr(server, "assignment") and len(server.centers) > 1:
                ari.append(round(adjusted_rand_score(g.groups, server.assignment), 3))

        res = run(RunConfig(method=method, options=options, **base), fed, on_round=score)
        accs = [round(h["mean_acc"], 3) for h in res["history"]]
        f = res["final"]
        name = f"{method}(K={options['centers']})" if options else method
        print(f"{name:11s} macro acc per round {accs}  final macro {f['mean_acc']:.3f} micro {f['pooled_acc']:.3f}"
              + (f"  ARI per round {ari}" if ari else "") + f"  ({time.perf_counter() - t0:.0f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
