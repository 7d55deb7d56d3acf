"""The peer check's PFLlib side: its client split into the kit, its runs into the basics store.

    python tools/pfllib_peer.py split SCRATCH   # PFLlib's Dirichlet-0.1 split -> data/partitions/pfllib-fmnist-dir.npz
    python tools/pfllib_peer.py runs SCRATCH    # PFLlib's runs -> results/basics/pfllib_peer.csv

SCRATCH is a folder laid out by ``../shared/pfllib/setup.sh SCRATCH`` (PFLlib's source, commit d832e76,
and its Fashion-MNIST splits); its runs are those of ``../shared/pfllib/run.sh SCRATCH dir ALGO ROUNDS
[flags]`` (in ``SCRATCH/runs/``).  PFLlib is not a dependency of the book: what this writes is
committed, and the basics chapter reads it beside the kit's runs of the same split and budget
(``pflkit.peer``).  Exit status 2 on bad input, with one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pflkit.data import SPLIT_FILE, pooled_fashion_mnist  # noqa: E402
from pflkit.errors import PflkitError  # noqa: E402
from pflkit.peer import RUNS_FILE, pfllib_runs, split_of  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("split", "runs"))
    ap.add_argument("scratch", type=Path, help="the folder setup.sh laid PFLlib out in")
    args = ap.parse_args(argv)
    try:
        if args.what == "split":
            x, y = pooled_fashion_mnist()
            split = split_of(args.scratch / "pfllib" / "dataset" / "FashionMNIST-dir", x[:, 0].numpy(), y.numpy())
            SPLIT_FILE.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(SPLIT_FILE, **split)
            print(f"{SPLIT_FILE.relative_to(ROOT)}: {len(split['train'])} train and {len(split['test'])} test "
                  f"images of {len(set(split['train_user'].tolist()))} clients")  # fmt: skip
        else:
            runs = pfllib_runs(args.scratch / "runs")
            runs.to_csv(RUNS_FILE, index=False, float_format="%.4f")
            print(f"{RUNS_FILE.relative_to(ROOT)}: {runs.algorithm.nunique()} algorithms, {len(runs)} evaluations")
    except PflkitError as err:
        print(f"pfllib_peer: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
