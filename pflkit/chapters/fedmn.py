"""The FedMN chapter's experiment: its probes and measurements (what the router decides, whether a
client's own decision serves it better than another group's: the swap test; how far the decisions
follow the clients' groups), the runs' configs, arms, sweeps and seed plans, and the paper profile's
cost.  Data in, results out: nothing here writes the page.  The claims computed from these results
are in :mod:`pflkit.chapters.fedmn_claims`, what the page says in :mod:`pflkit.chapters.fedmn_page`."""

from __future__ import annotations

import dataclasses
import functools
import json

import numpy as np
import pandas as pd
import torch
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import adjusted_rand_score

from ..engine import Federation
from ..errors import PflkitError
from ..methods import get_method
from ..methods.fedmn import build_net, pretrain_rounds
from ..models import build_model
from .fedmn_probes import decision_swap_accuracy, oracle_decisions


def shape_of(cfg) -> tuple[tuple, int]:
    """A config's dataset's image shape and class count (Fashion-MNIST's: (1, 28, 28) and 10).
    Used in *Table II in full* and *Figure 2 in full* (the models' sizes)."""
    from ..federation import dataset

    ds = dataset(cfg.dataset)
    return tuple(ds.input_shape), ds.n_classes


def modular_net(cfg, shape=None, classes: int | None = None):
    """FedMN's network for a config, as its clients build it (no run): for parameter counts; ``shape``
    and ``classes`` default to the config's dataset's (:func:`shape_of`).
    Used in *Table II in full* and *Figure 2 in full*."""
    if shape is None or classes is None:
        shape, classes = shape_of(cfg)
    return build_net(build_model(cfg.model, shape, classes), cfg, get_method("fedmn").resolve_options(cfg.options))


def dominant_group(fed) -> tuple[np.ndarray, np.ndarray]:
    """On FedEM's label-cluster split: each client's label cluster (the group of classes holding most
    of its training images) and its share of images in every cluster (clients × clusters).
    Used in *The split and the rounds*, *The routing decisions* and the departures section."""
    counts = fed.partition.class_counts(fed.ds.y_train.numpy())
    by_group = np.stack([counts[:, g].sum(1) for g in fed.partition.params["class_groups"]], axis=1)
    return by_group.argmax(1), by_group / by_group.sum(1, keepdims=True)


def client_groups(fed) -> np.ndarray:
    """Each client's group: its dominant label cluster (label-cluster split), its concept group
    (concept shift), or on the natural split (FEMNIST's writers, no label clusters) the client itself.
    Used by the probes' swap test (:func:`run_groups`) in every section that runs FedMN."""
    if "class_groups" in fed.partition.params:
        return dominant_group(fed)[0]
    if fed.partition.protocol == "natural":
        return np.arange(fed.partition.n_clients)
    return np.asarray(fed.partition.params["groups"])


_GROUPS: dict[str, np.ndarray] = {}  # a run's clients' groups, by its config: a probe builds its federation once


def run_groups(cfg) -> np.ndarray:
    """:func:`client_groups` of the federation a run's config builds, built once per config (the
    probes ask every evaluated round).  Used by the probes of every section that runs FedMN."""
    key = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
    if key not in _GROUPS:
        _GROUPS[key] = client_groups(Federation.from_config(cfg))
    return _GROUPS[key]


def swap_partners(groups) -> dict[int, int]:
    """For the swap test: each client's partner, the next client round the federation whose group
    differs (itself when every client is in one group).
    Used by the probes (Table II's mechanism) and the oracle of *What the router reads*."""
    n = len(groups)
    return {i: next(((i + k) % n for k in range(1, n) if groups[(i + k) % n] != groups[i]), i) for i in range(n)}


def routing_probe(rnd, row, server, clients):
    """After FedMN's last round: every client's evaluation decision (path weights, Π), its active
    blocks, and the swap test (its accuracy with its own decision and with its partner's, on the same
    network).  None for other methods, other rounds, or while the encoders still pretrain.
    Recorded in Table II, *The routing decisions*, the departures and *Beyond the paper*."""
    if server.cfg.method != "fedmn" or rnd != server.cfg.rounds:
        return None
    out = {"paths": [], "pi": [], "active": []}
    for i, c in enumerate(clients):
        model = c.eval_model(server.eval_message(i))
        if not hasattr(model, "c"):  # still pretraining: no decision yet
            return None
        with torch.no_grad():
            pi = torch.sigmoid(c.model.router.logits(*c.data.split("train")))
        out["paths"].append([round(v, 4) for v in model.c.tolist()])
        out["pi"].append([round(v, 4) for v in pi.tolist()])
        out["active"].append([int(a) for row_ in c.model.active(model.c) for a in row_])
    tested = [c for c in clients if len(c.data.test_idx)]  # a client without test images has no swap test
    within = swap_partners(run_groups(server.cfg)[[c.cid for c in tested]])
    partner = {c.cid: tested[within[k]].cid for k, c in enumerate(tested)}
    out["swap"] = [[round(a, 4), round(b, 4)] for a, b in decision_swap_accuracy(server, tested, partner).values()]
    return out


