"""Engine overhead: FedAvg, LeNet, Fashion-MNIST, 20 clients x 1 local epoch per round.

Prints the ratio of the engine's per-round training time (local training of every client,
messages, aggregation; evaluation excluded) to the time one model takes to train on the same
number of samples with the same batch size and optimizer, measured in the same run.
Target: ratio <= 1.25.

    python benchmarks/throughput.py [--rounds 3] [--device auto]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from pflkit.engine import Federation, RunConfig, run
from pflkit.models import build_model


def plain_epoch(fed: Federation, cfg: RunConfig, seed: int) -> float:
    """One model, one pass over all clients' training samples, no federation."""
    torch.manual_seed(seed)
    model = build_model(cfg.model, fed.ds.input_shape, fed.ds.n_classes).to(fed.device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    idx = torch.cat([c.train_idx for c in fed.clients])
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    perm = idx[torch.randperm(len(idx), generator=gen).to(idx.device)]
    for s in range(0, len(perm), cfg.batch_size):
        b = perm[s : s + cfg.batch_size]
        loss = F.cross_entropy(model(fed.x_train[b]), fed.y_train[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    if fed.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    cfg = RunConfig(
        method="fedavg", dataset="fashion-mnist", partition="pathological", clients=20, rounds=args.rounds,
        local_epochs=1, eval_every=10**9, device=args.device,
    )  # fmt: skip
    fed = Federation.from_config(cfg)
    n = sum(c.n_train for c in fed.clients)
    plain = [plain_epoch(fed, cfg, seed) for seed in range(2)]
    res = run(cfg, fed)
    plain.append(plain_epoch(fed, cfg, 2))
    per_round = res["timing"]["train_s"] / args.rounds
    base = min(plain)
    print(f"device {res['provenance']['device']}, threads {torch.get_num_threads()}, {n} samples per round")
    print(f"plain training of one model on {n} samples: {base:.2f} s ({n / base:.0f} samples/s)")
    print(f"engine, FedAvg 20 clients x 1 epoch: {per_round:.2f} s per round ({n / per_round:.0f} samples/s)")
    print(f"ratio engine / plain = {per_round / base:.3f} (target <= 1.25)")


if __name__ == "__main__":
    main()
