"""Published numbers (``data/paper_results``) and tidy frames of our runs, for the chapters."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pandas as pd

DATA = Path(__file__).resolve().parent.parent / "data"


def method_key(name: str) -> str:
    """A method's name as the published tables and our arms both spell it: "Per-FedAvg", "per fedavg" -> "perfedavg"
    ("FedAvg+" keeps its "+": another method than FedAvg)."""
    return re.sub(r"[\s\-_]", "", name.lower())


class PaperMargin(str):
    """The paper's margin for a claim's *own* comparison, as the claims tables print it (the string)
    and as numbers: ``margins``, a − b in the claim's unit per dataset the paper reports (``datasets``);
    ``values``, the paper's two accuracies (%) per dataset, (a, b), when the margin is a difference of
    accuracies, so that it can be carried to our scale as a relative reduction of error; ``strongest``,
    the paper's margin against its strongest comparator in that table and column where that is another
    comparator ("+2.7 vs Sim-pFD").  Given ``values``, the margins are their differences."""

    margins: tuple
    datasets: tuple
    values: tuple
    strongest: str
    vs: str

    def __new__(cls, text: str, margins=None, *, datasets=(), values=(), strongest: str = "", vs: str = ""):
        self = super().__new__(cls, text)
        self.values = tuple(tuple(map(float, v)) for v in values)
        self.margins = tuple(float(x) for x in margins) if margins is not None else tuple(a - b for a, b in self.values)
        self.datasets, self.strongest, self.vs = tuple(datasets), strongest, vs
        if self.values and len(self.values) != len(self.margins):
            raise ValueError("one (a, b) pair of accuracies per margin")
        return self

    def prefixed(self, prefix: str) -> PaperMargin:
        """The same margin, its text after ``prefix`` ("FeSEM(3) − FedAvg: ")."""
        return PaperMargin(prefix + self, self.margins, datasets=self.datasets, values=self.values,
                           strongest=self.strongest, vs=self.vs)  # fmt: skip

    def carried(self, ours_b: float | None) -> tuple[float, ...]:
        """The margins carried to our scale: the paper's relative reduction of error,
        (err_b − err_a) / err_b, applied to our comparator's error ``100 − ours_b`` (an assumption the
        glossary states: the effect scales with the error there is to remove).  Margins that are not
        differences of accuracies, or with no comparator of ours, are carried as printed."""
        if not self.values or ours_b is None or ours_b != ours_b:
            return self.margins
        return tuple((a - b) / (100 - b) * (100 - ours_b) if b < 100 else 0.0 for a, b in self.values)

    def tie(self, m: float) -> bool:
        """A "beats" claim whose paper margins are all smaller than ``m`` on the paper's own scale."""
        return bool(self.margins) and max(abs(x) for x in self.margins) < m


def paper_results(name: str) -> pd.DataFrame:
    """One transcribed table file, e.g. ``paper_results("pfllib_fmnist")`` (values in %)."""
    return pd.read_csv(DATA / "paper_results" / f"{name}.csv")


SOURCES = {
    "pfllib": "PFLlib",
    "pfedhn": "pFedHN",
    "pfedmb": "pFedMB",
    "fesem": "FeSEM",
    "fedmn": "FedMN",
    "ktpfl": "KT-pFL",
}
ALIASES = {"clusteredfl": "cfl", "fedavg+": "fedavg+ft", "fedavglocalft": "fedavg+ft"}  # the tables' names -> ours
# one global model for every client: a table that puts it above Local evaluates it fine-tuned (pFedMB §V-A) or on
# another split; against Local it is no evidence of a broken baseline, against FedAvg it is
GLOBAL_MODELS = ("fedprox", "fedsgd", "feddf", "fedgen")
TABLES = ("pfllib_fmnist", "pfedhn", "pfedmb", "fesem", "fedmn", "ktpfl")


