"""The peer check: the kit beside PFLlib (Zhang et al., 2023) on PFLlib's own client split.

PFLlib pools Fashion-MNIST's 70,000 images (the official train set, then the test set), deals them
to 20 clients by a Dirichlet(0.1) draw over labels and splits each client's images 75 / 25 into
its train and test files.  :func:`split_of` reads those files and finds every image in the
pooled official set (by its pixels and label), so that the split travels with the book as a
list of indices (``data/partitions/pfllib-fmnist-dir.npz``, written by ``tools/pfllib_peer.py``)
and not as PFLlib's data.  The dataset ``fashion-mnist-pfllib`` (:mod:`pflkit.data`) rebuilds it from the Debian
images: each client's train images in PFLlib's order as one user, its test images likewise,
normalised as PFLlib normalises them (to [-1, 1]); the ``natural`` partition with
``val_fraction`` 0 hands every client exactly its PFLlib files.

PFLlib's side of the comparison is its own runs' per-round "Averaged Test Accuracy" (test
accuracy pooled over the clients), read by :func:`pfllib_runs`; :func:`peer_table` sets the kit's
runs beside it on the same metric.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import PflkitError

ROOT = Path(__file__).resolve().parent.parent
RUNS_FILE = ROOT / "results" / "basics" / "pfllib_peer.csv"  # PFLlib's runs (tools/pfllib_peer.py runs)
PEER_LAST = 5  # rounds averaged at the end of a run (the "mean of the last 5 rounds")
PEER_TOLERANCE = 2.0  # points: PFLlib's value within this of the kit's mean over seeds


def _pixels(x: np.ndarray) -> np.ndarray:
    """PFLlib's images (float, normalised to [-1, 1]) back to uint8 pixels."""
    return np.rint((np.asarray(x, dtype=np.float64) * 0.5 + 0.5) * 255).clip(0, 255).astype(np.uint8)


def split_of(folder, pooled_x: np.ndarray, pooled_y: np.ndarray) -> dict[str, np.ndarray]:
    """PFLlib's split in ``folder`` (``train/<i>.npz``, ``test/<i>.npz``) as indices into the pooled
    official images ``pooled_x`` (N x 28 x 28 uint8; train set then test set) with labels
    ``pooled_y``: ``train``/``test`` (indices, client after client, in PFLlib's order) and
    ``train_user``/``test_user`` (the client of each).  Identical images with one label are
    interchangeable; each pooled image is used once."""
    folder = Path(folder)
    n = len(list((folder / "train").glob("*.npz")))
    if n == 0:
        raise PflkitError(f"no PFLlib split in {folder} (expected train/0.npz, ...): run PFLlib's setup first")
    where: dict[bytes, list[int]] = {}
    for i in range(len(pooled_y) - 1, -1, -1):  # popped from the end: the lowest index first
        where.setdefault(pooled_x[i].tobytes() + bytes([int(pooled_y[i])]), []).append(i)
    out: dict[str, list] = {"train": [], "train_user": [], "test": [], "test_user": []}
    for split in ("train", "test"):
        for client in range(n):
            data = np.load(folder / split / f"{client}.npz", allow_pickle=True)["data"].tolist()
            for img, label in zip(_pixels(data["x"]).reshape(len(data["y"]), -1), data["y"]):
                found = where.get(img.tobytes() + bytes([int(label)]))
                if not found:
                    raise PflkitError(f"{folder}/{split}/{client}.npz holds an image that is not in Fashion-MNIST")
                out[split].append(found.pop())
                out[f"{split}_user"].append(client)
    return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


# ----------------------------------------------------------------------------- PFLlib's runs

ALGORITHMS = {  # PFLlib's name -> the kit's method
    "FedAvg": "fedavg", "FedPer": "fedper", "Ditto": "ditto", "pFedMe": "pfedme", "PerAvg": "perfedavg",
    "FedAMP": "fedamp", "Local": "local", "FedProx": "fedprox",
}  # fmt: skip
# the method hyperparameters, set explicitly on both sides: PFLlib's flags, the kit's options (PFLlib's
# command-line defaults are not its benchmark's: pFedMe's -bt 0 would never move the global model)
SETTINGS = {
    "pFedMe": ("-bt 1 -lam 15 -K 5 -lrp 0.01", {"beta": 1.0, "lam": 15.0, "K": 5, "personal_lr": 0.01}),
    "PerAvg": ("", {"alpha": 0.005}),  # PFLlib: α = β = the learning rate (its clientperavg)
    "Ditto": ("-mu 0.1 -pls 1", {"lam": 0.1}),
    "FedProx": ("-mu 0.01", {"mu": 0.01}),
    "FedAMP": ("-alk 1 -lam 1 -sg 1", {"alpha_k": 1.0, "lam": 1.0, "sigma": 1.0}),
}


