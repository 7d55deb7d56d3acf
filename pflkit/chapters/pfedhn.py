"""The pFedHN chapter's probes and measurements: what each client scores with the models generated
for the others (the swap test of Figure 3), how novel clients fare (Figures 2 and 7), where the
client embeddings go (Figure 4), how far the generated models differ between clients, and the
tables and per-seed differences of Tables 1 and 2 and the ablations."""

from __future__ import annotations

import dataclasses
import math
from functools import partial

import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown
from sklearn.metrics import silhouette_score
from sklearn.neighbors import KNeighborsClassifier

from ..engine import Federation, build
from ..federated import evaluate
from ..methods import get_method
from ..methods.pfedhn import swap_accuracy, train_novel_embedding
from ..pages import claims_tally as tally  # noqa: F401  (the sentence under the claims table)
from ..pages import folded, with_worst
from ..partitions import total_variation
from ..plots import arm_palette, claims_plot  # importing it shows a notebook's figures with their text size
from ..results import absent_rival, margin_text
from ..sweeps import worst_clients
from ..tuning import with_tuned
from ..verdicts import (
    PaperMargin,
    arm_seeds,
    arms_budget,
    claim,
    claim_row,
    fmt_interval,
    interval,
    mechanism,
    paper_vs_ours,
    rising,
    saturation,
    say,
    seed_plan,
    verdict,
    weak_arms,
)  # fmt: skip

# ----------------------------------------------------------------------------- probes


def mix_probe(rnd, row, server, clients):
    """Figure 3, after the last round of pFedHN-PC on at most 10 clients: client i's accuracy with
    its personal classifier ω_i and the feature extractor θ_j generated for client j."""
    if server.cfg.method != "pfedhn-pc" or rnd != server.cfg.rounds or len(clients) > 10:
        return None
    classes = [sorted(set(c.data.split("train")[1].tolist())) for c in clients]
    return {"mix": swap_accuracy(server, clients), "classes": classes}


def swap_probe(rnd, row, server, clients):
    """After the last round of a hypernetwork arm: client i's test accuracy with the model generated
    for client j (pFedHN-PC: θ_j's feature extractor under client i's own classifier ω_i)."""
    if not server.cfg.method.startswith("pfedhn") or rnd != server.cfg.rounds:
        return None
    return {"mix": swap_accuracy(server, clients)}


def size_swap_probe(rnd, row, server, clients):
    """After the hypernetwork's last round: Figure 3's swap matrix inside each size group (the
    hypernetwork's ``widths``, each client's size by the server's public rule), over the clients that have
    test data (all of them but on a few images a class: the dry run)."""
    if not server.cfg.method.startswith("pfedhn") or rnd != server.cfg.rounds:
        return None
    tested = [c for c in clients if getattr(c, "data", None) is None or len(c.data.test_idx)]
    return {w: swap_accuracy(server, [c for c in tested if server.group(c.cid) == w]) for w in server.widths}


