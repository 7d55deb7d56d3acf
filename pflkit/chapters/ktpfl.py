"""The KT-pFL chapter's experiment: its probes and measurements (the knowledge coefficients c, whether
the distillation channel acts: each client's self-weight, the distillation-to-private gradient ratio;
the accuracies of each architecture's clients, the clients' label similarity), §5.1's protocol, the
runs of Tables 1 and 2 and the arms of every section, and the paper profile's cost.  The claims drawn
from the runs are :mod:`pflkit.chapters.ktpfl_claims`; what the page says and draws,
:mod:`pflkit.chapters.ktpfl_page`."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..methods import get_method
from ..methods.ktpfl import diagnostics
from ..partitions import total_variation
from ..verdicts import SEED_CAP, seed_plan

SOFT = ("ktpfl", "fedmd", "sim-pfd", "topk-pfd")  # the soft-prediction methods: λ and T apply to them


def c_probe(rnd, row, server, clients):
    """KT-pFL's knowledge-coefficient matrix after the last round (both variants)."""
    if server.cfg.method not in ("ktpfl", "ktpfl-params") or rnd != server.cfg.rounds:
        return None
    return {"c": server.c.tolist()}


def kt_probe(rnd, row, server, clients):
    """The distillation channel at every evaluated round of a soft-prediction method: each client's
    self-weight in its teacher and its distillation-to-private gradient ratio
    (:func:`pflkit.methods.ktpfl.diagnostics`); after KT-pFL's last round, its c."""
    if server.cfg.method not in SOFT:
        return None
    out = diagnostics(server, clients) or {}
    if server.cfg.method == "ktpfl" and rnd == server.cfg.rounds:
        out["c"] = server.c.tolist()
    return out or None


def c_moved(result, arm: str, seed: int) -> float:
    """How far c ended from its start 1/N: the largest |c_mn − 1/N| after the run's last round."""
    c = np.array(result.probes(arm, seed)[result[arm, seed]["config"]["rounds"]]["c"])
    return float(np.abs(c - 1 / len(c)).max())


def by_architecture(result) -> pd.DataFrame:
    """Each run's last-round client test accuracy (%), averaged within each architecture's clients:
    one row per arm, seed and architecture."""
    rows = []
    for (arm, seed), r in result.records.items():
        acc, cfg = r["final"].get("per_client_acc"), r["config"]
        if acc is None:  # a diverged run has no per-client accuracies
            continue
        arch = get_method(cfg["method"]).client_arch
        rows += [dict(arm=arm, seed=seed, architecture=arch(cid, len(acc), cfg["options"]), acc=100 * a)
                 for cid, a in enumerate(acc)]  # fmt: skip
    return pd.DataFrame(rows).groupby(["arm", "seed", "architecture"], sort=False).acc.mean().reset_index()


def label_similarity(fed) -> tuple[np.ndarray, np.ndarray]:
    """The clients' pairwise label similarity, 1 − the total variation between their label mixes,
    and the mixes themselves (clients × classes)."""
    counts = fed.partition.class_counts(fed.ds.y_train.numpy())
    p = counts / counts.sum(1, keepdims=True)
    n = len(p)
    return np.array([[1 - total_variation(p[i], p[j]) for j in range(n)] for i in range(n)]), p


def multiply_adds(model: nn.Module, shape=(1, 28, 28)) -> int:
    """Multiply-adds of one forward pass on one image, over the convolutions and linear layers."""
    total = 0

    def count(m, _, out):
        nonlocal total
        if isinstance(m, nn.Conv2d):
            total += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        elif isinstance(m, nn.Linear):
            total += m.in_features * m.out_features

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in hooks:
        h.remove()
    return total


def round_mb(result, arm: str, n_clients: int) -> pd.DataFrame:
    """Figure 5's ledger of ``arm``, per seed: the MB a client uploads (``up``) and downloads
    (``down``) in a round, from the run's byte counts over its ``n_clients`` clients and the rounds
    it ran (an arm that ran on past the table's budget has more)."""
    f = result.finals()
    f = f[f.arm == arm].set_index("seed")
    per = n_clients * f.rounds
    return pd.DataFrame({"up": f.MB_up / per, "down": f.MB_down / per})


def soft_vs_parameters(soft: pd.DataFrame, params: pd.DataFrame, batch_mb: float) -> dict[str, pd.Series]:
    """Per seed, −log(soft-prediction bytes / parameter bytes) of a client's round (> 0: soft predictions
    move fewer), two ways: as run (the predictions up, the teacher and the public batch's indices
    down) and with the round's public batch sent as images (``batch_mb``) instead of its indices, as
    when the server holds the public set (the teacher is as large as the upload)."""
    both = params.up + params.down
    return {"as run": np.log(both / (soft.up + soft.down)).dropna(),
            "batch sent": np.log(both / (2 * soft.up + batch_mb)).dropna()}  # fmt: skip


# --- the laboratory notes' measurements: the distillation channel, the coefficients -----------------------

W_SELF, G_RATIO = "self-weight in the teacher", "distillation / private gradient"