def pfllib_runs(folder) -> pd.DataFrame:
    """PFLlib's runs logged by ``run.sh`` (``<split>-<ALGO>-<ROUNDS>[-flags].log``) as one row per
    evaluation: algorithm, hyperparameters (its flags), round (0: before training, as PFLlib evaluates),
    accuracy (%).  The accuracy is the pooled test accuracy PFLlib prints every evaluation ("Averaged
    Test Accuracy"; pFedMe's personalised models print "Average Test Accuracy").  Where a round
    evaluates the global models and then the personalised ones (Ditto), the personalised ones count."""
    rows = []
    for f in sorted(Path(folder).glob("dir-*.log")):
        m = re.fullmatch(r"dir-([A-Za-z]+)-(\d+)(?:-(.*))?", f.stem)
        if m is None or m[1] not in ALGORITHMS:
            continue
        found = re.findall(r"Evaluate (\w+) model.*\n(?:.*\n)*?Averaged? Test Accuracy: ([0-9.]+)", f.read_text())
        kinds = {kind for kind, _ in found}
        accs = [float(a) for kind, a in found if kind == ("personalized" if len(kinds) > 1 else kind)]
        words = [w for w in (m[3] or "").split("_") if w]  # run.sh's tag: "-bt 1 -lam 15" -> "_bt_1__lam_15"
        flags = " ".join(f"-{k} {v}" for k, v in zip(words[::2], words[1::2]))
        if len(accs) < int(m[2]) + 1:  # a run still going, or killed: not PFLlib's result
            continue
        rows += [
            {"algorithm": m[1], "hyperparameters": flags, "round": r, "accuracy": 100 * a} for r, a in enumerate(accs)
        ]
    if not rows:
        raise PflkitError(f"no finished PFLlib runs (dir-<ALGO>-<ROUNDS>[-flags].log) in {folder}")
    return pd.DataFrame(rows)


def committed_runs() -> pd.DataFrame:
    """PFLlib's runs as committed with the basics store (:data:`RUNS_FILE`)."""
    if not RUNS_FILE.is_file():
        raise PflkitError(f"{RUNS_FILE} is missing: `python tools/pfllib_peer.py runs SCRATCH` writes it")
    return pd.read_csv(RUNS_FILE, keep_default_na=False)


def last_rounds(values, last: int = PEER_LAST) -> float:
    """The mean of a run's last ``last`` evaluations."""
    values = list(values)
    return float(np.mean(values[-last:]))


def peer_table(pfllib: pd.DataFrame, history: pd.DataFrame, last: int = PEER_LAST,
               tolerance: float = PEER_TOLERANCE) -> pd.DataFrame:  # fmt: skip
    """Per algorithm (``history``'s arms, named as PFLlib names them): PFLlib's pooled test accuracy,
    the mean of its last ``last`` evaluations, beside the kit's (``history``: the kit's per-round
    metrics in %, with ``arm``, ``seed``, ``round``, ``pooled_acc``): the mean over seeds of the same
    mean, its 95 % t-interval, the difference, and whether the two agree (PFLlib within
    ``tolerance`` points of the kit's mean, or inside its interval; None where PFLlib has no run)."""
    from scipy import stats

    rows = []
    for algo, runs in history.groupby("arm", sort=False):
        ours = runs.sort_values("round").groupby("seed").pooled_acc.apply(last_rounds, last=last).to_numpy()
        mean, n = float(ours.mean()), len(ours)
        half = float(stats.t.ppf(0.975, n - 1) * ours.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
        theirs = pfllib[pfllib.algorithm == algo].sort_values("round")
        p = last_rounds(theirs.accuracy, last) if len(theirs) else np.nan
        agree = None if not len(theirs) else bool(abs(p - mean) <= tolerance or abs(p - mean) <= half)
        rows.append({"algorithm": algo, "method": runs.method.iloc[0], "pfllib": p, "kit": mean, "lo": mean - half,
                     "hi": mean + half, "seeds": n, "difference": p - mean, "agree": agree,
                     "hyperparameters": theirs.hyperparameters.iloc[0] if len(theirs) else ""})  # fmt: skip
    return pd.DataFrame(rows)