def cfl_probe(rnd, row, server, clients):
    """CFL's split criterion every evaluated round (Sattler et al., Algorithm 1): per cluster that reported,
    the norm of its size-weighted mean update (split only below ε₁) and its largest client update's
    (split only above ε₂), and the number of clusters.
    Recorded by CFL's runs in Table II; read in *Table II in full*."""
    if rnd == 0 or server.cfg.method != "cfl":
        return None
    return {"norms": [[round(a, 4), round(b, 4)] for a, b in server.norms], "clusters": len(server.clusters)}


def router_probe(rnd, row, server, clients):
    """:func:`routing_probe`, and what the router reads and says on every evaluated routing round:
    ``gap``, the mean distance between the label clusters' means of the clients' mean normalised
    embeddings (h's input, eq. 9; from the switch to routing on); ``label_share``, the labels' share of an embedding's squared
    norm (mean over clients); ``g_sd``, the spread of the logits G over the clients (standard
    deviation per path, mean over the paths; unrounded).  At the last round also the oracle
    (:func:`pflkit.chapters.fedmn_probes.oracle_decisions`: per client, its test accuracy with the
    router's decision, the best common one, its own cluster's and its swap partner's cluster's).
    Recorded in Table II, *The routing decisions*, *What the router reads* and the departures."""
    if server.cfg.method != "fedmn" or row is None or rnd < pretrain_rounds(server.cfg, server.opt):
        return None  # from the switch on: φ_x has just been copied from encoder 0 at the switch
    for i, c in enumerate(clients):
        c.eval_model(server.eval_message(i))  # the global θ, router included, as the evaluation loaded it
    groups = run_groups(server.cfg)
    embeds, shares, logits = [], [], []
    with torch.no_grad():
        for c in clients:
            x, y = c.data.split("train")
            e, share = c.model.router.inputs(x, y)
            embeds.append(e)
            shares.append(share)
            logits.append(c.model.router.logits(x, y))
    embeds = torch.stack(embeds)
    means = [embeds[torch.as_tensor(groups == g)].mean(0) for g in sorted(set(groups.tolist()))]
    gaps = [float((a - b).norm()) for i, a in enumerate(means) for b in means[i + 1 :]]
    out = {"gap": float(np.mean(gaps)) if gaps else 0.0, "label_share": float(np.mean(shares)),
           "g_sd": float(torch.stack(logits).std(0, unbiased=False).mean())}  # fmt: skip
    if getattr(server, "apart_sd", None) is not None:  # decisions started apart: their spread as started
        out["g_sd_apart"] = server.apart_sd
    if rnd == server.cfg.rounds:
        out |= routing_probe(rnd, row, server, clients)
        partner = swap_partners(groups)
        out["oracle"] = [
            [round(a, 4) for a in accs] for accs in oracle_decisions(server, clients, groups, partner).values()
        ]
    return out


ORACLE = ("router's decision", "best common", "own cluster's", "partner cluster's")  # the oracle's columns


def router_trace(result, arm: str) -> pd.DataFrame:
    """:func:`router_probe`'s per-round record of every seed of ``arm``: seed, round, gap, label
    share and the logits' spread over clients.  A run whose decisions started apart (``start_apart``)
    has at the switch the spread as the server set it apart (its router before that is the plain run's).
    Used in *What the router reads* (its table and figure)."""
    rows = []
    for a, s in result.records:
        if a != arm:
            continue
        probes = [(r, p) for r, p in sorted(result.probes(a, s).items()) if p and "g_sd" in p]
        apart = next((p["g_sd_apart"] for _, p in probes if "g_sd_apart" in p), None)
        for i, (r, p) in enumerate(probes):
            row = {"seed": s, "round": r, **{k: p[k] for k in ("gap", "label_share", "g_sd")}}
            rows.append(row | ({"g_sd": apart} if i == 0 and apart is not None else {}))
    return pd.DataFrame(rows, columns=["seed", "round", "gap", "label_share", "g_sd"])


def oracle_table(result, arm: str) -> pd.DataFrame:
    """Per seed of ``arm``: the oracle's four mean client test accuracies (%, :data:`ORACLE`).
    Used in *What the router reads*."""
    rows = {}
    for a, s in result.records:
        p = result.probes(a, s).get(result[a, s]["config"]["rounds"]) if a == arm else None
        if p and "oracle" in p:
            rows[s] = dict(zip(ORACLE, 100 * np.asarray(p["oracle"], dtype=float).mean(0)))
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(ORACLE)).rename_axis("seed")


def swap_gain(result, arm: str, rounds: int) -> pd.Series:
    """Per seed: the mean over clients of own − swapped decision accuracy (points), from the probe.
    Used in Table II (its mechanism and seed plan), *What the router reads* and *Beyond the paper*."""
    out = {}
    for s in result.seeds:
        p = result.probes(arm, s).get(rounds) if (arm, s) in result.records else None
        if p and "swap" in p:
            out[s] = 100 * float(np.mean([own - other for own, other in p["swap"]]))
    return pd.Series(out, dtype=float)


def pi_spread(result, arm: str, seed: int, rounds: int) -> float:
    """How far the router personalises: the spread (standard deviation) of Π over the clients, per
    path, averaged over the paths.  Used in *The routing decisions* and the departures section."""
    return float(np.array(result.probes(arm, seed).get(rounds)["pi"]).std(0).mean())