def channel_frame(results: dict, arms, local: str) -> pd.DataFrame:
    """The distillation channel's probes (:func:`kt_probe`) of ``arms`` in each split's result: one row per
    split, arm, seed and evaluated round, with the mean self-weight (none for ``local``, which has no
    teacher) and the mean distillation-to-private gradient ratio over the clients."""
    rows = []
    for split, res in results.items():
        for a, s in res.records:
            if a not in arms:
                continue
            for rnd, p in res.probes(a, s).items():
                if p and "grad_ratio" in p:
                    w = np.nan if a == local else np.mean(p["self_weight"])
                    rows.append(
                        {
                            "split": split,
                            "arm": a,
                            "seed": s,
                            "round": int(rnd),
                            W_SELF: w,
                            G_RATIO: np.mean(p["grad_ratio"]),
                        }
                    )
    return pd.DataFrame(rows)


def channel_last(diag: pd.DataFrame) -> pd.DataFrame:
    """Per split and arm, the channel at each run's last evaluated round, averaged over seeds."""
    last = diag["round"] == diag.groupby(["split", "arm", "seed"])["round"].transform("max")
    return diag[last].groupby(["split", "arm"])[[W_SELF, G_RATIO]].mean().rename_axis(index=["split", "method"])


def coefficient_rows(c: np.ndarray, sim: np.ndarray) -> dict:
    """One run's learned c against its clients' label similarity: the Spearman correlation of c_mn and the
    similarity over pairs m ≠ n (0 when either is constant: no preference), and the mean self-weight."""
    from scipy.stats import spearmanr

    off = ~np.eye(len(c), dtype=bool)
    r_s = spearmanr(c[off], sim[off])[0] if np.ptp(c[off]) > 0 and np.ptp(sim[off]) > 0 else 0.0
    return {"Spearman(c, label similarity)": r_s, "mean self-weight c_nn": np.diag(c).mean()}


