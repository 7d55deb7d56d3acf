"""The pFedHN chapter's experiment: its probes and measurements (what each client scores with the models
generated for the others, the swap test of Figure 3; how novel clients fare, Figures 2 and 7; where the
client embeddings go, Figure 4; how far the generated models differ between clients), the datasets, Table 1's
protocol and the runs of every section (Table 1 with its seed plan and headroom split, Table 2's arms, the
tuning pilot's controls), and the paper profile's cost.  The claims drawn from the runs are
:mod:`pflkit.chapters.pfedhn_claims`; what the page says and draws, :mod:`pflkit.chapters.pfedhn_page`."""

from __future__ import annotations

import dataclasses
import math
from functools import partial

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import silhouette_score
from sklearn.neighbors import KNeighborsClassifier

from ..engine import Federation, RunConfig, build
from ..federated import evaluate
from ..methods import get_method
from ..methods.pfedhn import train_novel_embedding
from ..partitions import total_variation
from ..sweeps import worst_clients
from ..tuning import with_tuned
from ..verdicts import arm_seeds, seed_plan
from .pfedhn_probes import swap_accuracy

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
    from a swap matrix (:func:`~pflkit.chapters.pfedhn_probes.swap_accuracy`)."""
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


DATA_LABELS = {"fashion-mnist": "FMNIST", "fashion-mnist-tops": "FMNIST tops", "cifar10": "CIFAR-10",
               "cifar100": "CIFAR-100"}  # the page's names  # fmt: skip


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


# ----------------------------------------------------------------------------- Table 1's seed plan


def paper_t1(paper, n: int, dataset: str = "CIFAR10") -> dict[str, float]:
    """The paper's Table 1 on ``dataset`` (as transcribed: CIFAR10, CIFAR100) at ``n`` clients:
    method → accuracy (%)."""
    d = paper[(paper.table == "Table 1") & (paper.dataset == dataset) & (paper.setting == f"{n} clients")]
    return dict(zip(d.method, d.value))


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


# ----------------------------------------------------------------------------- the notebook's configs and the tuning pilot


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


# ----------------------------------------------------------------------------- the further experiments' measurements


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


def embedding_gradient_ratio(cfg, seed: int) -> float:
    """How large an embedding's gradient is next to φ's: one client's first update, measured
    (nothing else trained): ‖∇φ‖ / ‖∇v_0‖."""
    _, _, server, clients = build(cfg)
    clients[0].generator.manual_seed(seed)
    reply, _ = clients[0].train_round(server.message_for(0, 0), 0)
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


# ----------------------------------------------------------------------------- Table 1's runs and the headroom split's


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


REGIME_ARMS = {"local": "Local", "fedavg": "FedAvg"}  # the regime pilot's arms: Local, FedAvg's global model


def regime_arms(pilot: RunConfig, datasets, images, *, classes: int = 2) -> dict:
    """The regime pilot: Local and FedAvg (:data:`REGIME_ARMS`) as the headroom pilot's Local run ``pilot`` (its
    clients, client updates, evaluations), on ``classes`` classes a client (the paper's two) on every dataset of
    ``datasets`` (e.g. Fashion-MNIST's four confusable tops) × ``images`` per client.  Arms are named
    "<dataset>, <classes> classes, <images> images · <arm>"."""
    return {
        f"{data_label(d)}, {classes} classes, {k} images · {name}": dataclasses.replace(
            pilot, method=m, dataset=d, classes_per_client=classes, train_images=pilot.clients * k
        )
        for d in datasets
        for k in images
        for m, name in REGIME_ARMS.items()
    }


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
