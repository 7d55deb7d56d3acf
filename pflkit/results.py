"""Published numbers (``data/paper_results``) and tidy frames of our runs, for the chapters."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

DATA = Path(__file__).resolve().parent.parent / "data"


def paper_results(name: str) -> pd.DataFrame:
    """One transcribed table file, e.g. ``paper_results("pfllib_fmnist")`` (values in %)."""
    return pd.read_csv(DATA / "paper_results" / f"{name}.csv")


def history_frame(runs: dict[str, dict], **labels) -> pd.DataFrame:
    """Per-round metrics of several runs (``{label: result}``) as one long frame."""
    frames = []
    for name, res in runs.items():
        df = pd.DataFrame(res["history"])
        df["method"] = name
        for k, v in labels.items():
            df[k] = v
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def summary_frame(runs: dict[str, dict], **labels) -> pd.DataFrame:
    """One row per run: last-round and best-by-validation accuracies (in %), bytes, time."""
    rows = []
    for name, res in runs.items():
        f, b, c = res["final"], res["best_by_val"], res["comm"]
        rows.append(
            {
                "method": name,
                **labels,
                "mean_acc": 100 * f["mean_acc"],
                "pooled_acc": 100 * f["pooled_acc"],
                "best_val_round": b["round"],
                "mean_acc@best_val": 100 * b["mean_acc"],
                "MB_up": c["bytes_up"] / 1e6,
                "MB_down": c["bytes_down"] / 1e6,
                "wall_s": res["provenance"]["wall_time_s"],
            }
        )
    return pd.DataFrame(rows)