def decision_ari(paths, truth, k: int) -> float:
    """The adjusted Rand index between a clustering of the clients' path weights into k groups and
    the groups ``truth``; NaN (nothing to cluster: the seed counts neither way) when every client has
    the same decisions.  Used in *The routing decisions*, the departures section and *Beyond the paper*."""
    paths = np.asarray(paths)
    distinct = len({tuple(r) for r in paths})
    if distinct < 2:
        return float("nan")
    return adjusted_rand_score(truth, AgglomerativeClustering(n_clusters=min(k, distinct)).fit_predict(paths))


# ------------------------------------------------------------------------ the sections' tables and measurements


def common_seed_means(values: dict) -> tuple[pd.Series, list]:
    """Each arm's mean over the seeds every arm ran (``values``: arm → per-seed Series), highest first,
    and those seeds.  Used in *Table II in full*."""
    common = sorted(set.intersection(*(set(v.dropna().index) for v in values.values())))
    means = pd.Series({a: float(v[common].mean()) for a, v in values.items()})
    return means.sort_values(ascending=False), common


def with_paper(table: pd.DataFrame, pub: pd.DataFrame, rename: dict) -> pd.DataFrame:
    """``table`` (rows: our arms) with the paper's numbers beside it, a column "paper <dataset>" per
    column of ``pub`` (rows: the paper's methods); ``rename`` maps our arm to the paper's row name;
    missing rows are NaN (a page shows "—").  Used in Table II (:func:`table2_table`)."""
    out = table.copy()
    for d in pub.columns:
        out[f"paper {d}"] = [pub[d].get(rename.get(a, a), np.nan) for a in out.index]
    return out


def routing_row(probe: dict, groups, k: int, swap: float) -> dict:
    """One seed's row of the routing table from the routing probe at the last round (``probe``: its
    ``paths``, ``pi`` and ``active``), the clients' groups and that seed's swap test (points).
    Used in *The routing decisions*."""
    paths, active, pi = (np.asarray(probe[key]) for key in ("paths", "active", "pi"))
    return {
        "distinct architectures": len({tuple(a) for a in active}),
        "blocks in use (share)": round(float(active.mean()), 2),
        "Π over the paths": f"{pi.min():.3f} to {pi.max():.3f}",
        "Π's spread over clients": round(float(pi.std(0).mean()), 4),
        "swap test (points)": round(swap, 1),
        "ARI (path weights vs label cluster)": round(decision_ari(paths, groups, k), 3),
    }


def step_row(probe: dict, accuracy: float, every_batch: bool) -> dict:
    """One run's row of the router-step table from its last round's routing probe.
    Used in *The routing decisions*."""
    active, pi = np.asarray(probe["active"]), np.asarray(probe["pi"])
    return {
        "router step": "every batch" if every_batch else "once a round",
        "distinct architectures": len({tuple(r) for r in active}),
        "blocks in use (share)": float(active.mean()),
        "Π lowest": float(pi.min()),
        "Π highest": float(pi.max()),
        "Π's spread over clients": float(pi.std(0).mean()),
        "mean client accuracy (%)": accuracy,
    }


STEP_FORMATS = {"distinct architectures": "{:.3g}", "blocks in use (share)": "{:.2f}", "Π lowest": "{:.3f}",
                "Π highest": "{:.3f}", "Π's spread over clients": "{:.4f}", "mean client accuracy (%)": "{:.1f}"}  # fmt: skip


def step_table(rows: list[dict], formatted: bool = True) -> pd.DataFrame:
    """The router-step table: :func:`step_row`'s rows averaged per way of stepping; ``formatted``, each
    column as text at the digits it is read at (:data:`STEP_FORMATS`).  Used in *The routing decisions*."""
    table = pd.DataFrame(rows).groupby("router step").mean()
    if not formatted:
        return table
    return pd.DataFrame({c: table[c].map(STEP_FORMATS[c].format) for c in table.columns})


def f2_diffs(values: dict, mn_of: dict, fedavg: dict, flat: dict, routing: str) -> dict:
    """Figure 2's paired differences per claim, per seed (``values``: arm → per-seed Series): per block
    count b, FedMN (the mean of its arrangements ``mn_of[b]``) − the FedAvg MLP ``fedavg[b]``; and under
    ``routing``, each block count's first arrangement − the same network without routing ``flat[b]``,
    mean over the block counts.  Each on the seeds all its arms ran."""

    def common(arms):
        return sorted(set.intersection(*(set(values[a].index) for a in arms)))

    out = {}
    for b, archs in mn_of.items():
        seeds = common([*archs, fedavg[b]])
        out[f"{b} blocks"] = pd.Series(
            {s: np.mean([values[a][s] for a in archs]) - values[fedavg[b]][s] for s in seeds}
        )
    seeds = common([x for b in mn_of for x in (mn_of[b][0], flat[b])])
    out[routing] = pd.Series({s: np.mean([values[mn_of[b][0]][s] - values[flat[b]][s] for b in mn_of]) for s in seeds})
    return out


def routing_table(result, arm: str, seeds, groups: dict, k: int, rounds: int) -> pd.DataFrame:
    """Per seed of ``arm``: :func:`routing_row` from its routing probe after its last round, the
    clients' groups ``groups[seed]`` and its swap test (:func:`swap_gain` at ``rounds``).
    Used in *The routing decisions*."""
    swap = swap_gain(result, arm, rounds)
    rows = []
    for s in seeds:
        probe = result.probes(arm, s).get(result[arm, s]["config"]["rounds"])
        rows.append({"seed": s, **routing_row(probe, groups[s], k, float(swap.get(s, np.nan)))})
    return pd.DataFrame(rows).set_index("seed")