@cache  # read once a process: every claim asks (callers read it, never change it)
def reported_above(refs=("Local", "FedAvg")) -> dict[str, dict[str, list[str]]]:
    """Per baseline (its key, :func:`method_key`), the published tables that report it
    above each reference of ``refs`` in one column (a dataset and setting of one table): {"pfedme":
    {"FedAvg": ["PFLlib", "pFedHN Table 1"], "Local": ["pFedHN Table 1"]}}.  The papers' own methods
    are not baselines and are left out; a global model (:data:`GLOBAL_MODELS`) is held against FedAvg only."""
    frames = [paper_results(t) for t in TABLES]
    df = pd.concat(frames, ignore_index=True)
    df = df[df.metric == "accuracy"]
    df = df.assign(key=[ALIASES.get(k, k) for k in df.method.map(method_key)])
    own = tuple(SOURCES)[1:]
    out: dict[str, dict[str, list[str]]] = {}
    for (paper, table, _, _), col in df.groupby(["paper", "table", "dataset", "setting"], dropna=False, sort=False):
        values = dict(zip(col.key, col.value))
        source = SOURCES.get(paper, paper) + ("" if paper == "pfllib" else f" {table}")
        for ref in refs:
            if method_key(ref) not in values:
                continue
            for key, value in values.items():
                if key in map(method_key, refs) or key.startswith(own) or value <= values[method_key(ref)]:
                    continue
                if ref == "Local" and key in GLOBAL_MODELS:
                    continue
                found = out.setdefault(key, {}).setdefault(ref, [])
                if source not in found:
                    found.append(source)
    return out


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


def paper_margin(published, method: str, *, exclude=()) -> tuple[float, str]:
    """The paper's own margin for ``method`` in one table and setting: its number minus that of the
    strongest comparator the paper reports there (``published``: method -> value, every row of that
    table and setting; ``exclude``: the method's own variants, which are not its comparators).
    Returns the margin (points) and the comparator's name."""
    values = dict(published.items()) if hasattr(published, "items") else dict(published)
    if method not in values:
        raise KeyError(f"the paper reports no {method!r} here")
    rivals = {m: v for m, v in values.items() if m != method and m not in exclude and v == v}
    if not rivals:
        raise KeyError(f"the paper reports no comparator of {method!r} here")
    best = max(rivals, key=rivals.get)
    return values[method] - rivals[best], best


def margin_text(published, method: str, *, exclude=(), dataset: str = "") -> PaperMargin:
    """:func:`paper_margin` as the claims tables say it, "+2.3 vs pFedMe (CIFAR-10)", with its numbers
    (:class:`~pflkit.verdicts.PaperMargin`: the two accuracies carry it to our scale)."""
    from decimal import ROUND_HALF_UP, Decimal

    margin, rival = paper_margin(published, method, exclude=exclude)
    values = dict(published.items()) if hasattr(published, "items") else dict(published)
    # the published numbers have two decimals: their difference is exact there, rounded half up as printed
    tenth = Decimal(f"{margin:.6f}").quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    text = f"{tenth:+.1f} vs {rival}" + (f" ({dataset})" if dataset else "")
    return PaperMargin(text, datasets=[dataset], values=[(values[method], values[rival])], vs=rival)


def pair_margin(published, a: str, b: str, *, dataset: str = "", strongest: str = "", digits: int = 1) -> PaperMargin:
    """The paper's margin ``a − b`` in one table and column (``published``: method -> accuracy, %), as
    the claims tables print it ("+7.5 vs FedMD (FMNIST)"), with its numbers; ``strongest``: the margin
    against the paper's strongest comparator there, where the claim compares with another method."""
    values = dict(published.items()) if hasattr(published, "items") else dict(published)
    va, vb = float(values[a]), float(values[b])
    text = f"{va - vb:+.{digits}f} vs {b}" + (f" ({dataset})" if dataset else "")
    text += f"; strongest comparator: {strongest}" if strongest else ""
    return PaperMargin(text, datasets=[dataset], values=[(va, vb)], vs=b, strongest=strongest)


def absent_rival(published, method: str, arms, *, variants=("pFedHN", "pFedHN-PC")) -> str:
    """A note for a claim whose paper margin is against a comparator we did not run: "" when the
    paper's strongest comparator of ``method`` is among our ``arms``."""
    _, rival = paper_margin(published, method, exclude=variants)
    return "" if rival in set(arms) else f"the paper's strongest comparator, {rival}, is not among our arms here"
