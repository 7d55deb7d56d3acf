"""Channels-last against contiguous models, per model family, in one run: the measurement behind
``pflkit.compute.CHANNELS_LAST``.

For every model family the book trains (Fashion-MNIST-sized input, 1 × 28 × 28), it times SGD
training steps (forward, cross-entropy, backward, step; momentum 0.9) with one torch thread at
the book's batch sizes, in both memory formats, alternating short blocks of the two so that a
change in the machine's speed during the run falls on both alike, and writes the ratio of their
median step times (contiguous / channels-last: above 1, channels-last is faster) to
``benchmarks/results/memory_format.jsonl``.

    python benchmarks/memory_format.py [--blocks 7] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from pflkit.compute import family, set_memory_format
from pflkit.engine import cpu_model
from pflkit.models import build_model

OUT = Path(__file__).resolve().parent / "results" / "memory_format.jsonl"
MODELS = ("lenet", "fedavg-cnn", "mlp", "alexnet-16", "resnet18-4", "shufflenet_v2_x0_5")
BATCHES = (10, 50, 64)


def block(model, opt, x, y, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return (time.perf_counter() - t0) / steps


def measure(name: str, batch: int, blocks: int, steps: int) -> dict:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, 1, 28, 28, generator=gen)
    y = torch.randint(0, 10, (batch,), generator=gen)
    arms = {}
    for fmt in ("contiguous", "channels_last"):
        set_memory_format(fmt)
        torch.manual_seed(0)
        model = build_model(name, (1, 28, 28), 10)
        arms[fmt] = (model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    set_memory_format(None)
    times = {fmt: [] for fmt in arms}
    for model, opt in arms.values():  # warm-up
        block(model, opt, x, y, 3)
    for _ in range(blocks):
        for fmt, (model, opt) in arms.items():
            times[fmt].append(block(model, opt, x, y, steps))
    med = {fmt: float(np.median(t)) for fmt, t in times.items()}
    return {"model": name, "family": family(name), "batch": batch, "contiguous_ms": 1e3 * med["contiguous"],
            "channels_last_ms": 1e3 * med["channels_last"], "ratio": med["contiguous"] / med["channels_last"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    stamp = {"cpu": cpu_model(), "torch": torch.__version__, "threads": 1, "date": time.strftime("%Y-%m-%d")}
    print(f"{'model':<20} {'batch':>5} {'contiguous ms':>14} {'channels-last ms':>17} {'ratio':>6}")
    with open(OUT, "a") as fh:
        for name in args.models.split(","):
            for batch in BATCHES:
                row = measure(name, batch, args.blocks, args.steps)
                fh.write(json.dumps(row | stamp) + "\n")
                print(f"{name:<20} {batch:>5} {row['contiguous_ms']:>14.2f} {row['channels_last_ms']:>17.2f} "
                      f"{row['ratio']:>6.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