def class_order(mix: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Clients ordered by their two largest classes (``mix``: clients × classes), so that clients with the
    same two classes sit side by side, and each client's label ("3&7") in that order."""
    top2 = np.sort(np.argsort(-mix, axis=1)[:, :2], axis=1)
    order = np.lexsort(top2.T[::-1])
    return order, ["&".join(str(k) for k in top2[i]) for i in order]


def last_c(result, arm: str, seed: int) -> tuple[np.ndarray, int]:
    """KT-pFL's c after a run's last probed round (an arm that ran on: its own last round), and that round."""
    p = result.probes(arm, seed)
    return np.array(p[max(p)]["c"]), max(p)


# --- Table 2 ---------------------------------------------------------------------------------------------

PAPER_TRAIN_SHARE = 0.75  # §5.1: each client's data split 75/25 into training and test
NAME2 = {
    "FedAvg": "Fedavg",
    "Per-FedAvg": "Per-Fedavg",
    "FedAvg + FT": "Fedavg-Local FT",
    "KT-pFL (parameters)": "KT-pFL",
    "KT-pFL": None,
}
"""Our Table 2 arm -> the paper's row (the paper's KT-pFL row is the parameter-exchanging one; the soft one has none)."""


def sampling_rate(n: int) -> float:
    """§5.1: 20 clients all in every round; 100 clients at a sampling rate of 0.1."""
    return 1.0 if n <= 20 else 0.1


# --- Tables 3–6 and Figure 5 -------------------------------------------------------------------------------

ARM_OF = {
    r"local epochs E=(\d+)": "E={:g}",
    r"distillation steps R=(\d+)": "R={:g}",
    r"rho=([\d.]+)": "ρ={:g}",
    r"\|D_r\|=(\d+)": "|D_r|={:g}",
}
"""The paper's setting in Tables 3, 4 and 6 -> the name of our arm at that value."""


def paper_factors(paper: pd.DataFrame) -> dict:
    """The paper's Fashion_MNIST numbers of Tables 3–6, read from its results (``paper``): ``arms`` (our arm's
    name -> the paper's number, Tables 3, 4 and 6), ``E`` (Table 3's local-epochs rows: E -> value), ``rho``
    (Table 4: ρ -> value), ``public`` (Table 6: |D_r| -> value) and ``domain`` (Table 5: MNIST − the
    unlabeled open dataset)."""
    import re

    fm = paper[paper.dataset == "Fashion_MNIST"]
    h = fm[fm.table.isin(["Table 3", "Table 4", "Table 6"])]
    arms = {
        form.format(float(m[1])): value
        for setting, value in zip(h.setting, h.value)
        for pattern, form in ARM_OF.items()
        if (m := re.search(pattern, setting))
    }
    t3 = fm[(fm.table == "Table 3") & fm.setting.str.startswith("local epochs")]
    t4, t6 = fm[fm.table == "Table 4"], fm[fm.table == "Table 6"]
    t5 = fm[fm.table == "Table 5"].set_index("setting").value
    return {
        "arms": arms,
        "E": dict(zip(t3.setting.str.extract(r"E=(\d+)")[0].astype(int), t3.value)),
        "rho": dict(zip(t4.setting.str.extract(r"rho=([\d.]+)")[0].astype(float), t4.value)),
        "public": dict(zip(t6.setting.str.extract(r"=(\d+)")[0].astype(int), t6.value)),
        "domain": t5["public dataset MNIST"] - t5["public dataset Unlabeled Open Dataset"],
    }


PARTS = [
    "soft predictions (up)",
    "teacher (down)",
    "public batch indices (down)",
    "public batch images (down)",
    "parameters (up)",
    "parameters (down)",
]


def per_client_round(result, arm: str, n_clients: int, soft: bool = False) -> pd.Series:
    """An arm's MB per client and round, by part. The ledger counts bytes up and down; a soft-prediction
    method uploads only s(w_n, ξ_r) and downloads its teacher (the same |ξ_r| × C floats) and the indices of
    ξ_r, so the download less the upload is the indices. A parameter-exchanging method sends parameters both
    ways."""
    up, down = round_mb(result, arm, n_clients).mean()
    if soft:
        return pd.Series({"soft predictions (up)": up, "teacher (down)": up, "public batch indices (down)": down - up})
    return pd.Series({"parameters (up)": up, "parameters (down)": down})


def figure5_table(
    hetero, homog, clients: int, n: int, batch_mb: float, kp: str = "KT-pFL (parameters)"
) -> pd.DataFrame:
    """Figure 5's bars, MB per client and round by part (:data:`PARTS`): KT-pFL on Table 1's runs (``hetero``,
    ``clients`` clients), FedAvg, FedAMP and both KT-pFL variants on Table 2's (``homog``, ``n`` clients), and
    the heterogeneous KT-pFL again as if the server sent the round's public images (``batch_mb``) instead of
    their indices."""
    rows = {"KT-pFL (heterogeneous, soft predictions)": per_client_round(hetero, "KT-pFL", clients, soft=True)}
    names = {"KT-pFL": "KT-pFL (homogeneous, soft predictions)", kp: "KT-pFL (homogeneous, parameters)"}
    for a in ("FedAvg", "FedAMP", kp, "KT-pFL"):
        rows[names.get(a, f"{a} (parameters)")] = per_client_round(homog, a, n, soft=a == "KT-pFL")
    sent = rows["KT-pFL (heterogeneous, soft predictions)"].copy()
    sent["public batch indices (down)"], sent["public batch images (down)"] = 0.0, batch_mb  # images, not indices
    rows["KT-pFL (heterogeneous), public batch sent"] = sent
    return pd.DataFrame(rows).T.reindex(columns=PARTS).fillna(0.0)


# --- the runs' configurations ------------------------------------------------------------------------------


@dataclasses.dataclass
class Protocol:
    """§5.1's protocol as the chapter's runs use it: the run's fields (``fields``: clients, images, epochs,
    batch, the first learning rate, momentum...), the splits by name, the architectures of Table 1 and Table
    2's one model, and the options each method gets.  The option dicts are shared with the notebook, whose
    pilots fill them in place: ``kt`` (the soft-prediction methods' options), ``lam`` (λ per soft method once
    piloted, else ``lam_default``), ``kt_params`` (the parameter-exchanging KT-pFL's) and ``tuned`` (a
    baseline's own hyperparameters)."""

    fields: dict
    splits: dict
    archs: str
    homog_model: str
    rounds: int
    evals: int
    pilot_rounds: int
    kt: dict
    lam: dict
    lam_default: float
    kt_params: dict
    feddf: dict
    tuned: dict
    dataset: str = "fashion-mnist"  # the runs' dataset (the `paper` profile loops the headline over three)
    public_source: str = ""  # where its public set comes from: "" held out of its training images, or a dataset

    def on(self, dataset: str, public_source: str = "") -> Protocol:
        """The same protocol on another dataset (and public set); the option dicts stay shared with this one."""
        return dataclasses.replace(self, dataset=dataset, public_source=public_source)

    def options(self, method: str, models: str | None = None) -> dict:
        """The options of ``method``'s runs, on ``models`` (default: Table 1's architectures)."""
        models = self.archs if models is None else models
        if method in SOFT:
            base = {**self.kt, "lam": self.lam.get(method, self.lam_default), "models": models}
        elif method == "ktpfl-params":
            base = dict(self.kt_params)
        elif method in ("feddf", "pfeddf"):  # early stopping joins after the client-rate pilot
            base = {"models": models, **self.feddf}
        else:
            base = {}
        return base | self.tuned.get(method, {})

    def config(self, method: str, split: str = "Non-IID_1", *, rounds: int | None = None, models=None, **fields):
        """A run of §5.1's protocol: every client, every round, the local epochs on private data; evaluated
        about ``evals`` times; ``fields`` replace any field of the run."""
        from ..engine import RunConfig

        rounds = self.rounds if rounds is None else rounds
        base = RunConfig(
            method=method,
            dataset=self.dataset,
            public_source=self.public_source,
            rounds=rounds,
            eval_every=max(1, rounds // self.evals),
            options=self.options(method, models),
            **self.fields,
            **self.splits[split],
        )
        return dataclasses.replace(base, **fields)

    def local(self, split: str = "Non-IID_1", **fields):
        """The Local arm: KT-pFL's clients with λ = 0 (no distillation term: each trains alone on its data).
        Its soft predictions teach nobody, so they are computed on one public image instead of the round's
        batch (the clients' training is the same; only CPU time is saved)."""
        cfg = self.config("ktpfl", split, **fields)
        return dataclasses.replace(cfg, options={**cfg.options, "lam": 0.0, "public_batch": 1})

    def pilot(self, method: str, **fields):
        """A pilot run: its rounds, evaluated once, at the end (a pilot ranks by its last validation score)."""
        return self.config(method, rounds=self.pilot_rounds, eval_every=self.pilot_rounds, **fields)

    def homog(
        self, method: str, n: int | None = None, *, rounds: int | None = None, per_round=1.0, final_only=False, **fields
    ):
        """Table 2's setting: every client on the one model, ``n`` clients, a share ``per_round`` of them each
        round.  pFedHN takes one client per hypernetwork step, with as many client updates in all as the others
        make."""
        n = self.fields["clients"] if n is None else n
        rounds = self.rounds if rounds is None else rounds
        m = self.homog_model
        extra = {"eval_every": rounds} if final_only else {}
        cfg = self.config(method, models=m, model=m, clients=n, sample_rate=per_round, rounds=rounds, **extra, **fields)
        if method == "pfedhn":
            steps = int(rounds * n * per_round)
            every = steps if final_only else max(1, steps // self.evals)
            cfg = dataclasses.replace(cfg, sample_rate=1 / n, rounds=steps, eval_every=every)
        return cfg


# --- the arms' names and the paper's rows ------------------------------------------------------------------

LOCAL = "Local (λ = 0)"
STEPS_CTL = "Per-FedAvg, twice the local epochs"  # Table 2's step-count control at the larger client counts
NO_SERVER = "FedDF, no server distillation"  # FedDF's control: FedAvg within each architecture (server_steps = 0)
TOPK_A = "TopK-pFD (the authors' rule)"  # TopK as the authors' code runs it: above the median similarity, uniform


def paper_row(paper: pd.DataFrame, setting: str) -> dict:
    """The paper's numbers of one setting of a table (``paper``: its rows of that table), method -> value."""
    d = paper[paper.setting.str.startswith(setting)]
    return dict(zip(d.method, d.value))


# --- the pilots' and the coefficients' measurements ----------------------------------------------------------


def pilots_c_moved(pilots, seeds) -> pd.DataFrame:
    """How far c moved from 1/N in every arm of the η₃-and-ρ pilots (``pilots``: their tuning results), per
    pilot seed."""
    arms = [(t, a) for t in pilots for g in t.grids.values() for a in g]
    return pd.DataFrame(
        {"max |c − 1/N| after the pilot": [c_moved(t.result, a, s) for t, a in arms for s in seeds]},
        index=pd.Index([f"{a} (seed {s})" for _, a in arms for s in seeds], name="pilot arm"),
    )


def rounds_of_updates(results: dict) -> pd.DataFrame:
    """Table 2's histories at every client count (``results``: n -> SweepResult), with a ``clients`` column;
    pFedHN takes one client per step, so its steps are counted in rounds of as many client updates as the
    others make."""
    frames = []
    for n, res in results.items():
        h = res.history()
        per_round = {(a, s): max(1, round(n * sampling_rate(n))) if r["config"]["method"] == "pfedhn" else 1
                     for (a, s), r in res.records.items()}  # fmt: skip
        h["round"] = h["round"] / [per_round[a, s] for a, s in zip(h.arm, h.seed)]
        frames.append(h.assign(clients=n))
    return pd.concat(frames, ignore_index=True)


def table1_arms(p: Protocol, split: str, lr: dict, soft_lr: float, topk_authors: bool = True) -> dict:
    """Table 1's arms on a split, each at its chosen rate (``lr``: method -> rate): the six methods, Local
    (λ = 0) at the soft methods' rate ``soft_lr``, FedDF without its server distillation and, on Non-IID_1 with
    ``topk_authors``, TopK as the authors' code runs it."""
    from ..methods import display_name

    arms = {display_name(m): p.config(m, split, lr=lr[m]) for m in lr}
    arms[LOCAL] = p.local(split, lr=soft_lr)  # the λ = 0 control, at the soft methods' rate
    arms[NO_SERVER] = p.config("feddf", split, lr=lr["feddf"], options={**p.options("feddf"), "server_steps": 0})
    if topk_authors and split == "Non-IID_1":
        arms[TOPK_A] = p.config("topk-pfd", split, lr=soft_lr, options={**p.options("topk-pfd"), "topk_rule": "median"})
    return arms


def fallback_notes(split: str, fallbacks: dict) -> list[str]:
    """One line per divergence fallback of a split's sweep (``fallbacks``: arm -> note; a group's arms share
    their note, which names them itself)."""
    out = []
    for note in dict.fromkeys(fallbacks.values()):
        names = [a for a, n in fallbacks.items() if n == note]
        out.append(f"{split}, {names[0]}: {note}" if len(names) == 1 else f"{split}: {note}")
    return out


# --- the headline on each dataset (the `paper` profile runs Tables 1 and 2 on the paper's three) ------------

PAPER_NAMES = {"fashion-mnist": "Fashion_MNIST", "emnist-balanced": "EMNIST", "cifar10": "CIFAR-10"}
"""The kit's dataset -> its name in the paper's tables (``data/paper_results/ktpfl.csv``)."""
KIT_NAMES = {"fashion-mnist": "Fashion-MNIST", "emnist-balanced": "EMNIST Balanced", "cifar10": "CIFAR-10",
             "mnist": "MNIST", "cifar100": "CIFAR-100"}  # fmt: skip


def on_label(dataset: str, first: str) -> str:
    """The prefix of a dataset's claims and fallbacks: "" on the ``first`` dataset (the book's, whose labels stay
    as they were), else the paper's name of the dataset and ", "."""
    return "" if dataset == first else f"{PAPER_NAMES.get(dataset, dataset)}, "


def paper_rows(paper: pd.DataFrame, table: str, dataset: str) -> pd.DataFrame:
    """The paper's rows of ``table`` ("Table 1", "Table 2") on the kit's ``dataset``."""
    return paper[(paper.table == table) & (paper.dataset == PAPER_NAMES.get(dataset, dataset))]


def table1_runs(
    p: Protocol, lr: dict, soft_lr: float, pilots: dict, store, seeds, *, run_cap: int, extend_cap: int,
    topk_authors: bool = True, label: str = "",
) -> dict:  # fmt: skip
    """Table 1's runs on every split of ``p``'s dataset: each split's seed-plan pilot on ``seeds``, then each
    arm to the seeds its claims' plan asks (at most ``run_cap``); a rate that diverges in these runs falls
    back, every seed, to its pilot's best smaller rate (``pilots``: arm -> (pilot result, its arm)), for the
    whole group that shares it; the headline's two arms (KT-pFL and the strongest other method on validation)
    run on while still improving, at most ``extend_cap`` × their rounds, and to
    :data:`~pflkit.verdicts.HEADLINE_SEEDS` seeds at least (within ``run_cap``).  Returns, per split, ``runs`` (each
    headline arm at its stopping point), ``first`` (at the first budget), ``best``, ``pairs``, ``plan`` and
    ``budget``, and the ``fallbacks``' lines (prefixed with ``label``)."""
    from ..experiments import HEADLINE_SEEDS, RESOLUTION, arm_seeds, sweep_stable, until_flat

    def table1(split, arm_seeds_):
        arms = table1_arms(p, split, lr, soft_lr, topk_authors)
        together = [SOFT_GROUP, ("FedDF", NO_SERVER)]  # Local shares the soft methods' rate, FedDF's control FedDF's
        return sweep_stable(arms, arm_seeds_, store, pilots, together=together, probe=channel_probes(arms))

    out = {k: {} for k in ("runs", "first", "best", "pairs", "plan", "budget")} | {"fallbacks": []}
    for split in p.splits:
        res, _ = table1(split, seeds)  # the seed plan's pilot
        best = res.select([a for a in res.arms if a not in ("KT-pFL", LOCAL, NO_SERVER, TOPK_A)], by="val_mean_acc")
        pairs = table1_pairs(best)
        plan = seed_plan(
            {k: list(res.paired(a, b)) for k, (a, b) in pairs.items()}, cap=SEED_CAP, resolution=RESOLUTION
        )
        floor = {"KT-pFL − strongest other": HEADLINE_SEEDS}  # the headline: five seeds at least
        per_arm = arm_seeds(plan, pairs, seeds, arms=res.arms, cap=SEED_CAP, least=floor)
        first, fallbacks = table1(split, {a: s[:run_cap] for a, s in per_arm.items()})
        out["fallbacks"] += fallback_notes(label + split, fallbacks)
        out["runs"][split], out["budget"][split] = until_flat(
            first, None, store, only=["KT-pFL", best], cap=extend_cap, probe=channel_probes(first.arms)
        )
        out["first"][split], out["best"][split], out["pairs"][split], out["plan"][split] = first, best, pairs, plan
    return out


def paper_margin(paper_n: pd.Series, n: int) -> str:
    """The paper's KT-pFL margin over its strongest other method at ``n`` clients (``paper_n``: method -> value),
    with its numbers (:class:`~pflkit.verdicts.PaperMargin`)."""
    from ..results import PaperMargin

    if "KT-pFL" not in paper_n:
        return "— (the paper has no run at this client count)"
    best = paper_n.drop("KT-pFL").idxmax()
    a, b = paper_n["KT-pFL"], paper_n[best]
    return PaperMargin(f"{a - b:+.2f} vs {best} ({n} clients)", datasets=["Fashion_MNIST"], values=[(a, b)], vs=best)


T2_HEADLINE = "the headline"  # Table 2's headline claim in each count's seed plan (``plan_name``)


def table2_runs(
    p: Protocol, methods: list[str], counts: list[int], lr: dict, pilots: dict, store, seeds, *, extend_cap: int,
    kp: str = "KT-pFL (parameters)", label: str = "", pub: pd.DataFrame | None = None, resolution: float | None = None,
) -> dict:  # fmt: skip
    """Table 2's runs on ``p``'s dataset at each client count of ``counts`` (a share :func:`sampling_rate` of
    them a round), each method at its rate ``lr`` with Table 1's divergence fallback (``pilots``), on ``seeds``;
    then the headline's arms (``kp`` and the strongest other method on validation) on the seeds of its plan
    (:func:`~pflkit.verdicts.seed_plan`, sized on the paper's margin at that count, ``pub``: the paper's
    Table 2 rows, carried to the rival's accuracy; never on our mean); at the first count they run on while
    still improving, at most ``extend_cap`` × their budget.  Returns ``runs`` (count -> result), ``first`` (the
    first count's at the first budget), ``best`` (of the first count), ``budget``, ``plans`` (count -> the
    headline's plan, row :data:`T2_HEADLINE`) and the ``fallbacks``' lines (prefixed with ``label``)."""
    from ..experiments import arm_seeds, sweep_stable, until_flat
    from ..methods import display_name

    runs, lines, plans = {}, [], {}
    for n in counts:  # pFedHN: one client per hypernetwork step, the same client updates in all
        arms = {display_name(m): p.homog(m, n, per_round=sampling_rate(n), lr=lr[m]) for m in methods}
        runs[n], fallbacks = sweep_stable(arms, seeds, store, pilots, probe=c_probe)
        best = runs[n].select([a for a in runs[n].arms if a not in ("KT-pFL", kp)], by="val_mean_acc")
        pub_n = None if pub is None else pub[pub.setting.str.startswith(f"{n} clients")].set_index("method").value
        margin = None if pub_n is None else paper_margin(pub_n, n)
        if hasattr(margin, "carried"):  # a headline with the paper's margin: its arms run to its plan
            carried = margin.carried(float(runs[n].values(best).mean()))
            plans[n] = seed_plan({T2_HEADLINE: list(runs[n].paired(kp, best))}, cap=SEED_CAP, pool=False,
                                 resolution=resolution, headlines={T2_HEADLINE: carried})  # fmt: skip
            planned = arm_seeds(plans[n], {T2_HEADLINE: [kp, best]}, list(seeds), arms=arms, cap=SEED_CAP)
            runs[n], fallbacks = sweep_stable(arms, planned, store, pilots, probe=c_probe)
        lines += [f"{label}{n} clients, {a}: {note}" for a, note in fallbacks.items()]
    first = runs[counts[0]]
    best = first.select([a for a in first.arms if a not in ("KT-pFL", kp)], by="val_mean_acc")
    runs[counts[0]], budget = until_flat(first, None, store, only=[kp, best], cap=extend_cap, probe=c_probe)
    return {"runs": runs, "first": first, "best": best, "budget": budget, "fallbacks": lines, "plans": plans}


def dry_fields(profile: str) -> dict:
    """Run fields of the `paper` profile's dry run only (:func:`pflkit.profiles.dry`), none elsewhere: its fixture
    datasets hold a few images a class (EMNIST Balanced: 8 of each of 47), too few for the kit's 10 % validation
    split to leave a client one image of a class at 20 clients, and Table 1 cannot choose its strongest method
    without validation images; there half of a client's images of a class are held out for validation."""
    from ..profiles import dry

    return {"val_fraction": 0.5} if profile == "paper" and dry() else {}


# --- the notebook's plumbing: pilots' arms, sweeps' arms, sentences, glued values -----------------------------

KT_ARMS = ("KT-pFL", "FedMD", LOCAL)  # the channel's probe runs in these: the mechanism checks' arms
# the arms that share one rate: the soft-prediction methods (they differ in c alone) and Local, their λ = 0 control
SOFT_GROUP = ("KT-pFL", "FedMD", "Sim-pFD", "TopK-pFD", TOPK_A, LOCAL)
FEDDF_METHODS = ("feddf", "pfeddf")  # FedDF and pFedDF: one server rate for both, early stopping on


def steps_control(p: Protocol, counts, lr: float, store, seeds) -> dict:
    """Table 2's control at the larger client counts ``counts``: Per-FedAvg at its rate ``lr`` with twice the local
    epochs (arm :data:`STEPS_CTL`), so that every client makes as many model updates a round as FedAvg (a
    Per-FedAvg step takes two minibatches), on twice FedAvg's samples.  Returns count -> its runs on ``seeds``."""
    from ..experiments import sweep

    return {n: sweep({STEPS_CTL: p.homog("perfedavg", n, per_round=sampling_rate(n), lr=lr,
                                         local_epochs=2 * p.fields["local_epochs"])}, seeds, store) for n in counts}  # fmt: skip


def homog_label(method: str) -> str:
    """A Table 2 method's arm in the learning-rate pilot (its homogeneous setting)."""
    from ..methods import display_name

    return f"{display_name(method)} (homogeneous)"


def lr_pilot_arms(p: Protocol, table1: list[str], table2: list[str]) -> dict:
    """The learning-rate pilot's arms: Table 1's methods but the soft-prediction ones (piloted together),
    Local, and Table 2's methods but pFedHN (the authors' client rate) on the one model, each run
    ``p.pilot_rounds`` rounds and evaluated at the end."""
    from ..methods import display_name

    configs = {display_name(m): p.pilot(m) for m in table1 if m not in SOFT}
    configs[LOCAL] = p.local(rounds=p.pilot_rounds, eval_every=p.pilot_rounds)
    return configs | {
        homog_label(m): p.homog(m, rounds=p.pilot_rounds, final_only=True) for m in table2 if m != "pfedhn"
    }


def chosen(result, label: str, keys) -> dict:
    """The options ``keys`` that a pilot ``result`` chose for its arm ``label``."""
    return {k: result.config(label).options[k] for k in keys}


def baseline_pilot_arms(p: Protocol, grids: dict, lr: dict, lr_homog: dict, table1: list[str]) -> dict:
    """Each baseline's own hyperparameter grid (``grids``: method -> {option: values}) at its chosen rate: a
    Table 1 method on its models, the others on Table 2's model; method -> (label, the grid's arms)."""
    from ..experiments import grid
    from ..methods import display_name

    out = {}
    for m, axes in grids.items():
        label = f"{display_name(m)} ({', '.join(axes)})"
        cfg = (
            p.pilot(m, lr=lr[m]) if m in table1 else p.homog(m, rounds=p.pilot_rounds, final_only=True, lr=lr_homog[m])
        )
        out[m] = (label, grid(label, cfg, options=axes))  # options: Per-FedAvg's alpha is no Dirichlet α
    return out


def feddf_pilot_arms(p: Protocol, lr: dict, patience: int) -> dict:
    """FedDF's and pFedDF's server-rate pilot: each at its chosen client rate, early stopping after ``patience``."""
    from ..methods import display_name

    return {
        display_name(m): p.pilot(m, lr=lr[m], options={**p.options(m), "server_patience": patience})
        for m in FEDDF_METHODS
    }


def channel_probes(arms) -> dict:
    """Each arm's probe: the channel's (:func:`kt_probe`) in :data:`KT_ARMS`, c's (:func:`c_probe`) elsewhere."""
    return {a: kt_probe if a in KT_ARMS else c_probe for a in arms}


def table1_pairs(best: str) -> dict:
    """Table 1's paired comparisons on a split, name -> (arm, arm); ``best``: the strongest other method."""
    return {
        "KT-pFL − strongest other": ("KT-pFL", best),
        "KT-pFL − FedMD": ("KT-pFL", "FedMD"),
        "KT-pFL − Sim-pFD": ("KT-pFL", "Sim-pFD"),
        "KT-pFL − Local": ("KT-pFL", LOCAL),
    }


def seed_fed(p: Protocol, split: str, seed: int):
    """The federation of KT-pFL's runs on ``split`` with ``seed`` (its clients' data)."""
    from ..engine import Federation

    return Federation.from_config(dataclasses.replace(p.config("ktpfl", split), seed=seed))


def images_per_client(train_images: int | None, public_images: int, n: int, total: int) -> float:
    """The training images a client holds: the pool (``train_images``, or all ``total`` when None) less the
    public set, over ``n`` clients, less the validation share."""
    from ..engine import RunConfig

    return ((train_images or total) - public_images) / n * (1 - RunConfig().val_fraction)


def factor_arms(base, *, e, r, rho, public, foreign: str) -> tuple[dict, str, str]:
    """Tables 3–6's arms, one factor at a time around ``base``: local epochs ``e``, distillation epochs ``r``,
    ``rho``, the public batch ``public``, then the held-out public set (``base`` itself) and the ``foreign``
    one; returns the arms, the own set's arm and the foreign one's."""

    def opt(**o):
        return dataclasses.replace(base, options={**base.options, **o})

    arms = {f"E={x}": dataclasses.replace(base, local_epochs=x) for x in e}
    arms |= {f"R={x}": opt(distill_epochs=x) for x in r}
    arms |= {f"ρ={x:g}": opt(rho=x) for x in rho}
    arms |= {f"|D_r|={x}": opt(public_batch=x) for x in public}
    own, other = "public: Fashion-MNIST held out", f"public: {foreign}"
    # the held-out set (where ``base`` takes another one, as the `paper` profile's MNIST, the run that differs from it)
    arms[own] = dataclasses.replace(base, public_source="")  # at `book`: the defaults, read back from the store
    arms[other] = dataclasses.replace(base, public_source=foreign)
    return arms, own, other


def foreign_images(source: str, public_images: int) -> int:
    """How many images the ``source`` public set lends Table 5's arm: all of it, at most ``public_images``."""
    from ..engine import dataset

    foreign = dataset(source)
    return min(public_images, len(foreign.y_train) + len(foreign.y_test))


# --- the paper profile's cost ----------------------------------------------------------------------------------


TRAIN_SIZES = {"fashion-mnist": 60_000, "mnist": 60_000, "emnist-balanced": 112_800, "cifar10": 50_000}
"""The official training sets' sizes (the `paper` profile trains on all of them)."""


def client_steps(p: dict, dataset: str, clients: int, epochs: int | None = None, public: int | None = None) -> int:
    """A client's optimiser steps in one round at the parameters ``p``: its private batches (the training set
    less the public set, over ``clients``, less validation) times the local epochs, plus, where ``public`` (its
    public batch, images) is given, the distillation epochs' batches of it."""
    from ..engine import RunConfig

    images = (TRAIN_SIZES[dataset] - p["PUBLIC_IMAGES"]) / clients * (1 - RunConfig().val_fraction)
    steps = math.ceil(images / p["BATCH"]) * (p["LOCAL_EPOCHS"] if epochs is None else epochs)
    return steps + (p["DISTILL_EPOCHS"] * math.ceil(public / p["PUBLIC_BATCH"]) if public else 0)


def headline_cost(p: dict, dataset: str) -> dict:
    """Tables 1 and 2 on ``dataset`` at the parameters ``p``: runs and optimiser steps, every arm at its seed cap
    (Table 1: ``T1_RUN``; Table 2: ``SEEDS``) and each table's two headline arms at ``EXTEND_CAP`` × ``ROUNDS``."""
    n, rounds, more = p["CLIENTS"], p["ROUNDS"], p["EXTEND_CAP"] - 1
    soft, plain = client_steps(p, dataset, n, public=p["PUBLIC_PER_ROUND"]), client_steps(p, dataset, n)
    n_soft = sum(m in SOFT for m in p["TABLE1_METHODS"])
    runs = steps = 0
    for split in ("Non-IID_1", "Non-IID_2"):  # the six methods, Local, FedDF's control and (Non-IID_1) TopK's
        topk = int(p["TOPK_AUTHORS"] and split == "Non-IID_1")
        arms = len(p["TABLE1_METHODS"]) + 2 + topk
        runs += arms * p["T1_RUN"]
        per_round = (n_soft + topk) * soft + (arms - n_soft - topk) * plain + 2 * more * soft  # headline: KT-pFL's
        steps += per_round * n * rounds * p["T1_RUN"]
    for c in p["TABLE2_CLIENT_COUNTS"]:  # every client on one model; the soft KT-pFL distils too
        k = round(c * sampling_rate(c))
        soft2, plain2 = client_steps(p, dataset, c, public=p["PUBLIC_PER_ROUND"]), client_steps(p, dataset, c)
        methods = p["TABLE2_METHODS"]
        per_round = (
            (len(methods) - 1) * plain2 + soft2 + (2 * more * plain2 if c == p["TABLE2_CLIENT_COUNTS"][0] else 0)
        )
        runs += len(methods) * len(p["SEEDS"])
        steps += per_round * k * rounds * len(p["SEEDS"])
    return {"runs": runs, "steps": steps}


def notes_cost(p: dict, dataset: str) -> dict:
    """The pilots (at their grids, ``PILOT_ROUNDS`` rounds, ``PILOT_SEEDS``) and Tables 3–6 (``SWEEP_ROUNDS``
    rounds, ``SEEDS``) on the first ``dataset``: runs and optimiser steps."""
    n, public = p["CLIENTS"], p["PUBLIC_PER_ROUND"]
    soft, plain = client_steps(p, dataset, n, public=public), client_steps(p, dataset, n)
    lr, n_soft = len(p["LR_GRID"]), sum(m in SOFT for m in p["TABLE1_METHODS"])
    plain_arms = (len(p["TABLE1_METHODS"]) - n_soft) + 1 + sum(m != "pfedhn" for m in p["TABLE2_METHODS"])  # + Local
    pilots = [  # (arms, per-client steps a round): the rate, the soft rate, λ, η₃ × ρ (both), baselines', FedDF's
        (plain_arms * lr, plain), (n_soft * lr, soft), (n_soft * len(p["LAMBDA_GRID"]), soft),
        (len(p["C_LR_GRID"]) * len(p["C_RHO_GRID"]), soft), (len(p["PARAMS_C_LR_GRID"]) * len(p["PARAMS_RHO_GRID"]), plain),
        (sum(math.prod(map(len, axes.values())) for axes in p["BASELINE_GRIDS"].values()), plain),
        (2 * len(p["FEDDF_LR_GRID"]), plain),
    ]  # fmt: skip
    seeds = len(p["PILOT_SEEDS"])
    runs = sum(a for a, _ in pilots) * seeds
    steps = sum(a * s for a, s in pilots) * n * p["PILOT_ROUNDS"] * seeds
    factors = [client_steps(p, dataset, n, epochs=e, public=public) for e in p["E_CHOICES"]]
    factors += [soft + (r - p["DISTILL_EPOCHS"]) * math.ceil(public / p["PUBLIC_BATCH"]) for r in p["R_CHOICES"]]
    factors += [soft] * len(p["RHO_CHOICES"]) + [client_steps(p, dataset, n, public=x) for x in p["PUBLIC_CHOICES"]]
    factors += [soft, soft]  # the held-out public set and the other domain's
    runs += len(factors) * len(p["SEEDS"])
    steps += sum(factors) * n * p["SWEEP_ROUNDS"] * len(p["SEEDS"])
    return {"runs": runs, "steps": steps}


def paper_cost(p: dict) -> dict:
    """The `paper` profile's runs and optimiser steps (client batches, private and public) from the parameters
    cell's values ``p`` (:func:`pflkit.paper.parameters`): Tables 1 and 2 on each dataset of ``PUBLIC_SETS``
    (:func:`headline_cost`), the pilots and Tables 3–6 on the first (:func:`notes_cost`); an upper bound."""
    datasets = list(p["PUBLIC_SETS"])
    per = {d: headline_cost(p, d) for d in datasets}
    notes = notes_cost(p, datasets[0])
    return {
        "runs": sum(c["runs"] for c in per.values()) + notes["runs"],
        "steps": sum(c["steps"] for c in per.values()) + notes["steps"],
        "datasets": datasets,
        "clients": {"Table 1": p["CLIENTS"], "Table 2": list(p["TABLE2_CLIENT_COUNTS"])},
        "rounds": p["ROUNDS"],
        "seeds": {"Table 1": p["T1_RUN"], "Table 2": len(p["SEEDS"]), "pilots": len(p["PILOT_SEEDS"])},
        "per_dataset": per,
        "notes": notes,
        "note": "Tables 1 and 2 on each dataset, every arm at its seed cap and each table's headline pair at its "
        "longest budget; the pilots at their grids and Tables 3–6 on the first dataset; a step is one batch of a "
        "client's private data or of its public batch (FedDF's server distillation not counted)",
    }