def ari_table(result, arms, groups: dict, k: int, rounds: int) -> pd.DataFrame:
    """Per seed that every one of ``arms`` ran: the ARI of each arm's path weights after ``rounds``
    against the clients' groups ``groups[seed]`` (:func:`decision_ari`; NaN without a probe).
    Used in the departures section (*The paper against four departures of the authors' code*)."""
    seeds = [s for s in result.seeds if all((a, s) in result.records for a in arms)]

    def ari(a, s):
        p = result.probes(a, s).get(rounds)
        return decision_ari(p["paths"], groups[s], k) if p else float("nan")

    return pd.DataFrame({a: {s: ari(a, s) for s in seeds} for a in arms}).rename_axis("seed")


def fig2_points(fin: pd.DataFrame, fedavg: dict, flat: dict, mn_of: dict) -> pd.DataFrame:
    """Figure 2's points from the runs' finals (``fin``: arm, seed, mean_acc, MB_up, MB_down): per arm its
    method, block count, parameters transmitted (both directions, float32: bytes / 4, in M) and mean
    accuracy, means over its seeds.  ``fedavg``, ``flat``: block count → arm; ``mn_of``: block count →
    FedMN's arms."""
    fin = fin.assign(**{"parameters transmitted (M)": (fin["MB_up"] + fin["MB_down"]) / 4})
    blocks = {**{n: b for b, n in fedavg.items()}, **{n: b for b, n in flat.items()},
              **{a: b for b, arms in mn_of.items() for a in arms}}  # fmt: skip
    fin["blocks"] = fin.arm.map(blocks)
    fin["method"] = np.select([fin.arm.str.endswith("no routing"), fin.arm.str.startswith("FedMN")],
                              ["FedMN, no routing", "FedMN"], "FedAvg")  # fmt: skip
    return fin


def model_sizes(cfg) -> dict:
    """The parameters of FedMN's network for ``cfg`` (encoders, blocks and router; the pretraining
    heads apart), of its router, and of the baselines' model (:func:`modular_net`).
    Used in *Table II in full*."""
    net = modular_net(cfg)
    return {
        "FedMN": sum(p.numel() for n, p in net.named_parameters() if not n.startswith("pre_heads")),
        "router": sum(p.numel() for p in net.router.parameters()),
        "model": sum(p.numel() for p in build_model(cfg.model, *shape_of(cfg)).parameters()),
    }


def whole_ratio(cfgs: list, mlps: list, rounds: int, pretrain_fraction: float) -> float:
    """From the sizes alone (no run): the parameters FedMN's architectures (``cfgs``) would move each
    way over ``rounds`` with every block active (pretraining rounds: the encoders and their heads;
    routing rounds: encoders, router and blocks), mean over the architectures, against the mean of the
    FedAvg MLPs ``mlps`` (model names) sent whole every round: the same ratio of means as the runs'.
    Used in *Figure 2 in full*."""

    def all_blocks(cfg):
        net = modular_net(cfg)
        size = {part: sum(p.numel() for n, p in net.named_parameters() if n.startswith(part))
                for part in ("encoders", "pre_heads", "blocks", "router")}  # fmt: skip
        k = int(pretrain_fraction * rounds)
        return k * (size["encoders"] + size["pre_heads"]) + (rounds - k) * (
            size["encoders"] + size["router"] + size["blocks"]
        )

    mlp = [rounds * sum(p.numel() for p in build_model(m, *shape_of(cfgs[0])).parameters()) for m in mlps]
    return float(np.mean([all_blocks(c) for c in cfgs]) / np.mean(mlp))


# --------------------------------------------------------------- the runs: configs, arms, sweeps and seed plans


ACC = "mean client accuracy (%)"  # our tables' accuracy column
# the four departures of the authors' code (FedMN's options), each one arm, and all four together
CODE_OPTIONS = {"router frozen": {"router_grad": 0}, "softmax decisions": {"decisions": "softmax"},
                "no annealing": {"anneal": 0}, "shared modules": {"shared_modules": 1}}  # fmt: skip
CODE_OPTIONS["all four together"] = {k: v for o in list(CODE_OPTIONS.values()) for k, v in o.items()}