@dataclasses.dataclass(frozen=True)
class NovelProbe:
    """After the last round: each novel client's label-distribution distance to the nearest training
    client, its test accuracy (pFedHN: with its random embedding, then after learning v_new through the
    protocol, ``exchanges`` exchanges at learning rate ``embed_lr``), and the training clients' mean
    accuracy.  ``n_classes``: the dataset's number of classes (the label histograms' length)."""

    exchanges: int
    embed_lr: float
    n_classes: int

    @property
    def probe_name(self) -> str:
        """The stored identity: the probe's output depends on the exchanges and the learning rate, so a
        run probed with other values is recomputed."""
        return f"novel_probe(exchanges={self.exchanges}, embed_lr={self.embed_lr})"

    def __call__(self, rnd, row, server, clients):
        cfg = server.cfg
        if rnd != cfg.rounds:
            return None
        novel_ids = list(range(cfg.clients - cfg.novel_clients, cfg.clients))
        counts = np.stack(
            [np.bincount(c.data.split("train")[1].cpu().numpy(), minlength=self.n_classes) for c in clients]
        )
        dist = counts / counts.sum(1, keepdims=True).clip(min=1)
        train_ids = [i for i in range(cfg.clients) if i not in novel_ids]
        alphas = [cfg.novel_alpha[j * len(cfg.novel_alpha) // cfg.novel_clients] for j in range(cfg.novel_clients)]

        def test_acc(i):
            x, y_ = clients[i].data.split("test")
            return evaluate(clients[i].eval_model(server.eval_message(i)), x, y_)["correct"] / len(y_)

        out = []
        for i, a in zip(novel_ids, alphas):
            if not len(clients[i].data.test_idx):  # no test data (a few images a class: the dry run)
                continue
            r = {"client": i, "alpha": a, "TV to nearest": min(total_variation(dist[i], dist[j]) for j in train_ids)}
            if cfg.method == "pfedhn":
                r["acc_novel (random v)"] = test_acc(i)
                train_novel_embedding(server, clients[i], steps=self.exchanges, lr=self.embed_lr)
            r["acc_novel"] = test_acc(i)
            out.append(r)
        return {"acc_train": row["mean_acc"], "novel": out}


def embedding_probe(rnd, row, server, clients):
    """The client embeddings after setup and after the last round (and each client's classes)."""
    if rnd not in (0, server.cfg.rounds):
        return None
    out = {"embeddings": server.hn.embeddings.weight.detach().cpu().tolist()}
    if rnd == 0:
        out["classes"] = [sorted(set(c.data.split("train")[1].tolist())) for c in clients]
    return out


# ----------------------------------------------------------------------------- measurements


def own_minus_other(mix) -> float:
    """Mean own-model accuracy minus mean accuracy with another client's generated model (points),
    from a swap matrix (:func:`~pflkit.methods.pfedhn.swap_accuracy`)."""
    m = np.array(mix)
    return 100 * (np.diag(m).mean() - m[~np.eye(len(m), dtype=bool)].mean())


def purity(E, labels) -> float:
    """1-NN purity: the share of points whose nearest *other* point (rows of ``E``) has the same label."""
    nearest = KNeighborsClassifier(n_neighbors=2).fit(E, labels).kneighbors(E, 2, return_distance=False)[:, 1]
    return float((labels[nearest] == labels).mean())


def embedding_scores(res, coarse_of_class, rounds: int) -> pd.DataFrame:
    """Per arm and seed, from :func:`embedding_probe`: how far the embeddings moved by round ``rounds``
    (median, % of their norm), and how well they group by the coarse group of each client's first
    class (``coarse_of_class``: 1-NN purity, silhouette) before and after training."""
    rows = []
    for arm, s in res.records:
        p = res.probes(arm, s)
        groups = np.array([coarse_of_class[cl[0]] for cl in p[0]["classes"]])
        E0, E1 = np.array(p[0]["embeddings"]), np.array(p[rounds]["embeddings"])
        moved = np.linalg.norm(E1 - E0, axis=1) / np.linalg.norm(E0, axis=1)
        rows.append({"arm": arm, "seed": s, "median movement (%)": 100 * np.median(moved),
                     "purity before (%)": 100 * purity(E0, groups), "purity after (%)": 100 * purity(E1, groups),
                     "silhouette before": silhouette_score(E0, groups), "silhouette after": silhouette_score(E1, groups)})  # fmt: skip
    return pd.DataFrame(rows)


def purity_gains(res, coarse_of_class, rounds: int) -> dict[str, pd.Series]:
    """Per arm: the per-seed 1-NN purity gain of the embeddings (points, after − before training)."""
    d = embedding_scores(res, coarse_of_class, rounds).set_index("seed")
    return {a: (g["purity after (%)"] - g["purity before (%)"]) for a, g in d.groupby("arm")}


def client_spread(cfg) -> dict[str, float]:
    """At initialisation (nothing trained), per tensor the hypernetwork generates: the mean distance of
    the clients' θ_i from their mean θ."""
    _, _, server, _ = build(cfg, Federation.from_config(cfg))
    with torch.no_grad():
        thetas = [server.theta(i) for i in range(cfg.clients)]
    spread = {}
    for k in thetas[0]:
        per_client = torch.stack([t[k].flatten() for t in thetas])
        spread[k] = (per_client - per_client.mean(0)).norm(dim=1).mean().item()
    return spread


def with_budget(res, arms) -> pd.DataFrame:
    """Histories with both budgets: client updates (all methods) and server steps (rounds: one
    aggregation, for pFedHN one hypernetwork step, per round); ``arms``: the sweep's configs."""
    h = res.history()
    per_round = {a: max(1, round(c.sample_rate * c.clients)) for a, c in arms.items()}
    return h.assign(**{"client updates": h["round"] * h["arm"].map(per_round), "server steps": h["round"]})


# ----------------------------------------------------------------------------- the datasets

DATA_LABELS = {"fashion-mnist": "FMNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}  # the page's names
PAPER_DATASETS = {"cifar10": "CIFAR10", "cifar100": "CIFAR100"}  # the kit's name -> the transcribed tables'


def data_label(name: str) -> str:
    """A dataset of the kit as the page names it (e.g. ``cifar100`` -> CIFAR-100)."""
    return DATA_LABELS.get(name, name)


def paper_dataset(name: str) -> str:
    """The paper's column set beside ours for the kit's dataset ``name``: the same dataset where the
    paper reports it, else CIFAR-10 (for orientation: Fashion-MNIST at `book`)."""
    return PAPER_DATASETS.get(name, "CIFAR10")


def paper_label(name: str) -> str:
    """The paper's column for the kit's dataset ``name``, as the page names it (CIFAR-10, CIFAR-100)."""
    return data_label({v: k for k, v in PAPER_DATASETS.items()}[paper_dataset(name)])


def data_fields(name: str, classes_per_client: dict) -> dict:
    """The run-config fields of Table 1's split on the dataset ``name``: the dataset and its classes a
    client (§5.1: two for CIFAR-10, ten for CIFAR-100)."""
    return {"dataset": name, "classes_per_client": classes_per_client[name]}


def data_heading(name: str, datasets) -> list[str]:
    """The heading of a table's dataset where the page shows several (``datasets``), else none."""
    return [f"**{data_label(name)}**"] if len(datasets) > 1 else []


def where(name: str, datasets) -> str:
    """The dataset in a claim's text: nothing for the first of ``datasets`` (the book's claims keep
    their words), ", CIFAR-100" for another."""
    return "" if name == datasets[0] else f", {data_label(name)}"


# ----------------------------------------------------------------------------- Table 1


def paper_t1(paper, n: int, dataset: str = "CIFAR10") -> dict[str, float]:
    """The paper's Table 1 on ``dataset`` (as transcribed: CIFAR10, CIFAR100) at ``n`` clients:
    method → accuracy (%)."""
    d = paper[(paper.table == "Table 1") & (paper.dataset == dataset) & (paper.setting == f"{n} clients")]
    return dict(zip(d.method, d.value))


def milder_text(res, published: dict[str, float], label: str = "CIFAR-10") -> str:
    """How far the headroom split ``res`` is from the paper's personalisation problem on ``label``: FedAvg's
    global model against Local, ours (mean over seeds) and the paper's (``published``: method → accuracy)."""
    arms = ("FedAvg", "Local")
    if not set(arms) <= set(res.arms) or not set(arms) <= set(published):
        return ""
    fa, lo = (interval(res.values(a))[0] for a in arms)
    milder = "a much milder" if (published["Local"] - published["FedAvg"]) - (lo - fa) > 10 else "a comparable"
    return (f"Our headroom split is {milder} personalisation problem than the paper's {label}: FedAvg's global model "
            f"scores {fa:.1f} % against Local's {lo:.1f} % (the paper: {published['FedAvg']:.1f} against "
            f"{published['Local']:.1f}), so a personalised method has less to gain here.")  # fmt: skip


def table1_rows(res, published, label: str = "CIFAR-10") -> pd.DataFrame:
    """The paper's metric (mean over clients, last round) beside the authors' code's (pooled over
    clients, at the round of best validation accuracy); ``published``: the paper's numbers by arm, on
    its dataset ``label``."""
    ours = paper_vs_ours(res, published, label=f"paper {label}")
    code = paper_vs_ours(res, {}, metric="pooled_acc@best_val")["ours pooled_acc@best_val"]
    return ours.join(code.rename("ours pooled, best-by-val (authors' code)"))


def t1_best(res) -> str:
    """The strongest baseline of a Table 1 column, on validation."""
    return res.select([a for a in res.arms if not a.startswith("pFedHN")], by="val_mean_acc")


def t1_text(n, hn, best, where: str = "") -> str:
    """The claim that hypernetwork ``hn`` beats the strongest baseline ``best`` at ``n`` clients
    (``where``: the dataset, :func:`where`)."""
    return f"Table 1{where}, {n} clients: {hn} beats the strongest baseline ({best}, on validation)"


def t1_seed_plan(pilot: dict, seeds: list[int], cap: int, resolution: float, where: str = ""):
    """Table 1's seed plan and what each column runs to under it.  ``pilot``: clients -> the pilot's
    sweep.  The plan pools the spread of every column's two claims (each hypernetwork against the
    column's strongest baseline on the pilot's validation); each claim's two arms then run to their
    claim's plan, every other arm to the pilot's seeds.  Returns the plan and clients -> arm -> seeds."""
    best = {n: t1_best(res) for n, res in pilot.items()}
    claims = {n: {t1_text(n, hn, best[n], where): (hn, best[n]) for hn in ("pFedHN", "pFedHN-PC")} for n in pilot}
    plan = seed_plan({c: list(pilot[n].paired(*arms)) for n in pilot for c, arms in claims[n].items()},
                     cap=cap, resolution=resolution)  # fmt: skip
    return plan, {n: arm_seeds(plan, claims[n], seeds, arms=res.arms, cap=cap) for n, res in pilot.items()}


def headroom_claims(res, arms, baselines, shared):
    """Per-seed differences of the headroom split's claims: each hypernetwork against the strongest
    baseline (chosen on validation among ``baselines``), pFedHN against its shared-embedding control
    (the arm ``shared``), own minus another client's model (:func:`swap_probe` at the last round of
    ``arms``' configs).  Returns the strongest baseline and the differences."""
    best = res.select(baselines, by="val_mean_acc")
    swap = {hn: pd.Series({s: own_minus_other(res.probes(hn, s)[arms[hn].rounds]["mix"]) for s in res.seeds}) for hn in ("pFedHN", "pFedHN-PC")}  # fmt: skip
    return best, {
        "pFedHN − strongest baseline": res.paired("pFedHN", best),
        "pFedHN-PC − strongest baseline": res.paired("pFedHN-PC", best),
        "pFedHN − shared embedding": res.paired("pFedHN", shared),
        "pFedHN: own − another client's model": swap["pFedHN"],
        "pFedHN-PC: own − another client's feature extractor": swap["pFedHN-PC"],
    }


# ----------------------------------------------------------------------------- Table 2
# ``hn``: the hypernetwork's arm; ``baselines``: the baselines' names (their arms are "name (size)");
# ``widths``: the sizes; ``groups``: each client's size in the hypernetwork's run.


def hn_size_acc(res, seed, w, *, hn, groups, worst: bool = False) -> float:
    """The hypernetwork's mean test accuracy (%) over the clients of size group ``w`` (``worst``: over the
    worst 10 % of them, :func:`pflkit.sweeps.worst_clients`)."""
    rec = res[hn, seed]
    acc, groups = np.array(rec["final"]["per_client_acc"]), np.asarray(groups)
    if len(acc) != len(groups):  # a client without test data has no accuracy (a few images a class: the dry run)
        groups = groups[tested_clients(rec)]
    return worst_clients(acc[groups == w]) if worst else 100 * acc[groups == w].mean()


def tested_clients(rec: dict) -> np.ndarray:
    """Which clients of a stored run have test data (its federation rebuilt from its config)."""
    from ..federation import config_of

    fed = Federation.from_config(dataclasses.replace(config_of(rec), device="cpu"))
    return np.array([len(c.test_idx) > 0 for c in fed.clients])


def table2_table(res, *, hn, baselines, widths, groups, published, data="FMNIST", label="CIFAR-10") -> pd.DataFrame:
    """Our Table 2 (mean ± 95 % interval over seeds; in brackets the worst 10 % of the size's clients, mean
    over seeds) on ``data`` beside the paper's numbers on ``label`` (``published``: the paper's Table 2 rows,
    settings ending in "size S" etc.)."""
    acc = {w: [hn_size_acc(res, s, w, hn=hn, groups=groups) for s in res.seeds] for w in widths}
    worst = {w: np.array([hn_size_acc(res, s, w, hn=hn, groups=groups, worst=True) for s in res.seeds]) for w in widths}
    rows = {"pFedHN": {w: with_worst(fmt_interval(acc[w]), worst[w]) for w in widths}}
    rows |= {b: {w: with_worst(fmt_interval(res.values(f"{b} ({w})")), res.values(f"{b} ({w})", "worst10_acc").to_numpy())
                 for w in widths} for b in baselines}  # fmt: skip
    table = pd.DataFrame(rows).T.rename(columns=lambda w: f"ours {data} {w}")
    for w in widths:
        d = published[published.setting.str.endswith(f"size {w}")]
        table[f"paper {label} {w}"] = table.index.map(dict(zip(d.method, d.value)))
    return table


def table2_diffs(res, where="", *, hn, baselines, widths, groups):
    """Per size: the strongest baseline (chosen on validation) and the per-seed differences of the
    hypernetwork − it, keyed by the claim's text (``where``: the split, in the text)."""
    best = {w: res.select([f"{b} ({w})" for b in baselines], by="val_mean_acc") for w in widths}
    return best, {f"Table 2{where}, size {w}: one HN beats the strongest per-size baseline ({best[w]}, on validation)":
                  [hn_size_acc(res, s, w, hn=hn, groups=groups) - res.values(best[w])[s] for s in res.seeds] for w in widths}  # fmt: skip


def table2_claims(res, best, diffs, plan, *, hn, baselines, widths, published, resolution, label="CIFAR-10", **row):
    """The claims rows of one Table 2 (``row``: options of claim_row) and a line per size for the page;
    ``resolution``: the verdicts' resolution (points).  The paper's margin is over its strongest
    comparator at that size among every method it reports (:func:`pflkit.results.margin_text`), on
    its dataset ``label``."""
    rows, lines = [], []
    for (text, d), w in zip(diffs.items(), widths):
        v = verdict(d, budget=res.budget(hn, best[w]), resolution=resolution)
        pub = published[published.setting.str.endswith(f"size {w}")].set_index("method")["value"]
        absent = absent_rival(pub, "pFedHN", baselines, variants=())
        r = claim_row(text, v, paper=margin_text(pub, "pFedHN", dataset=label), plan=plan, note=absent,
                      rising=rising(res, hn, best[w]) if v.budget else "", arms=arms_budget(res, hn, best[w]),
                      ours_b=interval(res.values(best[w]))[0],
                      weak=weak_arms(res, [f"{b} ({w})" for b in baselines]), **row)  # fmt: skip
        rows.append(r)
        lines.append(f"* Size {w}: pFedHN − {best[w]}: {say(r)}.")
    return rows, lines


def size_swaps(res, hn, rounds: int) -> list[float]:
    """Per seed: own minus another client's generated model of the same size (points), mean over the
    sizes, from :func:`size_swap_probe` at round ``rounds`` of the arm ``hn``."""
    return [np.mean([own_minus_other(m) for m in res.probes(hn, s)[rounds].values()]) for s in res.seeds]


# ----------------------------------------------------------------------------- Figures 2 and 7


def novel_rows(res, arms) -> pd.DataFrame:
    """One row per novel client and seed (:class:`NovelProbe` at the last round of ``arms``' configs):
    its α, TV distance, accuracies, and its gap to the training clients."""
    rows = [{"method": arm, "seed": s, "acc_train": p["acc_train"], **r}
            for (arm, s) in res.records for p in [res.probes(arm, s)[arms[arm].rounds]] for r in p["novel"]]  # fmt: skip
    return pd.DataFrame(rows).assign(gap=lambda d: d["acc_novel"] - d["acc_train"])


def novel_diffs(res, arms, gap_claim: str, corr_claim: str) -> dict[str, pd.Series]:
    """Per seed: pFedHN's gap minus Per-FedAvg's (points, averaged over α; keyed ``gap_claim``), and
    −r between a novel client's accuracy and its TV distance (pFedHN; keyed ``corr_claim``)."""
    d = novel_rows(res, arms)
    per_seed = d.groupby(["seed", "method", "alpha"])["gap"].mean().unstack("method")
    hn_ = d[d.method == "pFedHN"]
    corr_ = hn_.groupby("seed").apply(lambda g: np.corrcoef(g["TV to nearest"], g["acc_novel"])[0, 1])
    return {gap_claim: 100 * (per_seed["pFedHN"] - per_seed["Per-FedAvg"]).groupby("seed").mean(), corr_claim: -corr_}


# ----------------------------------------------------------------------------- Figures 5 and 6


def diffs56(res, k_arms, k1, embed, depth) -> dict[str, pd.Series]:
    """Per-seed differences of the three ablation claims: the best of ``k_arms`` other than ``k1``
    (on validation) − ``k1``, the two embedding sizes ``embed`` (a, b), the two depths ``depth`` (a, b)."""
    best_k = res.select([a for a in k_arms if a != k1], by="val_mean_acc")
    return {"Figure 5": res.paired(best_k, k1), "Figure 6a": res.paired(*embed), "Figure 6b": res.paired(*depth)}


# ----------------------------------------------------------------------------- the page

DATA = "FMNIST"  # our dataset in the page's headers: the notebook sets its first dataset's (:func:`data_label`)
HEADERS = {  # a table's raw column names -> what the page prints ("ours mean_acc": with DATA, see page_table)
    "arm": "method",
    "paper CIFAR-10": "paper, CIFAR-10 (%)",
    "paper CIFAR-100": "paper, CIFAR-100 (%)",
    "ours pooled, best-by-val (authors' code)": "ours, the authors' metric (%)",
    "ours pooled_acc@best_val": "ours, the authors' metric (%)",
    "val_mean_acc": "validation accuracy, last round (%)",
}


def page_table(table: pd.DataFrame, columns=None, digits: int = 1, small: bool = False, data: str | None = None):
    """A table as the page shows it: the index turned into columns, human headers (:data:`HEADERS`; our
    accuracy as "ours, ``data`` (%)", default :data:`DATA`), numbers rounded to ``digits``, "—" for a
    missing value, no index column (a pandas Styler); ``columns``: the raw names to keep (default every
    column); ``small``: in the glance tables' type, for a wide table in a fold."""
    d = table.copy() if isinstance(table.index, pd.RangeIndex) else table.reset_index()
    d = d.rename(columns={"index": " "})  # an unnamed index keeps its values, under a blank header
    if columns is not None:
        d = d[[c for c in d.columns if c in columns or c in table.index.names]]
    d = d.apply(lambda col: col.map(lambda v: f"{v:.{digits}f}" if isinstance(v, float) and v == v else v))
    headers = HEADERS | {"ours mean_acc": f"ours, {data or DATA} (%)"}
    d = d.astype(object).where(d.notna(), "—").rename(columns=headers)
    return styled(d, small)


def styled(table: pd.DataFrame, small: bool = False):
    """``table`` as a Styler the book's pages style like pandas' own tables (class ``dataframe``,
    cells padded), without the index column; ``small``: in the glance tables' type (0.75rem)."""
    props = "padding: 0.1rem 0.5rem; white-space: normal;" + (" font-size: 0.75rem;" if small else "")
    cells = {"selector": "td, th", "props": props}
    return table.style.hide(axis="index").set_table_attributes('class="dataframe"').set_table_styles([cells])


def setup_rows(p: dict) -> list[tuple[str, str, str]]:
    """The setup card's rows (what, ours, the paper's) from the chapter's parameters ``p`` (the
    notebook's upper-case names, with HR_CLASSES and HR_IMAGES, the headroom split the pilot chose)."""

    def images(n):
        return "all" if n is None else f"{n:,}"

    t1_train = images(p["T1_IMAGES"][0])
    datasets = p.get("DATASETS", ["fashion-mnist"])
    names = " and ".join({"fashion-mnist": "Fashion-MNIST"}.get(d, data_label(d)) for d in datasets)
    per_client = p.get("CLASSES_PER_CLIENT", {"fashion-mnist": 2})
    classes = ", ".join(f"{per_client[d]} classes a client" + (f" ({data_label(d)})" if len(datasets) > 1 else "")
                        for d in datasets)  # fmt: skip
    return [
        ("Data", f"{names}: {t1_train} training images for Tables 1 and 4, {images(p['TRAIN_IMAGES'])} "
                 "(stratified) elsewhere; each client tested on official test images of its class mix",
         "CIFAR-10, CIFAR-100, Omniglot"),
        ("Split", f"{classes}, shares U(.4, .6); the headroom split: "
                  f"{p['HR_CLASSES']} classes and {p['HR_IMAGES']} images a client; Dir(0.1) for novel clients",
         "2 classes a client (CIFAR-10), 10 (CIFAR-100); Dir(α) for novel clients"),
        ("Clients", f"Table 1: {', '.join(map(str, p['CLIENT_COUNTS']))}; Table 2: {p['BUDGET_CLIENTS']} in three "
                    f"sizes; Figure 2: {p['NOVEL_TRAIN']} + {p['N_NOVEL']} novel", "10, 50, 100; 75; 90 + 10 novel"),
        ("Model", "LeNet target; hypernetwork: embedding of ⌊1 + n/4⌋, 3 hidden layers of 100, a head per tensor",
         "the same"),
        ("Training", f"Algorithm 1, one client per hypernetwork step; Table 1: {p['CLIENT_UPDATES']} client updates of "
                     f"{p['T1_LOCAL_STEPS']} local steps, baselines {p['BASELINE_CLIENTS_PER_ROUND']} clients a round; "
                     f"elsewhere {p['UPDATES']} updates of {p['LOCAL_STEPS']} steps",
         "at most 5000 communication steps, K = 50"),
        ("Seeds", f"{', '.join(map(str, p['SEEDS']))} for every arm; a claim's arms to its seed plan, at most "
                  f"{p['SEED_CAP']}", ""),
    ]  # fmt: skip


def claims_markdown(table: pd.DataFrame) -> str:
    """The compact claims table of "What reproduced" as MyST Markdown, in the glance tables' small
    type: each claim with ours and its verdict (word and flags); then, in a fold, each claim with the
    paper's number and the notes.  ``table``: :func:`pflkit.verdicts.claims_table` (claims as index)."""
    from ..pages import markdown_table

    d = table.reset_index()
    short = d[["claim", "ours (a − b, 95 % CI)", "verdict"]].rename(columns={"ours (a − b, 95 % CI)": "ours (95 % CI)"})
    full = d[["claim", "paper", *(["notes"] if "notes" in d else [])]].rename(columns={"paper": "the paper"})
    return "\n".join([
        markdown_table(short, css="glance"),
        "",
        "::::{dropdown} With the paper's numbers and the notes",
        markdown_table(full, css="glance"),
        "::::",
    ])  # fmt: skip


def table1_wide(table: pd.DataFrame, skip=(), label: str = "CIFAR-10"):
    """Table 1 laid out as the paper's (a Styler, no index column): one row per method, per client
    count ours (mean ± 95 % CI half-width over seeds, %) beside the paper's number on ``label``; "—"
    where an arm did not run.  ``table``: :func:`table1_rows` concatenated over client counts (index
    clients, arm); ``skip``: arms left out (shown in the full table)."""
    d = table[~table.index.get_level_values("arm").isin(list(skip))]
    ours = d["ours mean_acc"].astype(str).str.split(" (", regex=False).str[0]  # its seeds: in the full table
    paper = d[f"paper {label}"].map(lambda v: f"{v:.1f}" if v == v else "—")
    wide = pd.concat({"ours": ours, "paper": paper}, axis=1).unstack("clients")
    wide = wide.swaplevel(axis=1).sort_index(axis=1, level=0, sort_remaining=False)
    arms = list(dict.fromkeys(d.index.get_level_values("arm")))
    wide = wide.reindex(arms).rename_axis("method").reset_index()
    wide.columns = pd.MultiIndex.from_tuples([("", "method")] + [(f"{n} clients", w) for n, w in wide.columns[1:]])
    return styled(wide.fillna("—"))


# ----------------------------------------------------------------------------- the claims, section by section


def table1_claims(t1, pilot, paper, plan, resolution: float, dataset: str = "CIFAR10", where: str = ""):
    """Table 1's claims on all the data: per client count, each hypernetwork against the strongest
    baseline of its column (chosen on the pilot's validation), labelled saturated where the setting is.
    ``t1``, ``pilot``: clients -> sweep; ``paper``: the paper's results; ``plan``: the table's seed plan;
    ``dataset``: the paper's column (CIFAR10, CIFAR100); ``where``: the dataset in the claims' text.
    Returns the rows, the page's lines (one per claim) and the descriptive means (for the notes)."""
    label = data_label({v: k for k, v in PAPER_DATASETS.items()}[dataset])
    rows, lines, means_lines = [], [], []
    for n, res in t1.items():
        means = res.summary("mean_acc")["mean_acc"].sort_values(ascending=False)
        means_lines.append(f"* **{n} clients{where}**, mean over seeds (descriptive; the verdicts compare): "
                           + " > ".join(f"{a} ({v:.1f})" for a, v in means.items()) + ".")  # fmt: skip
        sat = saturation(res, m=resolution)  # all data: the strongest arm near 100 % leaves no room to judge
        if sat:
            lines.append(
                f"* {n} clients{where}: this setting is **{sat}**: its claims are kept, labelled, and carry no headline."
            )
        best = t1_best(pilot[n])
        pub = paper_t1(paper, n, dataset)
        for hn in ("pFedHN", "pFedHN-PC"):
            row = claim(
                t1_text(n, hn, best, where), res, hn, best,
                paper=margin_text(pub, hn, exclude=("pFedHN", "pFedHN-PC"), dataset=label),
                note=absent_rival(pub, hn, res.arms), resolution=resolution, saturated=sat, plan=plan,
            )  # fmt: skip
            rows.append(row)
            lines.append(f"* {n} clients{where}, {hn} − {best}: {say(row)}.")
    return rows, lines, means_lines


def headroom_rows(res, arms, baselines, shared, published, n0: int, plan, resolution: float):
    """Table 1's claims on the headroom split: the two mechanism checks (pFedHN against its
    shared-embedding control ``shared``; own minus another client's generated model), Figure 3's swap
    (pFedHN-PC), then each hypernetwork against the strongest baseline (headline claims, each linked to
    its mechanism).  Returns the rows (in that order), the strongest baseline and the page's text."""
    sat = saturation(res, [*baselines, "pFedHN", "pFedHN-PC"], m=resolution)
    best, diffs = headroom_claims(res, arms, baselines, shared)

    def check(text, name, arms_, control, paper="not measured"):
        v = verdict(diffs[name], budget=res.budget(*arms_), resolution=resolution)
        return mechanism(text, v, control=control, paper=paper, plan=plan, plan_name=name)

    where = f"{n0} clients, headroom split"
    mech_control = check(f"Mechanism ({where}): pFedHN beats its control with one shared embedding",
                         "pFedHN − shared embedding", ("pFedHN", shared),
                         "the same hypernetwork with one embedding for every client")  # fmt: skip
    mech_swap = check(f"Mechanism ({where}): a client does better with its own generated model than another's",
                      "pFedHN: own − another client's model", ("pFedHN",), "the model generated for another client")  # fmt: skip
    mech_pc = check(f"Figure 3 ({where}): a client does best with its own generated feature extractor",
                    "pFedHN-PC: own − another client's feature extractor", ("pFedHN-PC",),
                    "another client's feature extractor, own classifier", paper="diagonal stands out")  # fmt: skip
    rows = [mech_control, mech_swap, mech_pc]
    for hn, mech in (("pFedHN", mech_control), ("pFedHN-PC", mech_pc)):
        name = f"{hn} − strongest baseline"
        rows.append(claim_row(
            f"Table 1, {where}: {hn} beats the strongest baseline ({best}, on validation)",
            verdict(diffs[name], budget=res.budget(hn, best), resolution=resolution),
            paper=margin_text(published, hn, exclude=("pFedHN", "pFedHN-PC"), dataset="CIFAR-10"), headline=True,
            saturated=sat, mechanism=mech, plan=plan, plan_name=name, ours_b=interval(res.values(best))[0],
        ))  # fmt: skip
    acc = res.summary()["mean_acc"]
    head = (f"This setting is **{sat}**.\n" if sat else
            f"Not saturated: the strongest arm is {acc.max():.1f} % and the arms span {acc.max() - acc.min():.1f} points.\n")  # fmt: skip
    return rows, best, head + "\n".join(f"* {r['claim']}: {say(r)}." for r in rows)


def novel_claims(novel, res, gap_text: str, corr_text: str, diffs: dict, plan, resolution: float, exchanges: int):
    """Figures 2 and 7's claims and the page's text: pFedHN's generalization gap against Per-FedAvg's
    (averaged over α, per seed), −r between a novel client's accuracy and its TV distance, and our check
    of learning v_new against the random-embedding control.  ``novel``: :func:`novel_rows`; ``diffs``:
    :func:`novel_diffs` of ``res``.  Returns the two claims' rows and the text."""
    per_seed = novel.groupby(["seed", "method", "alpha"])["gap"].mean().unstack("method")
    hn_better = (per_seed["pFedHN"] > per_seed["Per-FedAvg"]).groupby("alpha").mean()
    corr = -diffs[corr_text]
    hn = novel[novel.method == "pFedHN"]
    gain = 100 * (hn["acc_novel"] - hn["acc_novel (random v)"]).groupby(hn.seed).mean()
    v_gap = verdict(diffs[gap_text], budget=res.budget("pFedHN", "Per-FedAvg"), resolution=resolution)
    v_corr = verdict(-corr, unit="(−r)", budget=res.budget("pFedHN"))
    v_gain = verdict(gain, budget=res.budget("pFedHN"))
    row_gap = claim_row(gap_text, v_gap, paper="smaller at every TV (α)", plan=plan)
    row_corr = claim_row(corr_text, v_corr, paper="on average, yes", plan=plan)
    text = (
        "* Share of seeds where pFedHN's gap is smaller than Per-FedAvg's, by α: "
        + ", ".join(f"α = {a:g}: {v:.0%}" for a, v in hn_better.items())
        + f" (paper: smaller at every α). Averaged over α, pFedHN − Per-FedAvg: {say(row_gap)}.\n"
        "* Correlation between a novel client's accuracy and its TV distance (Figure 7), per seed: "
        + ", ".join(f"{c:.2f}" for c in corr)
        + f" (the paper: accuracy decreases with distance, on average); the claim is r < 0: {say(row_corr)}.\n"
        f"* Learning $v_{{new}}$ ({exchanges} exchanges) against the random-embedding control (ours, not a "
        f"claim of the paper): **{v_gain}**."
    )
    return [row_gap, row_corr], text


def ablation_claims(res, k_arms, k1, embed, depth, depth_arms, *, paper_depths, margin: float, resolution: float,
                    plan):  # fmt: skip
    """Figures 5 and 6's claims: the best K > 1 (on validation) against ``k1``; the two embedding
    sizes ``embed`` (a, b) within ±``margin`` points; the paper's depth against the shallowest,
    ``depth`` (a, b); ``paper_depths``: the paper's accuracies at 3 and 4 hidden layers.  Returns the
    rows and the page's lines (with the depth chosen on validation among ``depth_arms``)."""
    best_k = res.select([a for a in k_arms if a != k1], by="val_mean_acc")
    best_depth = res.select(list(depth_arms), by="val_mean_acc")
    (small_e, large_e), (deep, shallow) = embed, depth
    rows = [
        claim(f"Figure 5: several local steps ({best_k}, on validation) beat the chain rule ({k1})", res, best_k, k1,
              paper="large improvement", resolution=resolution, plan=plan, plan_name="Figure 5"),
        claim(f"Figure 6a: {small_e} and {large_e} do not differ (±{margin:g} points)", res, small_e, large_e,
              margin=margin, paper="robust", plan=plan, plan_name="Figure 6a"),
        claim(f"Figure 6b: {deep} beats {shallow}", res, deep, shallow,
              paper="3–4 layers best (" + ", ".join(f"{v:g}" for v in paper_depths) + " %)", resolution=resolution,
              plan=plan, plan_name="Figure 6b"),
    ]  # fmt: skip
    lines = [f"* {r['claim']}: {say(r)}." for r in rows]
    lines += [f"* Depth chosen on validation accuracy: {best_depth} (the paper uses 3).",
              "* Larger K also means more computation per round."]  # fmt: skip
    return rows, lines


# ----------------------------------------------------------------------------- the runs


def per_round_of(method: str, baseline_per_round: int) -> int:
    """Algorithm 1: one client per hypernetwork step; the baselines aggregate ``baseline_per_round``
    clients a round (App. B)."""
    return 1 if method.startswith("pfedhn") else baseline_per_round


def run_config(method="pfedhn", *, clients, updates, baseline_per_round, per_round=None, defaults=None, **fields):
    """A run of Table 1's protocol (two classes per client, shares U(.4,.6)) unless ``fields`` say
    otherwise: ``updates`` client updates, ``per_round`` of them a round (by default
    :func:`per_round_of`); ``defaults``: fields every run of the chapter shares (images, the client
    optimiser).  Every run is evaluated every ⌈rounds/5⌉ rounds: at least once inside its last fifth
    and once before, which the budget flag compares."""
    from ..engine import RunConfig

    per_round = per_round or per_round_of(method, baseline_per_round)
    rounds = max(1, updates // per_round)
    base = (
        {"dataset": "fashion-mnist"}
        | dict(
            partition="pathological",
            clients=clients,
            rounds=rounds,
            sample_rate=min(1.0, per_round / clients),
            eval_every=max(1, math.ceil(rounds / 5)),
        )
        | (defaults or {})
    )
    return RunConfig(method=method, **{**base, **fields})


# ----------------------------------------------------------------------------- the further experiments' claims


def prop1_claims(prop1: pd.DataFrame, margin_deg: float):
    """Proposition 1's two claims from the fits (one row per seed and k: the largest principal angle
    in degrees and the squared errors to the true models): span(W) is PCA's within ±``margin_deg``
    (the largest angle over k, per seed), and at k = 3 the hypernetwork denoises (the relative
    reduction of the local solutions' squared error, %).  Returns the two rows and the page's text."""
    angle = prop1.groupby("seed")["largest angle span(W) vs PCA (°)"].max()
    k3 = prop1[prop1.k == 3].set_index("seed")
    denoise = 100 * (1 - k3["‖Wv − θ*‖² (hypernetwork)"] / k3["‖θ̄ − θ*‖² (local)"])
    row_pca = claim_row("Prop. 1: span(W) of a linear HN is the PCA subspace (largest angle, k = 1–3)",
                        verdict(angle, margin=margin_deg, unit="°"), paper="exact (theorem)")  # fmt: skip
    row_denoise = claim_row("Prop. 1: the hypernetwork's models are nearer θ* than the local solutions (k = 3)",
                            verdict(denoise, unit="%"), paper="denoising (§4.1)")  # fmt: skip
    text = (
        f"* Largest angle between the fitted subspace and PCA's, over $k = 1, 2, 3$ and {len(angle)} seeds: "
        f"at most {angle.max():.2g}°. Within ±{margin_deg:g}°: {say(row_pca)}.\n"
        f"* At $k = 3$ the hypernetwork removes {fmt_interval(denoise)} % of the local solutions' squared error "
        f"to the true models: {say(row_denoise)}."
    )
    return [row_pca, row_denoise], text


def embedding_claims(scores: pd.DataFrame, res, arms, plan, resolution: float, n_groups: int):
    """Figure 4's claims, one per arm of ``arms``: the embeddings' 1-NN purity gain (after − before
    training, per seed, from :func:`embedding_scores`), with the page's lines (``n_groups``: the
    garment groups, for chance purity)."""
    rows, lines = [], [f"Chance 1-NN purity with {n_groups} equal groups ≈ {100 / n_groups:.0f} %."]
    for arm in arms:
        d = scores[scores.arm == arm].set_index("seed")
        v = verdict(d["purity after (%)"] - d["purity before (%)"], budget=res.improving(arm), resolution=resolution)
        row = claim_row(f"Figure 4: embeddings group by garment group ({arm}; 1-NN purity gain)", v,
                        paper="t-SNE groups coarse classes", plan=plan, plan_name=arm)  # fmt: skip
        rows.append(row)
        lines.append(
            f"* **{arm}**: embeddings moved a median {d['median movement (%)'].mean():.1f} % of their norm; "
            f"purity {d['purity before (%)'].mean():.0f} → {d['purity after (%)'].mean():.0f} %, silhouette "
            f"{d['silhouette before'].mean():.2f} → {d['silhouette after'].mean():.2f} (means over seeds); "
            f"purity gain: {say(row)}."
        )
    return rows, lines


def spectral_claim(res, text: str, published, n: int, margin: float, plan):
    """Table 4's claim at ``n`` clients (spectral normalization on every layer against plain pFedHN,
    within ±``margin`` points), our variant sparing the heads, the table beside the paper's
    (``published``: the paper's pFedHN rows on CIFAR-10, Tables 1 and 4) and the page's lines."""
    p1 = published[(published.table == "Table 1") & (published.setting == f"{n} clients")]["value"]
    p4 = published[(published.table == "Table 4") & published.setting.str.startswith(f"{n} clients")]["value"]
    paper = (PaperMargin(f"{p4.iloc[0] - p1.iloc[0]:+.1f} (CIFAR-10)", datasets=["CIFAR-10"],
                         values=[(p4.iloc[0], p1.iloc[0])]) if len(p1) and len(p4) else "")  # fmt: skip
    row = claim(text, res, "pFedHN + spectral norm", "pFedHN", margin=margin, paper=paper, plan=plan)
    spared = res.compare("pFedHN + spectral norm, heads spared", "pFedHN", margin=margin)
    table = paper_vs_ours(res, {"pFedHN": p1.mean(), "pFedHN + spectral norm": p4.mean()}, label="paper CIFAR-10")
    lines = [f"* {n} clients, spectral norm on every layer − plain: {say(row)}.",
             f"* {n} clients, spectral norm sparing the heads − plain (our variant): **{spared}**."]  # fmt: skip
    return row, table.assign(clients=n), lines


def size_trend(published, ours: dict, widths) -> str:
    """One sentence on Table 2's sizes: for which methods the paper's accuracy rises from S to M to L
    (``published``: its Table 2 rows, settings ending in the size), and pFedHN's means per size on
    our runs (``ours``: size -> %)."""
    by_size = published.assign(size=published.setting.str[-1]).pivot(index="method", columns="size", values="value")
    by_size = by_size[list(widths)]
    rising_ = [m for m, r in by_size.iterrows() if r.is_monotonic_increasing]
    not_rising = {m: " / ".join(f"{v:.1f}" for v in r) for m, r in by_size.iterrows() if m not in rising_}
    return (
        "In the paper's Table 2 (CIFAR-10) accuracy rises from S to M to L for "
        + (", ".join(rising_) or "no method")
        + "; it does not for "
        + (", ".join(f"{m} ({v})" for m, v in not_rising.items()) or "any method")
        + ". pFedHN's mean over seeds on our runs (S / M / L): "
        + " / ".join(f"{ours[w]:.1f}" for w in widths)
        + "."
    )


def lead_claims(*, n0, counts, hr_rows, best_hr, t1, t1_pilot, mech2h, widths, budget_clients, fig2, row_gap,
                novel_clients: str, resolution: float, data: str = "FMNIST") -> list[tuple[str, str, str, str]]:  # fmt: skip
    """The paper's lead claims in its order, whatever our verdict (:func:`pflkit.verdicts.mark_leads`:
    the start of each row's claim, the claim in a few words, our setting, the one line of why): Table 1
    at ``n0`` clients on the headroom split (``hr_rows``: :func:`headroom_rows`), at the other
    ``counts`` on the paper's split, Table 2 on the headroom split by size, Figure 2 (``fig2``: its
    claim's text; ``novel_clients``: the clients, in words; ``data``: the first dataset, in words)."""
    swap_gain = hr_rows[1]["ours (a − b, 95 % CI)"].split(" [")[0]  # own − another client's model
    start = f"Table 1, {n0} clients, headroom split: pFedHN beats"
    word = next(r["verdict"] for r in hr_rows if r["claim"].startswith(start))
    leads = [(start, f"Table 1, {n0} clients: pFedHN beats every baseline", f"{data}, our headroom split, {n0} clients",
              f"its models are client-specific (swap {swap_gain}); "
              + (f"they beat {best_hr}" if word == "reproduces" else f"{best_hr} does as well"))]  # fmt: skip
    leads += [(f"Table 1, {n} clients: pFedHN beats", f"Table 1, {n} clients: pFedHN beats every baseline",
               f"{data}, the paper's split, {n} clients",
               (saturation(t1[n], m=resolution) or "").split(", within")[0] or f"strongest baseline: {t1_best(t1_pilot[n])}")
              for n in counts[1:]]  # fmt: skip
    swap2 = mech2h["ours (a − b, 95 % CI)"].split(" [")[0]
    leads += [(f"Table 2, headroom split, size {w}", f"Table 2, size {w}: one HN beats each size's baselines",
               f"{data}, our headroom split, {budget_clients} clients", f"own model beats another of its size ({swap2})")
              for w in widths]  # fmt: skip
    leads += [(fig2, "Figure 2: smaller generalization gap than Per-FedAvg", f"{data} Dir(0.1), {novel_clients}",
               row_gap["notes"])]  # fmt: skip
    return leads


def not_run(counts, only_smallest, name) -> str:
    """What of the paper's Table 1 this profile does not run (named, never shown as a number):
    client counts of the paper's 10, 50, 100 missing from ``counts``, and the arms ``only_smallest``
    (run at the first count only; ``name``: method -> its display name) at the others."""
    missing = [f"{n} clients (every arm)" for n in (10, 50, 100) if n not in counts]
    missing += [f"{name(m)} at {n} clients" for n in counts[1:] for m in only_smallest]
    if not missing:
        return "Every client count and arm of the paper's Table 1 is computed at this profile."
    return ("**Not run at this profile:** Table 1 with " + "; ".join(missing) + " (the `paper` profile runs them; "
            "nothing above stands for them, and the strongest baseline of a column is chosen among the arms it has).")  # fmt: skip


def table2h_rows(res, plan, *, hn, baselines, widths, groups, published, cap: int, resolution: float, pilot_seeds: int):
    """Table 2's claims on the headroom split: the mechanism check first (a client's own generated model
    against another of its size, :func:`size_swaps`, planned on its own spread, at most ``cap`` seeds),
    then each size's headline claim linked to it (``plan``: the sizes' seed plan, from ``pilot_seeds``
    seeds).  Returns the rows, the mechanism's seed plan and the page's text."""
    swaps = {"own − another model of its size": size_swaps(res, hn, res[hn, res.seeds[0]]["config"]["rounds"])}
    swap_plan = seed_plan(swaps, cap=cap, resolution=resolution)
    mech = mechanism(
        "Mechanism (Table 2, headroom split): a client's own generated model beats another of its size",
        verdict(swaps["own − another model of its size"], budget=res.budget(hn), resolution=resolution),
        control="the model generated for another client of the same size", paper="not measured",
        plan=swap_plan, plan_name="own − another model of its size",
    )  # fmt: skip
    args = dict(hn=hn, baselines=baselines, widths=widths)
    best, diffs = table2_diffs(res, ", headroom split", **args, groups=groups)
    sat = saturation(res, m=resolution)
    rows, lines = table2_claims(res, best, diffs, plan, **args, published=published, resolution=resolution,
                                headline=True, saturated=sat, mechanism=mech)  # fmt: skip
    text = (
        (f"This setting is **{sat}**.\n" if sat else "")
        + f"* {mech['claim'].split(': ', 1)[1].capitalize()}: {say(mech)}.\n"
        + "\n".join(lines)
        + f"\n\nThe plan, from the pilot's {pilot_seeds} seeds (the spread pooled over the three sizes): "
        + ", ".join(f"size {w} {p}" for w, p in zip(widths, plan["plan"]))
        + f"; this build ran {len(res.seeds)} seeds."
    )
    return [mech, *rows], swap_plan, text


# ----------------------------------------------------------------------------- the notebook's configs and glue


def table1_config(config, method, n, per_round=None, *, updates, local_steps, images, clip, options, evals, tuned=None):
    """Table 1's run of ``method`` on ``n`` clients (``config``: the chapter's :func:`run_config` with its
    defaults): ``updates`` client updates of ``local_steps`` steps, one client per round (= hypernetwork
    step) for pFedHN unless ``per_round``; ``images`` (train, test); the pFedHN clients clip each step's
    gradient at ``clip``; ``options`` for a method (e.g. ``{"pfedme": {"K": 3}}``); ``evals``
    evaluations per run, evenly spaced; ``tuned``: the learning rate and options of the baselines App. B
    tunes (:meth:`pflkit.tuning.Rates.settings`)."""
    cfg = config(
        method, clients=n, updates=updates, per_round=per_round, local_steps=local_steps,
        train_images=images[0], test_images=images[1],
        grad_clip=clip if method.startswith("pfedhn") else 0.0, options=options.get(method, {}),
    )  # fmt: skip
    return with_tuned(dataclasses.replace(cfg, eval_every=max(1, cfg.rounds // evals)), tuned)


def table2_arms(config, *, methods, clients, updates, widths, hn, hn_options, images, test_images, options, name,
                tuned=None, **split):  # fmt: skip
    """Table 2's arms on a split of ``clients`` clients (``split``: e.g. classes_per_client and
    train_images; default Table 1's): one hypernetwork ``hn`` over all the clients (``len(widths)``
    times ``updates``), and each baseline of ``methods`` once per size, on a federation of a third of
    the clients and a third of the ``images`` training and ``test_images`` test images (None: all of the
    run's dataset); ``tuned``: as :func:`table1_config`'s."""
    arms = {hn: config("pfedhn", clients=clients, updates=len(widths) * updates, options=hn_options, **split)}
    images = split.get("train_images", images)
    if images is None or test_images is None:  # all of the run's dataset
        from ..engine import dataset

        data = dataset(arms[hn].dataset)
        images, test_images = images or len(data.y_train), test_images or len(data.y_test)
    third = {"train_images": images // 3, "test_images": test_images // 3}
    for m in methods:
        if m.startswith("pfedhn"):
            continue
        for w in widths:
            arms[f"{name(m)} ({w})"] = with_tuned(config(
                m, clients=clients // len(widths), updates=updates, width=w, options=options.get(m, {}),
                **(split | third),
            ), tuned)  # fmt: skip
    return arms


# App. B: the PFL baselines' personal learning rate, searched with the learning rate (pFedMe's inner
# problem; Per-FedAvg's adaptation step α)
RATE = {"pfedme": "personal_lr", "perfedavg": "alpha"}


def width_arms(arms: dict, width: str) -> dict:
    """Table 2's baselines at one size, named by their method: "pFedMe (M)" -> "pFedMe"."""
    return {a.removesuffix(f" ({width})"): c for a, c in arms.items() if a.endswith(f" ({width})")}


def _default_rate(pilot, label: str) -> float:
    """The method's default personal rate (the option the pilot tunes for ``label``): the shared value."""
    return get_method(pilot.config(label).method).options[pilot.rate[label]][0]


def _shared_rate(pilot, label: str) -> tuple[str, float] | None:
    """The pilot's arm of ``label`` at the starting learning rate and the method's default personal rate
    (the shared values our tables used before the pilot), and that rate; None where the grid lacks it."""
    first, option, default = pilot.first[label], pilot.rate[label], _default_rate(pilot, label)
    hit = [a for a, c in first.grids[label].items() if c.options.get(option, default) == default]
    return (hit[0], default) if hit else None


def tuned_why(pilot, shared_lr: float, width: str, seed: int) -> dict[str, str]:
    """Per baseline the pilot tuned (:func:`pflkit.tuning.tune_rates`, on Table 2's headroom split at size
    ``width``, on ``seed``), why a table's run of it that is still untuned is weak where it is marked so:
    it ran at the chapter's shared learning rate and the method's default personal rate; the pilot says what
    validation chooses and scores instead."""
    table = pilot.table().set_index(["method", "learning rate", "personal rate"])
    why = {}
    for label, option in pilot.rate.items():
        chosen, default = pilot.config(label), _default_rate(pilot, label)
        ours, best = (table.loc[(label, lr, r), pilot.second[label].by] for lr, r in ((shared_lr, default), (chosen.lr, chosen.options[option])))  # fmt: skip
        why[label] = (f"untuned in this table: it runs at the shared learning rate {shared_lr:g} and personal rate {default:g}; "
                      f"Appendix B's grid on validation (Table 2's headroom split, size {width}, seed {seed}; laboratory "
                      f"notes) chooses {chosen.lr:g} and {chosen.options[option]:g}: {best} % against {ours} %, the values "
                      "Table 2's headroom split runs; a pilot of this table's own is pending")  # fmt: skip
    return why


def fresh_config(pilot):
    """pFedMe at the pilot's choice, each client evaluated with the θ̃ one round of Algorithm 1 from the
    current global model gives (``personal="fresh"``: every client updates every round, as Algorithm 1 has it)."""
    cfg = pilot.config("pFedMe")
    return dataclasses.replace(cfg, options={**cfg.options, "personal": "fresh"})


def tuned_beside(pilot, res, seed: int, width: str, *, hn: str, groups, fresh=None) -> pd.DataFrame:
    """The tuned baselines beside Table 2's other arms at one size and seed (``res``: Table 2's sweep, whose
    tuned arms are the pilot's choices): each arm's test accuracy (%) at its last round, and its rounds (a
    control, not a claim: one seed); each tuned baseline also at the shared values (the pilot's run at the
    starting learning rate and default personal rate); ``fresh``: the sweep of :func:`fresh_config`, shown
    below the tuned pFedMe."""

    def row(arm, setting, rec):
        return {
            "arm": arm,
            "setting": setting,
            "rounds": rec["final"]["round"],
            "test accuracy (%)": 100 * rec["final"]["mean_acc"],
        }

    rows = [{"arm": f"{hn}, size {width}", "setting": "the authors'", "rounds": res[hn, seed]["final"]["round"],
             "test accuracy (%)": hn_size_acc(res, seed, width, hn=hn, groups=groups)}]  # fmt: skip
    tuned = {f"{label} ({width})" for label in pilot.rate}
    rows += [
        row(arm, "our tables'", res[arm, seed]) for arm in res.arms if arm.endswith(f" ({width})") and arm not in tuned
    ]
    for label, t in pilot.second.items():
        option = pilot.rate[label]
        if shared := _shared_rate(pilot, label):
            rec = pilot.first[label].result[shared[0], seed]
            rows.append(row(f"{label} ({width})", f"shared: lr={rec['config']['lr']:g}, {option}={shared[1]:g}", rec))
        rec = t.result[t.chosen[label], seed]
        rows.append(row(f"{label} ({width})", "tuned: " + t.chosen[label].split(" · ", 1)[1]
                        + f", {option}={rec['config']['options'][option]:g} (our tables')", rec))  # fmt: skip
        if label == "pFedMe" and fresh is not None:
            rows.append(
                row(f"{label} ({width})", "tuned, every client's θ̃ from the current model", fresh["pFedMe", seed])
            )
    return pd.DataFrame(rows)


def tuned_shown(pilot, beside: pd.DataFrame, seed: int, carried=None) -> list:
    """What the page shows of the tuning pilot: its every setting (rates as written), the tuned baselines
    beside Table 2's arms (:func:`tuned_beside`, the hypernetwork first), and a sentence on what the one seed
    says; ``carried``: a sweep whose "Per-FedAvg" arm runs the tuned values on Table 1's protocol (its
    seeds: how many diverged, :func:`carried_text`)."""
    grid = pilot.table()
    grid[["learning rate", "personal rate"]] = grid[["learning rate", "personal rate"]].map(lambda v: f"{v:g}")
    b = beside.assign(method=beside.arm.str.replace(r" \([SML]\)$", "", regex=True))
    hn, width = b.iloc[0], b.arm.iloc[0].rsplit(" ", 1)[1]

    def acc(method: str, setting: str) -> pd.Series:
        return b[(b.method == method) & b.setting.str.startswith(setting)]["test accuracy (%)"]

    def pct(values: pd.Series, before: str = " ", after: str = "") -> str:  # "" where the pilot lacks the run
        return f"{before}{values.iloc[0]:.1f} %{after}" if len(values) else ""

    tuned = [f"{m}{pct(acc(m, 'tuned:'))}{pct(acc(m, 'shared'), ' (at the shared values: ', ')')}" for m in pilot.rate]
    others = b[(b.setting == "our tables'") & ~b.method.isin(list(pilot.rate))]
    best = others.loc[others["test accuracy (%)"].idxmax()] if len(others) else None
    text = (f"On seed {seed} at size {width} (test accuracy at each run's end): the tuned " + " and the tuned ".join(tuned)
            + pct(acc("pFedMe", "tuned, every"), "; pFedMe with every client's θ̃ from the current model, as Algorithm 1 has it, ")
            + f"; the hypernetwork {hn['test accuracy (%)']:.1f} %"
            + (f", and the best of our tables' other baselines, {best.arm}, {best['test accuracy (%)']:.1f} %" if best is not None else "")
            + ". One seed makes no claim. Table 2 on the headroom split runs pFedMe and Per-FedAvg at the tuned "
            "values; the other tables still run them at the shared ones until a pilot of their own, which their "
            "weak-baseline marks say." + (f" {carried_text(carried, 'Per-FedAvg')}" if carried is not None else "").rstrip())  # fmt: skip
    return [page_table(grid), page_table(beside), Markdown(text)]


def carried_text(res, arm: str) -> str:
    """Whether the tuned values carry to another protocol: on how many of its seeds ``arm``'s run in ``res``
    diverged, and the others' test accuracy at their end."""
    recs = {s: res[arm, s] for s in res.seeds if (arm, s) in res.records}
    if not recs:  # the control did not run (the dry run's arms)
        return ""
    bad = [s for s, r in recs.items() if r.get("diverged")]
    cfg = next(iter(recs.values()))["config"]
    ok = ", ".join(f"seed {s}: {100 * r['final']['mean_acc']:.1f} %" for s, r in recs.items() if s not in bad)
    return (f"They need not carry: at Table 1's {cfg['local_steps']} local steps a round ({cfg['clients']} clients, "
            f"headroom split) {arm} at the tuned values diverged on {len(bad)} of {len(recs)} seeds"
            + (f" ({ok})." if ok else "."))  # fmt: skip


def option_checks(res, n0: int, updates: int, clip: float, averaged: str, no_clip: str) -> list[str]:
    """Our two option checks at the first count (not claims of the paper), as bullets: Algorithm 1
    against the averaging option, and the authors' client gradient clip."""
    return [
        f"* Algorithm 1 against the averaging option ({n0} clients, the same {updates} client updates): "
        f"pFedHN − {averaged}: **{res.compare('pFedHN', averaged)}**.",
        f"* The authors' client gradient clip at norm {clip:g} ({n0} clients): "
        f"pFedHN − {no_clip}: **{res.compare('pFedHN', no_clip)}**.",
    ]


def headroom_choice(pilot_table, split: str, classes: int, images: int, updates: int, seed: int, target: float):
    """The sentence naming the headroom split chosen on the Local pilot's validation."""
    return (
        f"Chosen on validation: **{classes} classes and {images} training images per client** (Local "
        f"{pilot_table.loc[split, 'Local val_mean_acc (%)']:.1f} % on validation after {updates} client "
        f"updates, seed {seed}; the paper's Local: {target:.1f} %)."
    )


def headroom_plan(pilot_diffs: dict, swaps, cap: int, resolution: float) -> pd.DataFrame:
    """The headroom split's seed plan: the accuracy differences between arms pooled together, the
    within-run swap diagnostics (``swaps``, their own pool of spread) apart."""
    return pd.concat(
        [
            seed_plan({k: list(v) for k, v in pilot_diffs.items() if (k in swaps) == s}, cap=cap, resolution=resolution)
            for s in (False, True)
        ]
    )


def headroom_plan_text(pilot_seeds: int, sd_upper: float, planned: int, cap: int, ran: int) -> str:
    """The sentence under the headroom split's seed plan."""
    return (
        f"The plan, from the pilot's {pilot_seeds} seeds (the spread pooled over the accuracy differences and, "
        f"apart, over the swap diagnostics, at its {100 * sd_upper:.0f} % upper bound): **{planned} seeds**, "
        f"at most {cap}; this build ran {ran}."
    )


def prop1_table(prop1: dict, seeds, steps: int = 600) -> pd.DataFrame:
    """Proposition 1 on its synthetic problem ``prop1`` (kwargs of
    :func:`pflkit.theory.make_regression_clients`), per seed and hypernetwork rank k: the largest
    principal angle between span(W) and the local solutions' PCA subspace, and the squared errors of
    the local solutions and of the linear hypernetwork's models."""
    from .. import theory

    rows = []
    for seed in seeds:
        X, y, theta_star, _ = theory.make_regression_clients(**prop1, seed=seed)
        theta_bar = theory.local_solutions(X, y)
        err_local = np.mean(np.sum((theta_bar - theta_star) ** 2, axis=0))
        for k in range(1, prop1["k_true"] + 1):
            W, V, _ = theory.fit_linear_hypernetwork(X, y, k, steps=steps, seed=seed)
            angle = theory.principal_angles(W, theory.pca_subspace(theta_bar, k)).max()
            rows.append(
                {
                    "seed": seed,
                    "k": k,
                    "largest angle span(W) vs PCA (°)": np.degrees(angle),
                    "‖θ̄ − θ*‖² (local)": err_local,
                    "‖Wv − θ*‖² (hypernetwork)": np.mean(np.sum((W @ V - theta_star) ** 2, axis=0)),
                }
            )
    return pd.DataFrame(rows)


def spectral_shrink(base_of, counts, seeds, arms: dict, spread=None) -> pd.DataFrame:
    """At initialisation, per client count, seed, spectral-norm arm and generated tensor: how many
    times smaller the clients' spread (:func:`client_spread`) is than plain pFedHN's (``arms``: name
    -> the ``spectral_norm`` option, the first plain; ``base_of(n)``: the run of ``n`` clients)."""
    spread = spread or client_spread
    rows = []
    for n in counts:
        for seed in seeds:
            base = dataclasses.replace(base_of(n), seed=seed)
            s = {a: spread(dataclasses.replace(base, options={"spectral_norm": o})) for a, o in arms.items()}
            plain = s[next(iter(arms))]
            for arm in list(arms)[1:]:
                rows += [
                    {"clients": n, "seed": seed, "arm": arm, "tensor": k, "shrink (×)": plain[k] / s[arm][k]}
                    for k in plain
                ]
    return pd.DataFrame(rows)


def shrink_text(shrink_range: pd.DataFrame, every: str, spared: str) -> str:
    """The bullet on how much spectral normalization shrinks the client-specific part at initialisation."""
    e, s = shrink_range.loc[every], shrink_range.loc[spared]
    return (
        f"* At initialisation, normalizing every layer shrinks the client-specific part of the generated tensors "
        f"{e['min']:.1f}× to {e['max']:.1f}× (median {e['median']:.1f}×); sparing the heads, "
        f"{s['min']:.1f}× to {s['max']:.1f}×."
    )


def embedding_gradient_ratio(cfg, seed: int) -> float:
    """How large an embedding's gradient is next to φ's: one client's first update, measured
    (nothing else trained): ‖∇φ‖ / ‖∇v_0‖."""
    _, _, server, clients = build(cfg)
    clients[0].generator.manual_seed(seed)
    reply = clients[0].train_round(server.message_for(0, 0), 0)
    *g_phi, g_emb = server.gradients({0: {"delta": reply["delta"]}})
    return float(torch.sqrt(sum((g**2).sum() for g in g_phi)) / g_emb.norm())


def embedding_snapshots(res, arms, seed: int, rounds: int, coarse_of_class):
    """Figure 4's inputs: each client's garment group and the client embeddings at initialisation
    and, per arm, after ``rounds`` rounds (seed ``seed``)."""
    p = res.probes(list(arms)[0], seed)
    groups = np.array([coarse_of_class[cl[0]] for cl in p[0]["classes"]])
    emb = {"initial (random)": np.array(p[0]["embeddings"])}
    emb |= {f"trained, {a}": np.array(res.probes(a, seed)[rounds]["embeddings"]) for a in arms}
    return groups, emb


def hn_parameters(cfg) -> int:
    """The number of the hypernetwork's parameters in the run ``cfg`` (built, nothing trained)."""
    _, _, server, _ = build(cfg)
    return sum(p.numel() for p in server.hn.parameters())


def comm_table(res, updates: int) -> pd.DataFrame:
    """Mean MB up and down per arm, and KB per message (every arm: ``updates`` replies)."""
    comm = res.finals().groupby("arm")[["MB_up", "MB_down"]].mean()
    comm["KB per message"] = 1e3 * comm["MB_down"] / updates
    comm.index.name = "method"
    return comm.rename(columns={"MB_up": "MB up", "MB_down": "MB down"})


def glue_params(g: dict, prop1: dict, extra: dict) -> dict:
    """The values the prose shows: the notebook's upper-case names ``g``, Proposition 1's problem
    as ``PROP1_<KEY>``, and ``extra``."""
    return {k: v for k, v in g.items() if k.isupper()} | {f"PROP1_{k.upper()}": v for k, v in prop1.items()} | extra


def images_text(images) -> str:
    """Table 1's images, in words."""
    if tuple(images) == (None, None):
        return "all the training and test"
    return f"{images[0]} training and {images[1]} test"


# ----------------------------------------------------------------------------- figures


def draw_fig2(novel: pd.DataFrame):
    """Figures 2 and 7: the generalization gap by the novel clients' α (pFedHN strong, Per-FedAvg
    muted), and pFedHN's novel-client accuracy against the TV distance to the nearest training client."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8))
    per_seed_gap = novel.groupby(["method", "alpha", "seed"], as_index=False)[["TV to nearest", "gap"]].mean()
    sns.lineplot(data=per_seed_gap, x="alpha", y="gap", hue="method", marker="o", ax=axes[0],
                 palette={"pFedHN": "tab:red", "Per-FedAvg": "0.6"})  # fmt: skip
    axes[0].axhline(0, color="grey", lw=0.8)
    axes[0].set(xscale="log", xlabel="novel clients' α", ylabel="novel − training accuracy",
                title="Figure 2: generalization gap")  # fmt: skip
    hn = novel[novel.method == "pFedHN"]
    sns.scatterplot(data=hn, x="TV to nearest", y="acc_novel", hue="alpha", palette="viridis", s=40, ax=axes[1])
    axes[1].set(xlabel="TV distance to the nearest training client", ylabel="novel client's test accuracy",
                title="Figure 7: pFedHN, novel clients")  # fmt: skip
    fig.tight_layout()
    return fig


def fig2_means(novel: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's means per method and α: TV to the nearest training client, gap, novel accuracy."""
    return (
        novel.groupby(["method", "alpha"])
        .agg(TV=("TV to nearest", "mean"), gap=("gap", "mean"), acc_novel=("acc_novel", "mean"))
        .reset_index()
    )


def draw_fig3(mix, client_classes, class_names, seed: int):
    """Figure 3: each client's accuracy (rows) with each client's feature extractor (columns),
    row-normalised; the clients labelled by their classes."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    mix = np.array(mix)
    norm = (mix - mix.min(1, keepdims=True)) / np.maximum(np.ptp(mix, 1, keepdims=True), 1e-9)
    short = [c.split("/")[0] for c in class_names]
    labels = [" & ".join(short[c] for c in cl) for cl in client_classes]
    fig, ax = plt.subplots(figsize=(8.5, 7))
    sns.heatmap(norm, annot=True, fmt=".2f", cmap="viridis", xticklabels=labels, yticklabels=labels, ax=ax)
    ax.set_xlabel("feature extractor θ_j of client j")
    ax.set_ylabel("client i (classifier ω_i, test data)")
    ax.set_title(f"Figure 3 (seed {seed}), row-normalised")
    return fig


def draw_fig4(emb: dict, group_names, seed: int):
    """Figure 4: a t-SNE panel per set of client embeddings, coloured by each client's garment group."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from sklearn.manifold import TSNE

    fig, axes = plt.subplots(1, len(emb), figsize=(3.2 * len(emb), 3.4))
    for ax, (k, E) in zip(axes, emb.items()):
        xy = TSNE(n_components=2, perplexity=min(10, len(E) - 1), random_state=0, init="pca").fit_transform(E)
        sns.scatterplot(x=xy[:, 0], y=xy[:, 1], hue=list(group_names), s=45, ax=ax, legend=ax is axes[-1])
        ax.set(title=k, xticks=[], yticks=[])  # t-SNE's axes carry no unit
    axes[-1].legend(fontsize=10, loc="best")
    fig.suptitle(f"t-SNE of the client embeddings, seed {seed}", y=1.02)
    fig.tight_layout()
    return fig


def draw_fig56(res, arms5, arms6a, arms6b):
    """Figures 5 and 6: accuracy by round per number of local steps K, and the final accuracy (mean
    and 95 % interval over seeds) by embedding size and by hidden layers."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    h, fin = res.history(), res.finals()
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 3.6), gridspec_kw={"width_ratios": [1.4, 1, 1]})
    sns.lineplot(data=h[h.arm.isin(arms5)], x="round", y="mean_acc", hue="arm", marker="o", palette="viridis",
                 ax=axes[0])  # fmt: skip
    axes[0].set(title="Fig. 5: local steps K", ylabel="mean test accuracy (%)")
    axes[0].legend(fontsize=10)
    for ax, group, title in ((axes[1], arms6a, "Fig. 6a: embedding size"), (axes[2], arms6b, "Fig. 6b: hidden layers")):
        d = fin[fin.arm.isin(group)]
        d = d.assign(value=d.arm.str.split("=").str[1])  # the option's value: the panel's title names the option
        sns.pointplot(data=d, x="value", y="mean_acc", color="tab:red", errorbar=("ci", 95), linestyles="none", ax=ax)
        ax.set(title=title, xlabel="", ylabel="")  # mean and 95 % interval over seeds, not bars from zero
    fig.tight_layout()
    return fig


def draw_claims(claims):
    """The claims plot (:func:`pflkit.plots.claims_plot`), or a one-line figure saying that no claim
    has an interval at this profile."""
    import matplotlib.pyplot as plt

    fig = claims_plot(claims)
    if fig is None:
        fig = plt.figure(figsize=(6.8, 0.6))
        fig.text(0.5, 0.5, "no claim has an interval at this profile", ha="center", fontsize=12)
    return fig


def draw_curves(t1: dict, t1_arms: dict):
    """Table 1's curves: per client count, every arm's accuracy by client updates (left) and the
    hypernetworks' by hypernetwork steps (right), one colour per arm in every panel."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    hist = pd.concat([with_budget(t1[n], t1_arms[n]).assign(clients=n) for n in t1])
    colours = arm_palette(hist["arm"])
    fig, axes = plt.subplots(len(t1), 2, figsize=(9.5, 3.1 * len(t1) + 1.2), squeeze=False, sharey="row")
    for j, (n, d) in enumerate(hist.groupby("clients")):
        sns.lineplot(data=d, x="client updates", y="mean_acc", hue="arm", palette=colours, ax=axes[j, 0], legend=False)
        axes[j, 0].set(title=f"{n} clients", ylabel="mean test accuracy (%)")  # mean over seeds, 95 % band
        hn = d[d.arm.str.startswith("pFedHN")]
        sns.lineplot(data=hn, x="server steps", y="mean_acc", hue="arm", palette=colours, ax=axes[j, 1], legend=False)
        axes[j, 1].set(title=f"{n} clients: hypernetwork steps", xlabel="hypernetwork steps")
    handles = [plt.Line2D([], [], color=c, label=a) for a, c in colours.items()]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def table1_runs(table1_config, counts, methods, only_smallest, name, *, run, seeds, cap: int, resolution: float,
                where: str = "", **options) -> dict:  # fmt: skip
    """Table 1 on one dataset (``table1_config``: its runs, :func:`table1_config` with the dataset's config):
    the arms per client count (:func:`table1_arms`, ``options``: its keyword arguments), the pilot on
    ``seeds``, the seed plan pooled over the table (:func:`t1_seed_plan`, ``where``: the dataset in the
    claims' text) and the runs each claim's arms make to it; ``run(arms, seeds)``: a sweep.  Returns a
    dict of ``config``, ``arms``, ``pilot``, ``plan`` and ``runs`` (clients -> sweep)."""
    arms = table1_arms(table1_config, counts, methods, only_smallest, name, **options)
    pilot = {n: run(a, seeds) for n, a in arms.items()}
    plan, planned = t1_seed_plan(pilot, seeds, cap=cap, resolution=resolution, where=where)
    runs = {n: run(arms[n], planned[n]) for n in pilot}
    return {"config": table1_config, "arms": arms, "pilot": pilot, "plan": plan, "runs": runs}


def table1_shown(t1: dict, paper, datasets, skip=()) -> list:
    """What the page shows of Table 1 (``t1``: dataset -> :func:`table1_runs`), dataset by dataset: its
    heading where there are several ``datasets``, the table as the paper's beside the paper's column for
    the same dataset (:func:`table1_wide`, without the arms ``skip``), and every arm in a fold."""
    shown = []
    for name in datasets:
        runs, label = t1[name]["runs"], paper_label(name)
        pub = {n: paper_t1(paper, n, paper_dataset(name)) for n in runs}
        table = pd.concat({n: table1_rows(res, pub[n], label) for n, res in runs.items()}, names=["clients"])
        every = folded(page_table(table, data=data_label(name)), "Every arm, with its seeds and the authors' metric")
        shown += [*map(Markdown, data_heading(name, datasets)), table1_wide(table, skip=skip, label=label), every]
    return shown


def table1_claims_all(t1: dict, datasets, paper, resolution: float):
    """:func:`table1_claims` on every dataset (``t1``: dataset -> :func:`table1_runs`), the paper's column
    of the same dataset beside each.  Returns the rows, the page's lines (under a heading per dataset
    where there are several) and the descriptive means."""
    rows, lines, means = [], [], []
    for name in datasets:
        r, ls, ms = table1_claims(t1[name]["runs"], t1[name]["pilot"], paper, t1[name]["plan"], resolution,
                                  dataset=paper_dataset(name), where=where(name, datasets))  # fmt: skip
        rows, lines, means = rows + r, lines + data_heading(name, datasets) + ls, means + ms
    return rows, lines, means


def table2_shown(t2: dict, datasets, published: dict, *, args: dict, groups) -> list:
    """What the page shows of Table 2 (``t2``, ``published``: dataset -> sweep, the paper's Table 2 rows of
    that dataset), dataset by dataset: its heading where there are several ``datasets``, and ours beside
    the paper's numbers of the same dataset (:func:`table2_table`)."""
    shown = []
    for name in datasets:
        table = table2_table(t2[name], **args, groups=groups, published=published[name], data=data_label(name),
                             label=paper_label(name))  # fmt: skip
        shown += [*map(Markdown, data_heading(name, datasets)), page_table(table.rename_axis("method"))]
    return shown


def table2_claims_all(t2: dict, datasets, published: dict, *, args: dict, groups, cap: int, resolution: float):
    """Table 2's claims on every dataset (``t2``, ``published``: dataset -> sweep, the paper's Table 2 rows
    of that dataset): per size, the hypernetwork against the strongest baseline, the seed plan pooled over
    the sizes.  Returns the rows, the page's lines (under a heading per dataset where there are several)
    and the plans (dataset -> plan)."""
    rows, lines, plans = [], [], {}
    for name in datasets:
        best, diffs = table2_diffs(t2[name], where(name, datasets), **args, groups=groups)
        plans[name] = seed_plan(diffs, cap=cap, resolution=resolution)
        r, ls = table2_claims(t2[name], best, diffs, plans[name], **args, published=published[name], resolution=resolution,
                              saturated=saturation(t2[name], m=resolution), label=paper_label(name))  # fmt: skip
        rows, lines = rows + r, lines + data_heading(name, datasets) + ls
    return rows, lines, plans


def table1_arms(table1_config, counts, methods, only_smallest, name, *, averaged, averaged_clients, no_clip) -> dict:
    """Table 1's arms per client count: every method of ``methods`` (those of ``only_smallest`` at the
    first count only), named by ``name``; at the first count also Algorithm 1 against the averaging
    option (``averaged``, ``averaged_clients`` per step, at equal client updates) and pFedHN without
    the client clip (``no_clip``)."""
    arms = {}
    for n in counts:
        arms[n] = {name(m): table1_config(m, n) for m in methods if n == counts[0] or m not in only_smallest}
        if n == counts[0]:
            arms[n][averaged] = table1_config("pfedhn", n, per_round=averaged_clients)
            arms[n][no_clip] = dataclasses.replace(table1_config("pfedhn", n), grad_clip=0.0)
    return arms


def headroom_config(table1_config, method, n0: int, classes: int, per_client: int, **fields):
    """Table 1's run of ``method`` on ``n0`` clients, on ``classes`` classes per client and
    ``per_client`` training images per client (a stratified subset of the training set)."""
    cfg = table1_config(method, n0)
    return dataclasses.replace(cfg, classes_per_client=classes, train_images=n0 * per_client, **fields)


def headroom_pilot_grid(table1_config, n0: int, classes, images, *, updates: int, per_round: int, evals: int):
    """The pilot of Local on every ``classes`` × ``images`` (per client) split: ``updates`` client
    updates, ``per_round`` clients a round, ``evals`` evaluations."""
    rounds = max(1, updates // per_round)
    return {
        f"{c} classes, {k} images": headroom_config(
            table1_config, "local", n0, c, k, rounds=rounds, eval_every=max(1, rounds // evals)
        )
        for c in classes
        for k in images
    }


C5_ARMS = ("trainable v_i (dim 10)", "fixed v_i = p̂_i")  # App. C.5's arms


def c5_summary(res, paper, text: str, margin: float, plan):
    """App. C.5's claim (fixed − trainable embeddings), the extra upload of the histograms in bytes
    per run, and the table of the paper's CIFAR-10 numbers beside ours."""
    trainable, fixed = C5_ARMS
    fin = res.finals().groupby("arm")["MB_up"].mean()
    extra = 1e6 * (fin[fixed] - fin[trainable])
    pub = paper[paper.table == "Appendix C.5"].set_index("setting")["value"]
    a, b = pub["50 clients / fixed embedding"], pub["50 clients / trainable embedding"]
    paper_c5 = PaperMargin(f"{a - b:+.1f} (CIFAR-10)", datasets=["CIFAR-10"], values=[(a, b)])
    row = claim(text, res, fixed, trainable, margin=margin, paper=paper_c5, plan=plan)
    published = {trainable: pub["50 clients / trainable embedding"], fixed: pub["50 clients / fixed embedding"]}
    return row, extra, paper_vs_ours(res, published, label="paper CIFAR-10")


def steps_text(arms: dict, updates: int, averaged: str, per_round: int) -> str:
    """How many hypernetwork steps and baseline rounds Table 1's arms (at one count) took."""
    steps = {a: c.rounds for a, c in arms.items() if a.startswith("pFedHN")}
    return (
        f"pFedHN and pFedHN-PC took {steps['pFedHN']} hypernetwork steps on {updates} client updates; "
        f"the averaging option took {steps[averaged]} steps on the same {updates} updates. "
        f"The baselines ran {arms['FedAvg'].rounds} rounds of {per_round} clients."
    )


def comm_text(n0: int, n_hn: int, comm: pd.DataFrame) -> str:
    """The hypernetwork's size and pFedHN-PC's message size."""
    return (
        f"Hypernetwork parameters (pFedHN-PC, {n0} clients): {n_hn:,}; "
        f"pFedHN-PC's message (the feature extractor only): {comm.loc['pFedHN-PC', 'KB per message']:.0f} KB."
    )


def mix_text(v_mix: str, mech_pc: dict) -> str:
    """Figure 3's own-minus-other difference on Table 1's saturated runs, and where the claim is judged."""
    return (
        f"Own feature extractor minus another client's, raw accuracy, on these saturated runs: {v_mix}. The claim "
        f"is judged where Table 1 has the paper's headroom ({mech_pc['claim'].split(': ', 1)[0]} in the claims "
        f"table): {say(mech_pc)}."
    )


def budget_intro(extend_cap: int) -> str:
    """The sentence above Table 2's budget table on the headroom split."""
    return (
        f"**Budget of Table 2's arms** on this split: rounds run (a multiple of the first budget; an arm still "
        f"improving ran on with twice the rounds, at most {extend_cap}×), and the last fifth's validation gain "
        "(mean over seeds; still improving above 1 point):"
    )


def plans_intro(pilot_seeds: str, cap: int) -> str:
    """The sentence above the seed plans of every section (``pilot_seeds``: e.g. "3 seeds")."""
    return (
        f"**The seed plans** (the [rule](verdict-rule)'s step 5), from each section's pilot of {pilot_seeds}, "
        f"at most {cap} seeds a claim; a section's arms ran to the largest plan among its claims, or its claim's "
        "arms to their own."
    )


# ----------------------------------------------------------------------------- the paper profile's cost


def paper_cost(p: dict) -> dict:
    """The `paper` profile's runs and optimiser steps (batches) in all, from the parameters cell's values
    ``p`` (:func:`pflkit.paper.parameters` at `paper`).  A run's steps: its client updates times its
    local steps (Algorithm 1: one client a hypernetwork step; a baseline ``BASELINE_CLIENTS_PER_ROUND``
    clients a round), pFedMe's times its inner steps K.  Seeds: an upper bound, every planned arm at
    ``SEED_CAP`` (in Table 1 the two hypernetworks and the column's strongest baseline, counted as pFedMe,
    the costliest; the others at the pilot's seeds); arms that rerun another's config are counted once."""
    cap, pilot, per_round = p["SEED_CAP"], len(p["SEEDS"]), p["BASELINE_CLIENTS_PER_ROUND"]
    inner = p["PFEDME"]["K"]

    def steps(method, updates, local_steps):  # one run: client updates × local steps (× K for pFedMe)
        rounds = updates if method.startswith("pfedhn") else updates // per_round
        return (
            rounds
            * (1 if method.startswith("pfedhn") else per_round)
            * local_steps
            * (inner if method == "pfedme" else 1)
        )

    runs = total = 0

    def add(n_runs, each):
        nonlocal runs, total
        runs, total = runs + n_runs, total + n_runs * each

    t1 = partial(steps, updates=p["CLIENT_UPDATES"], local_steps=p["T1_LOCAL_STEPS"])
    t2 = partial(steps, local_steps=p["LOCAL_STEPS"])
    one = steps("pfedhn", p["UPDATES"], p["LOCAL_STEPS"])  # a pFedHN run outside Tables 1 and 4
    for _ in p["DATASETS"]:  # Table 1 and Table 2 on every dataset
        for n in p["CLIENT_COUNTS"]:
            methods = [
                m for m in p["TABLE1_METHODS"] if n == p["CLIENT_COUNTS"][0] or m not in p["TABLE1_ONLY_SMALLEST"]
            ]
            baselines = [m for m in methods if not m.startswith("pfedhn")]
            add(2 * cap, t1("pfedhn"))  # pFedHN and pFedHN-PC to the cap
            add(cap, t1("pfedme"))  # the column's strongest baseline to the cap, counted as the costliest
            others = list(baselines)
            others.remove("pfedme" if "pfedme" in others else others[0])
            for m in others:
                add(pilot, t1(m))
            if n == p["CLIENT_COUNTS"][0]:  # the averaging option and pFedHN without the client clip
                add(pilot, t1("pfedhn"))
                add(pilot, t1("pfedhn"))
        widths = 3  # Table 2: one hypernetwork over all sizes (three times the updates), each baseline per size
        add(pilot, t2("pfedhn", widths * p["BUDGET_UPDATES"]))
        for m in p["TABLE2_METHODS"]:
            if not m.startswith("pfedhn"):
                add(widths * pilot, t2(m, p["BUDGET_UPDATES"]))
    # the first dataset only: Table 1's headroom split (Local's pilot grid, then every arm and the shared embedding)
    add(
        len(p["HEADROOM_CLASSES"]) * len(p["HEADROOM_IMAGES"]),
        steps("local", p["HEADROOM_PILOT_UPDATES"], p["T1_LOCAL_STEPS"]),
    )
    hr_seeds = min(cap, max(pilot, p["HEADROOM_SEEDS_RUN"]))
    for m in [*p["HEADROOM_METHODS"], "pfedhn"]:
        add(hr_seeds, t1(m))
    # Table 2 on the headroom split, its headline arms (the HN, each size's best, counted as pFedMe) run on to EXTEND_CAP
    hr2_seeds = min(cap, max(pilot, p["HEADROOM2_SEEDS_RUN"]))
    add(hr2_seeds, t2("pfedhn", widths * p["BUDGET_UPDATES"]))
    for m in p["TABLE2_METHODS"]:
        if not m.startswith("pfedhn"):
            add(widths * hr2_seeds, t2(m, p["BUDGET_UPDATES"]))
    factor = 2
    while factor <= p["EXTEND_CAP"]:  # each extension a new run of ``factor`` times the rounds
        add(hr2_seeds, factor * t2("pfedhn", widths * p["BUDGET_UPDATES"]))
        add(widths * hr2_seeds, factor * t2("pfedme", p["BUDGET_UPDATES"]))
        factor *= 2
    # Figures 2/7: pFedHN (and its novel clients' v_new exchanges) and Per-FedAvg; Figure 4: two arms
    novel = p["NOVEL_PER_ALPHA"] * len(p["NOVEL_ALPHAS"]) * p["NOVEL_EXCHANGES"] * p["LOCAL_STEPS"]
    add(cap, one + novel)
    add(cap, t2("perfedavg", p["UPDATES"]))
    add(len(p["EMBED_LRS"]) * cap, one)
    # Figures 5 and 6: K, embedding sizes, depths (K at the default and 3 layers: the same run)
    for k in p["STEP_CHOICES"]:
        add(cap, steps("pfedhn", p["UPDATES"], k))
    same = p["LOCAL_STEPS"] in p["STEP_CHOICES"] and 3 in p["HN_DEPTHS"]
    add((len(p["EMBED_DIMS"]) + len(p["HN_DEPTHS"]) - same) * cap, one)
    # Table 4: two spectral-norm arms per client count (plain pFedHN is Table 1's); App. C.5: two arms
    add(2 * len(p["SPECTRAL_CLIENT_COUNTS"]) * cap, t1("pfedhn"))
    add(2 * cap, one)
    return {
        "runs": runs,
        "steps": total,
        "datasets": list(p["DATASETS"]),
        "clients": {"Table 1": list(p["CLIENT_COUNTS"]), "Table 2": p["BUDGET_CLIENTS"],
                    "Figures 2/7": p["NOVEL_TRAIN"], "Figure 4": p["COARSE_CLIENTS"]},  # fmt: skip
        "rounds": {"Table 1": p["CLIENT_UPDATES"], "elsewhere": p["UPDATES"]},  # client updates of a run
        "seeds": {"pilot": pilot, "cap": cap},
        "note": "Tables 1 and 2 on every dataset, the other sections on the first; every planned arm at the seed "
                "cap (Table 1: both hypernetworks and a pFedMe-priced strongest baseline), extensions at "
                "EXTEND_CAP; Proposition 1 (synthetic) and single-update measurements not counted",
    }  # fmt: skip