def config_factory(options: dict, *, rounds: int, evals: int, **split):
    """``config(method, rounds=..., **fields)``: a run on FedEM's label-cluster split (of Fashion-MNIST
    unless ``split`` names a dataset and partition), every client in every round, one local epoch,
    ``evals`` evaluations, the method's entry of ``options`` (read when called: a later change shows),
    the ``split`` fields (clients, images, batch, learning rate, ...), then ``fields``.  CFL never
    splits in the first fifth of the run's rounds.
    Used by every section (the notebook's ``config``, :func:`dataset_configs`)."""
    from ..engine import RunConfig

    split = {"dataset": "fashion-mnist", "partition": "label-clusters"} | split

    def config(method: str, *, rounds: int = rounds, **fields):
        opts = options.get(method, {}) | ({"warmup": max(1, rounds // 5)} if method == "cfl" else {})
        base = RunConfig(method=method, rounds=rounds, local_epochs=1, eval_every=max(1, rounds // evals),
                         options=opts, **split)  # fmt: skip
        return dataclasses.replace(base, **fields)

    return config


# ----------------------------------------------- Table II on each dataset (the paper profile: the paper's four)


# the paper's name of each dataset the kit loads (its Table II's columns)
PAPER_NAMES = {"cifar10": "CIFAR10", "cifar100": "CIFAR100", "emnist-byclass": "EMNIST", "femnist": "FEMNIST"}
# training images of the paper's datasets (the kit's training split; FEMNIST: LEAF's, about 3,500 writers)
TRAIN_SIZES = {"cifar10": 50_000, "cifar100": 50_000, "emnist-byclass": 697_932, "femnist": 805_263,
               "fashion-mnist": 60_000}  # fmt: skip
LEAF_WRITERS = {"femnist": 3_500}


DRY_VAL_FRACTION = 0.5  # the dry run's validation share (EMNIST's fixture: 6 training images a class)


def dry_run() -> bool:
    """The paper profile's dry run (:func:`pflkit.profiles.dry` at `paper`): fixture data.
    Used by :func:`split_fields` (Table II on each dataset)."""
    from ..profiles import current, dry

    return current() == "paper" and dry()


def split_fields(name: str, row: tuple, images: tuple, cap: int | None = None) -> dict:
    """A dataset's run fields from its parameters row ``(clients, label clusters, share of the images,
    model, arch)``: FedEM's label-cluster split with that many clusters, or with 0 the natural split (one
    client per writer, at most the dataset's writers); ``images``: stratified train / test subsets (None:
    the share of the dataset's, FedEM's subsample); ``cap``: at most this many clients (the dry run, whose
    fixtures also need a larger validation share: :data:`DRY_VAL_FRACTION`).
    Used by Table II on each dataset (:func:`dataset_configs`)."""
    from ..federation import dataset

    clients, clusters, share, model, _arch = row
    fields = {"dataset": name, "model": model}
    if clusters:
        fields |= {"partition": "label-clusters", "label_clusters": clusters}
    else:  # the writers themselves: a random sample of them per seed
        fields["partition"] = "natural"
        clients = min(clients, len(dataset(name).info["users"]))
    if dry_run():  # the fixtures' few images a class: a tenth of them rounds to no validation image
        fields["val_fraction"] = DRY_VAL_FRACTION
    train, test = images
    if share < 1 and train is None:  # FedEM's subsample of the dataset (its s_frac)
        ds = dataset(name)
        train, test = round(share * len(ds.y_train)), round(share * len(ds.y_test))
    return fields | {"clients": min(clients, cap or clients), "train_images": train, "test_images": test}


def dataset_configs(datasets, splits: dict, options: dict, *, images: tuple, cap: int | None, **fields) -> dict:
    """Per dataset: ``(config, options)``, :func:`config_factory` on its :func:`split_fields` and
    ``fields``.  The first dataset's config reads ``options`` itself (later sections change it there);
    every other gets a copy with its own FedMN architecture and FedEM's components (= its n_1).
    Used by Table II, a config per dataset; the sections after it run on the first."""
    out = {}
    for i, name in enumerate(datasets):
        arch = splits[name][4]
        opts = options if i == 0 else options | {
            "fedmn": options["fedmn"] | {"arch": arch}, "fedem": options["fedem"] | {"components": int(arch.split(",")[0])}}  # fmt: skip
        out[name] = (config_factory(opts, **split_fields(name, splits[name], images, cap), **fields), opts)
    return out


def pub_for(pub: pd.DataFrame, name: str) -> pd.DataFrame:
    """The paper's Table II for a dataset: its column when the paper has it, else every column (the
    book's Fashion-MNIST sits beside all four)."""
    return pub[[PAPER_NAMES[name]]] if name in PAPER_NAMES else pub


def diverged_everywhere(configs: dict, values, seeds, store) -> list[str]:
    """The labels of ``configs`` whose every learning rate of ``values`` diverged on some of ``seeds``:
    the runs of the pilot's first grid (:func:`pflkit.tuning.tune_axis` reads them back from ``store``).
    Used by Table II's pilot (:func:`table2_on`)."""
    from ..experiments import sweep
    from ..tuning import grid

    grids = {label: grid(label, cfg, lr=sorted(values)) for label, cfg in configs.items()}
    result = sweep({a: c for g in grids.values() for a, c in g.items()}, seeds, store)
    return [label for label, g in grids.items() if all(result.values(a, "diverged").astype(bool).any() for a in g)]


def table2_on(config, options: dict, pub: pd.DataFrame, v: dict):
    """Table II on one dataset (its ``config`` and ``options``), as the chapter runs it: the learning-rate
    pilot of every method of ``v["TABLE2_METHODS"]``, FedMN's router step size at its chosen rate (set in
    ``options["fedmn"]``), the arms with *FedMN, no routing*, the seed plan's pilot on ``v["SEEDS"]``, the
    plan, and the arms on their planned seeds (a diverging rate falls back to the pilot's best smaller
    one; a baseline that diverges at every rate of the grid is left out, :func:`diverged_everywhere`).  ``v``: the notebook's parameters (SEEDS, PILOT_SEEDS, ROUNDS, PILOT_ROUNDS, LR_GRID,
    ROUTER_LR_GRID, CFL_EPS1_GRID, LR_EXTEND, RESOLUTION, TABLE2_RUN, NO_ROUTE, SWAP, STORE, PAPER_ROW; CFL's
    split threshold ε₁ is chosen on validation at CFL's rate and set in ``options["cfl"]``); ``pub``: the
    paper's Table II beside it (:func:`pub_for`).  Returns a namespace of what later cells read."""
    from types import SimpleNamespace

    from ..experiments import sweep_stable, tune_axis
    from ..methods import display_name

    methods, store, rounds, pilot_rounds = v["TABLE2_METHODS"], v["STORE"], v["ROUNDS"], v["PILOT_ROUNDS"]
    pilots = {display_name(m): config(m, rounds=pilot_rounds, eval_every=pilot_rounds) for m in methods}
    # a baseline that diverges at every rate of the grid is left out, with a line saying so (the pilot's own runs)
    left_out = diverged_everywhere(pilots, v["LR_GRID"], v["PILOT_SEEDS"], store)
    if needed := set(left_out) & {"FedMN", "FedEM", "FedAvg", "FedAvg + FT"}:
        raise PflkitError(
            f"{', '.join(sorted(needed))} diverged at every learning rate of {v['LR_GRID']}: lower the grid"
        )
    methods = [m for m in methods if display_name(m) not in left_out]
    pilot = tune_axis({label: c for label, c in pilots.items() if label not in left_out}, "lr", v["LR_GRID"],
                      v["PILOT_SEEDS"], store, extend=v["LR_EXTEND"])  # fmt: skip
    lr = {m: pilot.config(display_name(m)).lr for m in methods}
    router_pilot = tune_axis({"FedMN, router step": config("fedmn", rounds=pilot_rounds, eval_every=pilot_rounds,
                                                           lr=lr["fedmn"])},
                             "router_lr", v["ROUTER_LR_GRID"], v["PILOT_SEEDS"], store, extend=v["LR_EXTEND"])  # fmt: skip
    router_lr = router_pilot.config("FedMN, router step").options["router_lr"]
    fedmn = options["fedmn"] = {**options["fedmn"], "router_lr": router_lr}  # every FedMN run on this dataset
    cfl_pilot = None  # CFL's split threshold ε₁ on validation at its chosen rate: a grid as large as the router step's
    if "cfl" in lr and v.get("CFL_EPS1_GRID"):
        cfl_pilot = tune_axis({"CFL, split threshold": config("cfl", rounds=pilot_rounds, eval_every=pilot_rounds,
                                                              lr=lr["cfl"])},
                              "eps1", v["CFL_EPS1_GRID"], v["PILOT_SEEDS"], store, extend=v["LR_EXTEND"])  # fmt: skip
        options["cfl"] = {**options["cfl"], "eps1": cfl_pilot.config("CFL, split threshold").options["eps1"]}
    arms = {display_name(m): config(m, lr=lr[m]) for m in methods}
    arms[v["NO_ROUTE"]] = config("fedmn", lr=lr["fedmn"], options={**fedmn, "force_paths": 1})
    tunings = {a: (pilot, a) for a in arms if a in pilot.grids}
    # FedMN's run records what its router reads and decides every evaluated round, the others the routing probe
    probes = {a: {"FedMN": router_probe, "CFL": cfl_probe}.get(a, routing_probe) for a in arms}
    t2, fallbacks = sweep_stable(arms, v["SEEDS"], store, tunings, probe=probes)  # the seed plan's pilot
    baselines = [a for a in arms if a not in ("FedMN", v["NO_ROUTE"])]
    best = t2.select(baselines, by="val_mean_acc")  # on the pilot seeds' validation
    best_other = t2.select([a for a in baselines if a != "FedEM"], by="val_mean_acc")
    claims = {"FedMN − strongest baseline": ("FedMN", best), "FedEM − strongest other": ("FedEM", best_other),
              "FedAvg + FT − FedAvg": ("FedAvg + FT", "FedAvg"), "FedMN − no routing": ("FedMN", v["NO_ROUTE"])}  # fmt: skip
    plan, seeds = table2_seeds(t2, claims, v["SWAP"], arms, v["SEEDS"], rounds, resolution=v["RESOLUTION"],
                               run=v["TABLE2_RUN"])  # fmt: skip
    t2, fallbacks = sweep_stable(arms, seeds, store, tunings, probe=probes)
    fallbacks = {
        a: f"diverged at every learning rate of the pilot ({v['LR_GRID']}): left out" for a in left_out
    } | fallbacks
    lr.update({m: t2[display_name(m), v["SEEDS"][0]]["config"]["lr"] for m in methods})  # what later runs use
    return SimpleNamespace(pilot=pilot, router_pilot=router_pilot, router_lr=router_lr, fedmn=fedmn, arms=arms,
                           cfl_pilot=cfl_pilot, cfl=options.get("cfl", {}),
                           t2=t2, fallbacks=fallbacks, best=best, best_other=best_other, plan=plan, seeds=seeds, lr=lr,
                           fedmn_t2=dataclasses.replace(arms["FedMN"], lr=lr["fedmn"]),
                           table=table2_table(t2, pub, v["PAPER_ROW"]))  # fmt: skip


# ----------------------------------------------------------------------------- the paper profile's cost


CONCEPT_ARMS = 5  # the concept-shift section: Local, FedAvg, FedEM, FedMN and FedMN, no routing


def round_steps(name: str, row: tuple, batch: int, val_fraction: float = 0.1) -> int:
    """Local optimiser steps of one round on a dataset (every client, one epoch): clients × ⌈images a
    client trains on / batch⌉, from the dataset's training images (:data:`TRAIN_SIZES`; FedEM's share of
    them; on FEMNIST its writers' share of LEAF's images) less the validation share.  For :func:`paper_cost`."""
    clients, _clusters, share, _model, _arch = row
    images = TRAIN_SIZES[name] * share
    if name in LEAF_WRITERS:  # a sample of the writers: their share of the images
        images *= clients / LEAF_WRITERS[name]
    return clients * int(np.ceil(images * (1 - val_fraction) / clients / batch))


def table2_cost(p: dict, name: str) -> tuple[int, int]:
    """Runs and optimiser steps of Table II on one dataset at the parameters ``p`` (upper bounds): the
    learning-rate pilot of every method and the router's step-size pilot, each grid one value longer (the
    edge rule adds at most one), on the pilot seeds; every arm (the methods and FedMN, no routing) at the
    seed cap ``TABLE2_RUN``.  For :func:`paper_cost`."""
    per_round = round_steps(name, p["SPLITS"][name], p["BATCH"])
    pilot = (len(p["TABLE2_METHODS"]) * (len(p["LR_GRID"]) + p["LR_EXTEND"])
             + len(p["ROUTER_LR_GRID"]) + p["LR_EXTEND"]) * len(p["PILOT_SEEDS"])  # fmt: skip
    arms = (len(p["TABLE2_METHODS"]) + 1) * p["TABLE2_RUN"]
    return pilot + arms, (pilot * p["PILOT_ROUNDS"] + arms * p["ROUNDS"]) * per_round


def notes_cost(p: dict) -> tuple[int, int]:
    """Runs and optimiser steps of the sections after Table II, on the first dataset (upper bounds):
    the router stepping once a round (on ``SEEDS``), the router section's two more FedMN runs (at the
    seed cap), Figure 2 (its pilot per block count, FedAvg's MLP and FedMN's first arrangement; its arms:
    FedAvg, every arrangement and the first without routing), the departures of the authors' code (the
    paper's FedMN and five arms) and the concept shift (iid clients of every training image).
    For :func:`paper_cost`."""
    first = p["DATASETS"][0]
    per_round = round_steps(first, p["SPLITS"][first], p["BATCH"])
    grid, pilots, archs = len(p["LR_GRID"]) + p["LR_EXTEND"], len(p["PILOT_SEEDS"]), p["FIG2_ARCHS"]
    concept_row = (p["CONCEPT_CLIENTS"], 0, 1.0, "", "")
    parts = [  # (runs, rounds, steps a round)
        (len(p["SEEDS"]), p["ROUNDS"], per_round),
        (2 * p["TABLE2_RUN"], p["ROUNDS"], per_round),
        (2 * len(archs) * grid * pilots, p["FIG2_ROUNDS"], per_round),
        (sum(len(a) + 2 for a in archs.values()) * p["FIG2_RUN"], p["FIG2_ROUNDS"], per_round),
        ((len(CODE_OPTIONS) + 1) * p["CODE_RUN"], p["CODE_ROUNDS"], per_round),
        (CONCEPT_ARMS * p["CONCEPT_RUN"], p["CONCEPT_ROUNDS"], round_steps(first, concept_row, p["BATCH"])),
    ]
    return sum(n for n, _, _ in parts), sum(n * r * s for n, r, s in parts)


def paper_cost(p: dict) -> dict:
    """The paper profile's runs and optimiser steps in all (``p``: the parameters cell's values at
    `paper`, :func:`pflkit.paper.parameters`): Table II on every dataset (:func:`table2_cost`) and the
    sections after it on the first (:func:`notes_cost`).
    Read by the book's execution report (:func:`pflkit.paper.cost`), not by the page."""
    per = [table2_cost(p, d) for d in p["DATASETS"]] + [notes_cost(p)]
    return {
        "runs": sum(r for r, _ in per), "steps": sum(s for _, s in per), "datasets": list(p["DATASETS"]),
        "clients": {d: p["SPLITS"][d][0] for d in p["DATASETS"]}, "rounds": p["ROUNDS"], "seeds": p["TABLE2_RUN"],
        "note": "Table II on every dataset (pilots on their grids, one value longer; every arm at the seed cap), the "
                "laboratory notes on the first; a step is a local batch (pFedMe's inner steps and FedAvg+'s fine-tuning "
                "before each evaluation not counted)",
    }  # fmt: skip


# ------------------------------------------------------- the notebook's plumbing: federations, seed plans, arms


def federations(config):
    """``fed_of(seed)``: the label-cluster federation of a seed (every method shares it on that seed),
    built once per seed from ``config("fedavg", seed=seed)``.
    Used in *The split and the rounds*, *The routing decisions* and the departures section."""
    return functools.cache(lambda seed: Federation.from_config(config("fedavg", seed=seed)))


def table2_seeds(result, claims: dict, swap: str, arms: dict, seeds, rounds: int, *, resolution: float, run: int):
    """Table II's seed plan from its pilot seeds (``result``): the paired differences of ``claims``
    (name → (a, b)) pooled, the swap test (named ``swap``) on its own; and the seeds each arm runs, at
    most ``run``.  Where the pilot already finds the swap test inert, the headline's plan adds none; the
    headline's arms run :data:`~pflkit.verdicts.HEADLINE_SEEDS` at least, within ``run``."""
    from ..verdicts import HEADLINE_SEEDS, SEED_CAP, arm_seeds, seed_plan, verdict

    swaps = list(swap_gain(result, "FedMN", rounds))
    plan = pd.concat([
        seed_plan({k: list(result.paired(a, b)) for k, (a, b) in claims.items()}, cap=SEED_CAP, resolution=resolution),
        seed_plan({swap: swaps}, cap=SEED_CAP, pool=False, resolution=resolution),
    ])  # fmt: skip
    inert = verdict(swaps, resolution=resolution).word in ("no difference", "contradicted")
    to_run = {k: v for k, v in claims.items() if not (inert and k == "FedMN − strongest baseline")}
    floor = {"the headline's floor": claims["FedMN − strongest baseline"]}
    planned = arm_seeds(plan, {**to_run, swap: ("FedMN",)} | floor, seeds, arms=arms, cap=SEED_CAP,
                        least=dict.fromkeys(floor, HEADLINE_SEEDS))  # fmt: skip
    return plan, {a: s[:run] for a, s in planned.items()}


def table2_table(result, pub: pd.DataFrame, paper_row: dict) -> pd.DataFrame:
    """Table II: per arm our mean client accuracy, the worst 10 % of the clients' (mean over seeds), seeds,
    whether still improving, the pooled accuracy at the best validation round, and the paper's numbers
    (:func:`with_paper`)."""
    from ..claims import WORST_COLUMN, paper_vs_ours
    from ..verdicts import fmt_interval

    table = paper_vs_ours(result, {}, label="paper")[["ours mean_acc", WORST_COLUMN, "seeds", "still improving"]]
    table = table.rename(columns={"ours mean_acc": ACC})
    pooled = [fmt_interval(result.values(a, "pooled_acc@best_val")) for a in table.index]
    table["pooled accuracy at the best validation round (%)"] = pooled
    return with_paper(table, pub, paper_row)


def fig2_names(archs: dict) -> tuple:
    """Figure 2's arm names from its arrangements (block count → arrangements): the FedAvg MLP and
    FedMN's pilot arm per block count, FedMN's arms per block count, the no-routing control per block
    count (its first arrangement, every path on), the routing claim's name, and each claim's arms."""
    fedavg = {b: f"FedAvg, {b}-layer MLP" for b in archs}
    fedmn = {b: f"FedMN, {b} blocks" for b in archs}
    mn_of = {b: [f"FedMN [{a.replace(',', '×')}]" for a in arrangements] for b, arrangements in archs.items()}
    flat = {b: f"{mn_of[b][0]}, no routing" for b in archs}
    routing = "routing − every path on"
    claim_arms = {f"{b} blocks": [*mn_of[b], fedavg[b]] for b in archs}
    claim_arms[routing] = [x for b in archs for x in (mn_of[b][0], flat[b])]
    return fedavg, fedmn, mn_of, flat, routing, claim_arms


def fig2_arms(fedavg_mlp, fedmn_mlp, archs: dict, lrs: dict) -> dict:
    """Figure 2's arms: per block count the FedAvg MLP, FedMN in every arrangement and its first
    arrangement without routing, each at its pilot's rate (``lrs``: pilot arm → learning rate);
    ``fedavg_mlp(blocks, **fields)`` and ``fedmn_mlp(arrangement, options, **fields)`` make the configs."""
    fedavg, fedmn, *_ = fig2_names(archs)
    arms = {name: fedavg_mlp(b, lr=lrs[name]) for b, name in fedavg.items()}
    arms |= {f"FedMN [{a.replace(',', '×')}]": fedmn_mlp(a, lr=lrs[fedmn[b]]) for b, arrangements in archs.items()
             for a in arrangements}  # fmt: skip
    arms |= {f"FedMN [{a[0].replace(',', '×')}], no routing": fedmn_mlp(a[0], {"force_paths": 1}, lr=lrs[fedmn[b]])
             for b, a in archs.items()}  # fmt: skip
    return arms


def f2_run_diffs(result, mn_of: dict, fedavg: dict, flat: dict, routing: str) -> dict:
    """:func:`f2_diffs` on the arms of ``result`` that ran on some seed.  Used in Figure 2."""
    ran = {a: result.values(a) for a in result.arms if any((a, s) in result.records for s in result.seeds)}
    return f2_diffs(ran, mn_of, fedavg, flat, routing)


def fig2_plan(diffs: dict, routing: str, resolution: float) -> pd.DataFrame:
    """Figure 2's seed plan: FedMN against the MLPs as like claims, one pooled spread; routing (the
    claim ``routing``) on its own scale."""
    from ..verdicts import SEED_CAP, seed_plan

    return pd.concat([
        seed_plan({k: list(v) for k, v in diffs.items() if k != routing}, cap=SEED_CAP, resolution=resolution),
        seed_plan({routing: list(diffs[routing])}, cap=SEED_CAP, pool=False, resolution=resolution),
    ])  # fmt: skip
