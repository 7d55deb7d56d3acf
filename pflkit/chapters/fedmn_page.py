"""What only the FedMN chapter's page says: its sentences, the tables as it shows them, its figures
and its setup card, from the results and measurements of :mod:`pflkit.chapters.fedmn`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..pages import METRIC_WORDS
from ..verdicts import seeds_text
from .fedmn import ACC, PAPER_NAMES, common_seed_means, router_trace, swap_gain


def cfl_criterion_text(result, arm: str, eps: dict) -> str:
    """What CFL's split criterion read after its warm-up (the runs' own), over the seeds and evaluated
    rounds of ``arm`` (its :func:`cfl_probe`): the two norms' ranges against ε₁ and ε₂, and the most
    clusters it held; "" for runs without the probe.  Used in *Table II in full*."""
    mean, most, clusters, warmup = [], [], [], 0
    for s in result.seeds:
        if (arm, s) not in result.records:
            continue
        warmup = result[arm, s].get("config", {}).get("options", {}).get("warmup", 0)
        for rnd, out in result.probes(arm, s).items():
            if out and rnd > warmup:
                mean += [a for a, _ in out["norms"]]
                most += [b for _, b in out["norms"]]
                clusters.append(out["clusters"])
    if not mean:
        return ""
    holds = "never" if min(mean) >= eps["eps1"] or max(most) <= eps["eps2"] else "at times"
    return (f"CFL's split criterion (after its {warmup} warm-up rounds, at the evaluated rounds of every seed): the "
            f"norm of the federation's mean update stays at {min(mean):.2f}–{max(mean):.2f}, where a split asks it "
            f"below ε₁ = {eps['eps1']:g}, while the largest client update's is {min(most):.2f}–{max(most):.2f} "
            f"(above ε₂ = {eps['eps2']:g}): the federation {holds} looks stationary to CFL at our learning rate and "
            f"local epoch, so it {'never splits' if holds == 'never' else 'may split'} ({max(clusters)} cluster"
            f"{'s' if max(clusters) > 1 else ''} at most). The authors set their thresholds for their models; the "
            "norms scale with the learning rate and the local work.")  # fmt: skip


def cpu_note(result, a: str, b: str) -> str:
    """A sentence for arms ``a`` and ``b`` whose algorithms coincide in these runs, when their runs were computed
    on different CPU models (their numbers then differ in the last bits of every sum, and so beyond them).
    Used in *Table II in full* (CFL's row beside FedAvg's)."""
    cpus = {arm: {result[arm, s].get("provenance", {}).get("cpu", "").split(" (")[0] for s in result.seeds
                  if (arm, s) in result.records} for arm in (a, b)}  # fmt: skip
    if not all(cpus.values()) or cpus[a] == cpus[b]:
        return ""
    return (
        f" {a} is then {b}, yet their rows differ a little: {a}'s runs were computed on "
        f"{', '.join(sorted(cpus[a]))}, {b}'s on {', '.join(sorted(cpus[b]))}, whose floating-point sums differ "
        "(identical numbers need the same CPU model and compute path)."
    )


# ----------------------------------------------------------------------------- the page's words


def arrangements_text(archs: dict) -> str:
    """Figure 2's arrangements as the prose says them: ``{9: ["1,4,4", "1,3,5"]}`` → "for 9 blocks
    [1×4×4] and [1×3×5]" (block counts joined by "; ")."""

    def names(arrangements):
        parts = [f"[{a.replace(',', '×')}]" for a in arrangements]
        return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]

    return "; ".join(f"for {b} blocks {names(a)}" for b, a in archs.items())


def plain_pilot(table: pd.DataFrame, value: str = "learning rate") -> pd.DataFrame:
    """A pilot's summary (:meth:`pflkit.tuning.Tuning.summary`) in the page's words: the chosen
    setting as its number ("lr=0.05" → "0.05") under ``value``, the validation metric as accuracy.
    Used in *Tuning* and *Figure 2 in full*."""
    out = table.copy()
    out["chosen"] = out["chosen"].map(lambda s: s.split("=", 1)[1] if "=" in s and ", " not in s else s)
    return out.rename(columns={"chosen": f"chosen {value}", **METRIC_WORDS})


def grid_note(grid, paper_grid) -> str:
    """How a learning-rate grid relates to the paper's, in words: "the paper's grid", or which of its
    values are the paper's and which lie above it.  Glued in *Tuning* and *Deviations and choices*."""
    from ..pages import prose

    ours = [v for v in grid if v in paper_grid]
    if sorted(grid) == sorted(paper_grid):
        return "the paper's grid"
    above = [v for v in grid if v not in paper_grid]
    return f"{prose(ours)} of the paper's grid" + (f" and {prose(above)} above it" if len(ours) < len(grid) else "")


def split_text(class_groups, class_names, sizes, mix, datasets: pd.DataFrame, seed: int) -> str:
    """The split in words: the label clusters of a seed (``class_groups``: class indices per cluster),
    the paper's Table I (``datasets``: rows by dataset, columns ``num_clients`` and ``num_samples``),
    the clients' training sizes and the mean share of a client's dominant cluster (``mix``: clients ×
    clusters).  Used in *The split and the rounds*."""
    short = [c.split("/")[0] for c in class_names]
    sizes = np.asarray(sizes)
    clusters = "; ".join(f"{k}: " + ", ".join(short[c] for c in g) for k, g in enumerate(class_groups))
    table1 = "; ".join(
        f"{d} {int(r.num_clients)} clients, {int(r.num_samples):,} samples ({r.num_samples / r.num_clients:.0f} per client)"
        for d, r in datasets.iterrows()
    )
    return (
        f"Label clusters (seed {seed}): {clusters}. The paper's Table I: {table1}. Ours: {len(sizes)} clients, "
        f"training images per client median {np.median(sizes):.0f} (min {sizes.min()}, max {sizes.max()}); a client's "
        f"dominant cluster holds {100 * np.asarray(mix).max(1).mean():.0f} % of its images on average."
    )


def router_lr_text(tried, grid, chosen: float, at_edge: bool, lr: float) -> str:
    """The router pilot's outcome in words: the step sizes tried (the edge rule's additions named), the
    one kept, and its ratio to the network's learning rate ``lr``.  Used in *Tuning*."""
    from ..pages import prose

    grown = [v for v in tried if v not in grid]
    return (
        f"The router's step size was tried at {prose(sorted(tried))}"
        + (f" (the edge rule added {prose(grown)})" if grown else "")
        + f"; {chosen:g} was kept"
        + (", still at the grid's edge" if at_edge else "")
        + f", {chosen / lr:g}× FedMN's learning rate of {lr:g}."
    )


def best_round_text(best_round: dict, pretrain_end: int) -> str:
    """FedMN's round of best mean validation accuracy per seed (``best_round``: seed → round), and the
    seeds where it falls in the encoders' pretraining (rounds ≤ ``pretrain_end``).
    Used in *Table II in full*."""
    pre = [s for s, r in best_round.items() if r <= pretrain_end]
    return (
        "FedMN's round of best mean validation accuracy, per seed: "
        + ", ".join(f"seed {s} round {r}" for s, r in best_round.items())
        + (
            f"; on {seeds_text(pre)} it falls in the encoders' pretraining, where FedMN is judged as the mean of its "
            "encoder models"
            if pre
            else " (all in the routing rounds)"
        )
        + "."
    )


def bytes_text(up: pd.Series, share: float, router_size: int, routing_rounds: int, clients: int, flat: str) -> str:
    """Table II's bytes in words: FedMN's upload (``up``: MB by arm) against FedAvg's, FedEM's and the
    same network without routing (arm ``flat``), the share of blocks in use, and the router's part
    (``router_size`` parameters in float32, every client every routing round)."""
    router_mb = router_size * 4 * clients * routing_rounds / 1e6
    use = (
        "Its clients use every block at the last round, so block-wise communication saves nothing here"
        if share > 0.999
        else f"Its clients use {share:.0%} of the blocks at the last round (mean over seeds)"
    )
    return (
        f"In Table II's setting FedMN sends {up['FedMN'] / up['FedAvg']:.1f}× FedAvg's bytes and "
        f"{up['FedMN'] / up['FedEM']:.1f}× FedEM's, and {up['FedMN'] / up[flat]:.2f}× those of the same network with "
        f"every path on (no routing). {use}; the difference from the no-routing arm, {up['FedMN'] - up[flat]:.0f} MB "
        f"each way, is the router ({router_size:,} parameters, {router_mb:.0f} MB each way over the {routing_rounds} "
        f"routing rounds of {clients} clients), which every client downloads and uploads in every routing round and "
        "the no-routing arm never sends. The paper's efficiency claim is made on Figure 2's MLPs."
    )


def sizes_text(means: pd.Series, common, more, n_more: int, size_mn: int, components: int, size_lenet: int) -> str:
    """Table II's ordering over the seeds every arm ran (``means``: arm → mean, highest first), which
    arms ran more seeds, and the models' sizes in parameters."""
    from ..pages import prose

    order = " > ".join(f"{a} ({v:.1f})" for a, v in means.items())
    more_text = (
        f". The claims pair the seeds both their arms ran; {prose(more)} ran {seeds_text(n_more)}, and the table "
        "gives their means over all of them"
        if more
        else ""
    )
    return (
        f"Mean over {seeds_text(common)}, the seeds every arm ran: {order}{more_text}. The models differ in size: "
        f"FedMN's network (encoders, blocks and router) holds {size_mn:,} parameters, FedEM's {components} components "
        f"{components * size_lenet:,}, every other method's LeNet {size_lenet:,}; a claim that FedMN beats a baseline "
        "compares the methods with their models, as the paper's Table II does."
    )


def routing_text(n_arch: int, pi_range: str, spread: float) -> str:
    """The routing table in words: the clients' architectures, the range of Π over the paths and its
    spread over the clients (below 0.01: too small for the ARI to mean personalised architectures).
    Used in *The routing decisions*."""
    arch = "one architecture" if n_arch == 1 else f"at most {n_arch} architectures"
    tail = (
        ": the clustering behind the ARI separates clients by differences of that size, too small to change a "
        "decision, so the ARI says nothing about personalised architectures here. The departures section sets it "
        "against a frozen router."
        if spread < 0.01
        else "."
    )
    return (
        f"On every seed the clients use {arch}, and the router's path probabilities span {pi_range} across the paths "
        f"(first seed) but differ between clients by {spread:.4f} on average{tail}"
    )


def change_row(first, last, architectures: int, swap: float) -> dict:
    """One run's row of the router's change from the switch to the last round: the cluster gap, the
    labels' share and the logits' spread at both ends (``first``, ``last``: rows of
    :func:`router_trace`), its architectures and its swap test (points).  Used in *What the router reads*."""
    return {
        "cluster gap": f"{first.gap:.3f} → {last.gap:.3f}",
        "label share": f"{first.label_share:.3f} → {last.label_share:.3f}",
        "G spread": f"{first.g_sd:.2g} → {last.g_sd:.2g}",
        "architectures": architectures,
        "swap (points)": round(swap, 2),
    }


def router_text(first: pd.DataFrame, last: pd.DataFrame, tuned: str, rate: str, apart: str | None = None) -> str:
    """How the router's input and logits change from the switch to the last round, with the tuned router
    step (arm ``tuned``), at the network's (arm ``rate``) and, given, with decisions started apart (arm
    ``apart``); ``first``, ``last``: :func:`router_trace`'s rows at both ends indexed by (arm, seed).
    Used in *What the router reads*."""
    shrink = (last.g_sd / first.g_sd).groupby(level="arm").agg(["min", "max"])
    f, e, r = first.loc[tuned].gap, last.loc[tuned].gap, last.loc[rate].gap
    text = (
        f"From the switch to the last round the gap between the clusters' mean embeddings goes from {f.min():.2f}–"
        f"{f.max():.2f} to {e.min():.3f}–{e.max():.3f} with the tuned router step, and to {r.min():.2f}–{r.max():.2f} "
        f"at the network's; the clients' logits end {shrink.loc[tuned, 'min']:.2g}–{shrink.loc[tuned, 'max']:.2g} "
        f"times as far apart as at the switch (at the network's step size {shrink.loc[rate, 'min']:.2g}–"
        f"{shrink.loc[rate, 'max']:.2g} times)."
    )
    if apart is None:
        return text
    a0, a1 = first.loc[apart].g_sd, last.loc[apart].g_sd
    return text + (
        f" Started apart (the clients' logits {a0.min():.2g}–{a0.max():.2g} apart at the switch), they end "
        f"{a1.min():.2g}–{a1.max():.2g} apart, {shrink.loc[apart, 'min']:.2g}–{shrink.loc[apart, 'max']:.2g} times "
        f"their start, and the gap between the clusters' embeddings ends at {last.loc[apart].gap.min():.3f}–"
        f"{last.loc[apart].gap.max():.3f}."
    )


def with_mean(table: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """A per-seed table with a last row "mean", rounded; the seed becomes a column (no index shown).
    Used in *What the router reads* (the oracle's table)."""
    out = pd.concat([table, table.mean().to_frame("mean").T]).round(digits)
    return out.rename_axis("seed").reset_index()


def f2_text(acc: pd.Series, par: pd.Series, mn_of: dict, fedavg: dict, flat: dict, route_gain: float) -> str:
    """Figure 2 without routing, in words: per block count the accuracy (``acc``, %) and parameters
    transmitted (``par``, M) of the network without routing, routed, and of FedAvg's MLP, and where the
    accuracy gain over FedAvg comes from (``route_gain``: routing − every path on, points)."""
    from ..pages import prose

    bs = list(mn_of)

    def listed(values, arms):
        return prose([f"{values[a]:.1f}" for a in arms])

    flats, firsts, mlps = [flat[b] for b in bs], [mn_of[b][0] for b in bs], [fedavg[b] for b in bs]
    flat_gain = float(np.mean([acc[flat[b]] - acc[fedavg[b]] for b in bs]))
    fewer = all(par[flat[b]] < par[mn_of[b][0]] for b in bs)
    return (
        f"Without routing, the same networks as each block count's first arrangement "
        f"({prose([a.removeprefix('FedMN ') for a in firsts])}) reach {listed(acc, flats)} % at {listed(par, flats)} M "
        f"parameters transmitted; routed, they reach {listed(acc, firsts)} % at {listed(par, firsts)} M, and FedAvg's "
        f"MLPs of as many layers {listed(acc, mlps)} % at {listed(par, mlps)} M (means over each arm's seeds; "
        f"{prose(bs)} blocks in that order). Without routing the modular network beats FedAvg's MLPs by "
        f"{flat_gain:+.1f} points on average, and routing adds {route_gain:+.1f} on the same networks"
        + (", while without routing it transmits fewer parameters still (it sends no router)" if fewer else "")
        + (
            ": Figure 2's accuracy gain comes mostly from the modular network itself (an encoder, one layer of blocks "
            "and the output blocks, against FedAvg's deeper MLPs), little of it from routing."
            if abs(route_gain) < flat_gain / 2
            else "."
        )
    )


def sent_whole_text(ratio: float, static: float) -> str:
    """Figure 2's bytes in words: FedMN's parameters transmitted against FedAvg's (``ratio``, from the
    runs) and what the same architectures would move sent whole, every block active (``static``)."""
    saved = 1 - ratio / static
    saving = (
        f"block-wise communication saves {saved:.0%} of that"
        if saved > 0
        else "block-wise communication saves nothing here"
    )
    return (
        f"FedMN's architectures transmit {ratio:.2f}× FedAvg's MLPs' parameters (mean over seeds of the ratio of "
        f"means). Sent whole, every block active, the same architectures would move {static:.2f}× FedAvg's parameters "
        "(from their sizes, the same ratio of means; the router, whose φ_x is a copy of an encoder, travels both ways in "
        f"every routing round and counts in both): {saving}, and the rest of the difference from FedAvg is the "
        f"architectures' own size ({static:.2f}× FedAvg's per round)."
    )


def frozen_text(ari_trained: float, ari_frozen: float, spread_trained: float, spread_frozen: float) -> str:
    """The ARI with the router trained against frozen at its initialisation, in words, with the clients'
    spread of Π in both (below 0.01: too small to change a decision).  Used in the departures section."""
    change = (
        "lowers it"
        if ari_trained < ari_frozen - 0.005
        else "raises it"
        if ari_trained > ari_frozen + 0.005
        else "leaves it as it is"
    )
    small = max(spread_trained, spread_frozen) < 0.01
    return (
        f"With the router frozen at its initialisation the ARI is {ari_frozen:.2f} on average, with it trained "
        f"{ari_trained:.2f}: training {change}. The clients' path probabilities differ by {spread_trained:.4f} (trained) "
        f"and {spread_frozen:.4f} (frozen) on average"
        + (", so both ARIs cluster differences too small to change a decision." if small else ".")
    )


def shared_blocks_text(active: list, inert: bool, swap: float, ari: str) -> str:
    """Under concept shift: how many blocks FedMN's clients use and how many every client uses
    (``active``: per seed, clients × blocks), and what that means for blocks averaged over clients whose
    labels contradict one another (``inert``: the swap test found the decisions interchangeable)."""
    n_blocks = np.asarray(active[0]).shape[1]
    used = np.mean([np.asarray(a).sum(1).mean() for a in active])
    shared = np.mean([np.asarray(a).all(0).sum() for a in active])
    if shared == 0:
        tail = ": no block serves every group."
    elif not inert:
        tail = (
            ": however distinct the groups' path weights, each of those blocks is averaged over clients whose labels "
            "contradict one another."
        )
    else:
        tail = (
            f": the groups' path weights are not distinct (swap test {swap:+.1f} points, ARI {ari}), and each of those "
            "blocks is averaged over clients whose labels contradict one another."
        )
    return (
        f"FedMN's clients under concept shift use {used:.1f} of the {n_blocks} blocks on average, and {shared:.1f} "
        f"blocks are active for every client (means over seeds){tail}"
    )


def lead_text(m: dict) -> tuple[str, str]:
    """The findings box's opening sentence and the glance row's "why" from the chapter's measurements
    (``m``: ``inert`` (the swap test finds the decisions interchangeable), ``swap`` (its mean, points),
    ``swap_ours`` (its interval as printed), ``g_sd`` (the logits' spread over clients at the last
    round), ``in_use`` (share of blocks in use), ``gap`` (the cluster gap at the switch and at the end),
    ``gain`` (a fitted per-cluster decision over the best common one, points), optionally ``apart``
    (decisions started apart: the logits' spread at the end over its start, the largest seed), ``bytes`` (FedMN's
    upload / FedAvg's), ``f2`` and ``f2_flat`` (Figure 2's gain over FedAvg with and without
    routing, points))."""
    gap = f"{m['gap'][0]:.2f} → {m['gap'][1]:.2f}"
    if m["inert"]:
        use = "every block stays in use" if m["in_use"] > 0.999 else f"{m['in_use']:.0%} of the blocks stay in use"
        apart = ""
        if "apart" in m:  # decisions started apart: their logits' spread at the end over its start (largest seed)
            apart = (f", clients' decisions started apart end alike (their logits' spread falls to at most {m['apart']:.2g} "
                     "of its start)" if m["apart"] < 0.1 else f", but decisions started apart stay apart (their logits' "
                     f"spread ends at up to {m['apart']:.2g} of its start)")  # fmt: skip
        first = (
            f"At the last round the router's logits differ between clients by {m['g_sd']:.2g} (spread over clients) and "
            f"{use}: FedMN does not personalise here. The router's input loses the label clusters during training (gap "
            f"between their mean embeddings {gap}){apart}, and on the trained network a decision fitted per cluster "
            f"would gain {m['gain']:+.1f} points over the best common one."
        )
        why = (
            f"one decision for every client (swap test {m['swap_ours']}): the router's input loses the clusters (gap "
            f"{gap}); a fitted per-cluster decision would gain {m['gain']:+.1f} over the best common one"
        )
    else:
        first = f"A client's own routing decision is worth {m['swap']:+.1f} points against another group's."
        why = f"a client's own decision is worth {m['swap_ours']} against another group's"
    lead = (
        f"**In short.** {first} It sends {m['bytes']:.1f}× FedAvg's bytes; Figure 2's {m['f2']:+.1f} points over "
        f"FedAvg hold without routing ({m['f2_flat']:+.1f})."
    )
    return lead, why


def paper_and_own(table: pd.DataFrame, rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A claims table (:func:`pflkit.claims.claims_table`, indexed by claim) split in two: the paper's
    claims, and our own checks (:func:`pflkit.claims.is_own` of the claims ``rows``), each in the
    table's order.  Used in *What reproduced*."""
    from ..claims import is_own

    own = {r["claim"] for r in rows if is_own(r)}
    mine = table.index.isin(own)
    return table[~mine], table[mine]


ROUTER_RUNS = ("tuned step", "network's step", "started apart")  # the router section's runs, as its table names them


def router_changes(result, tuned: str, rounds: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The router's change from the switch to the last round, per arm and seed (the arm ``tuned`` first,
    then the others in ``result``'s order, named by :data:`ROUTER_RUNS`): :func:`change_row` of each run,
    and :func:`router_trace`'s rows at both ends (indexed by arm and seed).  Used in *What the router reads*."""
    trace = pd.concat([router_trace(result, a).assign(arm=a) for a in result.arms], ignore_index=True)
    ends = trace.sort_values("round").groupby(["arm", "seed"], sort=False)
    first, last = ends.first(), ends.last()
    rows = []
    order = [tuned] + [a for a in result.arms if a != tuned]
    for (a, s), f in sorted(first.iterrows(), key=lambda t: (order.index(t[0][0]), t[0][1])):
        active = result.probes(a, s).get(rounds)["active"]
        swap = float(swap_gain(result, a, rounds).get(s, np.nan))
        rows.append({"run": ROUTER_RUNS[order.index(a)], "seed": s,
                     **change_row(f, last.loc[(a, s)], len({tuple(r) for r in active}), swap)})  # fmt: skip
    return pd.DataFrame(rows).set_index(["run", "seed"]), first, last


# ----------------------------------------------------------------------------- the setup card


def setup_rows(v: dict) -> list[tuple[str, str, str]]:
    """The setup card's rows (what, ours, the paper's) from the chapter's parameters ``v`` (TRAIN_IMAGES,
    TEST_IMAGES, LABEL_CLUSTERS, ALPHA, CLIENTS, ARCH, HIDDEN, ROUNDS, MOMENTUM, PRETRAIN_FRACTION,
    PILOT_ROUNDS, SEEDS)."""
    arch = v["ARCH"].replace(",", "×")
    if v.get("DATASETS", ["fashion-mnist"]) != ["fashion-mnist"]:  # the paper profile: Table II on each dataset
        return paper_setup_rows(v)
    return [
        ("Data", f"Fashion-MNIST, {v['TRAIN_IMAGES']:,} training and {v['TEST_IMAGES']:,} test images",
         "CIFAR-10/100, EMNIST, FEMNIST"),
        ("Split", f"FedEM's label clusters: {v['LABEL_CLUSTERS']} groups of classes, Dir({v['ALPHA']}) over the "
         "clients", "the same"),
        ("Clients", f"{v['CLIENTS']}, every one in every round", "80 (CIFAR-10), every one in every round"),
        ("Model", f"LeNet; FedMN [{arch}]: LeNet bodies as encoders, blocks of {v['HIDDEN']} units",
         "MobileNet-v2 or a 2-layer CNN; [3×3×3] on EMNIST"),
        ("Training", f"{v['ROUNDS']} rounds of one local epoch, SGD (momentum {v['MOMENTUM']}), the first "
         f"{v['PRETRAIN_FRACTION']:.0%} pretrain FedMN's encoders", "150 rounds of one local epoch, SGD"),
        ("Tuning", f"learning rate per method on validation, a {v['PILOT_ROUNDS']}-round pilot; FedMN's router step "
         "too", "a learning-rate grid"),
        ("Seeds", f"{seeds_text(v['SEEDS'])} to start, more where a claim's plan asks", ""),
    ]  # fmt: skip


def paper_setup_rows(v: dict) -> list[tuple[str, str, str]]:
    """The setup card at the paper profile: per dataset of ``v["DATASETS"]`` (rows of ``v["SPLITS"]``)."""

    def each(f) -> str:
        return "; ".join(f"{PAPER_NAMES.get(d, d)} {f(*v['SPLITS'][d])}" for d in v["DATASETS"])

    first = PAPER_NAMES.get(v["DATASETS"][0], v["DATASETS"][0])
    return [
        ("Data", each(lambda n, k, share, m, a: "all images" if share == 1 else f"FedEM's {share:.0%} of the images")
         + f"; the sections after Table II on {first}", "CIFAR-10/100, EMNIST, FEMNIST"),
        ("Split", each(lambda n, k, *_: f"{k} label clusters, Dir({v['ALPHA']})" if k else "one client per writer"),
         "FedEM's (CIFAR-100: its Pachinko allocation)"),
        ("Clients", each(lambda n, *_: f"{n}") + ", every one in every round", "80, 100, 100, 539"),
        ("Model", each(lambda n, k, s, m, a: f"{m}, FedMN [{a.replace(',', '×')}]") + f", blocks of {v['HIDDEN']} units",
         "MobileNet-v2 (CIFAR) or a 2-layer CNN; [2×2×2] on CIFAR, [3×3×3] on (F)EMNIST"),
        ("Training", f"{v['ROUNDS']} rounds of one local epoch, batch {v['BATCH']}, SGD (momentum {v['MOMENTUM']}), the "
         f"first {v['PRETRAIN_FRACTION']:.0%} pretrain FedMN's encoders", "150 rounds of one local epoch, SGD"),
        ("Tuning", f"learning rate per method on validation in {v['LR_GRID']}, a {v['PILOT_ROUNDS']}-round pilot; "
         "FedMN's router step too", "the same grid"),
        ("Seeds", f"{seeds_text(v['SEEDS'])} to start, more where a claim's plan asks", ""),
    ]  # fmt: skip


# ----------------------------------------- the notebook's shown output: colours, glued values, tables and lines


VAL = {"val_mean_acc": METRIC_WORDS["val_mean_acc"]}  # a pilot table's column, as every page names it
STRONG, MUTED = "C3", "0.62"  # FedMN in one strong colour, the rest muted
# the parameters the prose shows ({glue:text} roles)
GLUED = (
    "LABEL_CLUSTERS CLIENTS SEEDS ROUNDS PRETRAIN_FRACTION TAU_START TAU_END ALPHA TRAIN_IMAGES HIDDEN BATCH MOMENTUM "
    "PILOT_ROUNDS PILOT_SEEDS LR_GRID LR_EXTEND FIG2_ROUNDS CODE_ROUNDS CONCEPT_CLIENTS CONCEPT_GROUPS COMPONENTS "
    "CONCEPT_ROUNDS TEST_IMAGES FEDPROX_MU FT_EPOCHS DROPOUT TABLE2_RUN FIG2_RUN CODE_RUN CONCEPT_RUN ROUTER_LR_GRID ROUTER_LR START_APART CFL_EPS1_GRID"
).split()


def table2_heading(name: str, cfg) -> str:
    """The line above a dataset's Table II at the paper profile: the dataset, its split, model and FedMN."""
    split = (f"FedEM's label clusters ({cfg.label_clusters} groups of classes, Dir({cfg.alpha:g}))"
             if cfg.partition == "label-clusters" else "one client per writer")  # fmt: skip
    images = "all images" if cfg.train_images is None else f"{cfg.train_images:,} training images"
    return (f"**{PAPER_NAMES.get(name, name)}**: {cfg.clients} clients, {split}, {images}, model {cfg.model}, "
            f"FedMN [{cfg.options.get('arch', '').replace(',', '×')}]")  # fmt: skip


def table2_shown(table: pd.DataFrame, pub: pd.DataFrame, fallbacks: dict, heading: str = "") -> list:
    """What Table II's section shows: a line per method whose rate diverged on some seed, then the table
    beside the paper's CIFAR-10 and EMNIST, and folded, beside all four of the paper's datasets; with a
    ``heading`` (the paper profile: one table per dataset), that heading and the table beside the paper's
    column for the dataset (``pub``: that column alone, :func:`pub_for`)."""
    from IPython.display import Markdown

    from ..pages import folded

    notes = "\n".join(f"* {a}: {note}".replace("lr ", "learning rate ") for a, note in fallbacks.items())
    if heading:
        return (
            [Markdown(heading)]
            + [Markdown(notes)] * bool(fallbacks)
            + [table[[ACC, "seeds", "still improving", *[f"paper {d}" for d in pub.columns]]]]
        )
    return [Markdown(notes)] * bool(fallbacks) + [
        table[[ACC, "seeds", "still improving", "paper CIFAR10", "paper EMNIST"]],
        folded(
            table[[ACC, *[f"paper {d}" for d in pub.columns]]], "Ours beside the paper's Table II on its four datasets"
        ),
    ]


def table2_notes(result, plan: pd.DataFrame, table: pd.DataFrame, sizes: dict, *, seeds, mn_seeds, run: int,
                 rounds: int, pretrain_end: int, components: int, clients: int, cfl_eps: dict, flat: str):  # fmt: skip
    """Table II in the notes: the bytes up per method (MB), FedMN's share of blocks in use at the last
    round (mean over ``mn_seeds``), and what the notes show (seed plan, pooled accuracy, best rounds,
    sizes, whether CFL split, bytes)."""
    from IPython.display import Markdown

    from ..pages import folded

    best_round = result.finals().set_index(["arm", "seed"]).best_val_round
    cfl_same = all(
        result.values("CFL", m).equals(result.values("FedAvg", m)) for m in ("mean_acc", "val_mean_acc", "MB_up")
    )
    mean, common = common_seed_means({a: result.values(a) for a in result.arms})  # the seeds every arm ran
    more = [a for a in result.arms if len(result.values(a).dropna()) > len(common)]
    comm = result.finals().groupby("arm")[["MB_up", "MB_down"]].mean().round(2)
    comm.columns = ["MB up (client → server)", "MB down"]
    up = comm["MB up (client → server)"]
    share = np.mean([np.mean(result.probes("FedMN", s).get(rounds)["active"]) for s in mn_seeds])
    text = (best_round_text({s: best_round["FedMN", s] for s in mn_seeds}, pretrain_end) + "\n\n"
            + sizes_text(mean, common, more, len(result.values(more[0])) if more else 0, sizes["FedMN"], components,
                         sizes["model"])
            + (f"\n\nCFL never split a cluster here: its accuracies and bytes equal FedAvg's on every seed, so its row is "
               f"FedAvg's (split thresholds ε₁ = {cfl_eps['eps1']:g}, ε₂ = {cfl_eps['eps2']:g})." if cfl_same else "")
            + ("\n\n" + criterion if (criterion := cfl_criterion_text(result, "CFL", cfl_eps))
               else "") + (cpu_note(result, "CFL", "FedAvg") if "never splits" in criterion else ""))  # fmt: skip
    shown = [
        folded(
            plan.round(2),
            f"The seed plan of Table II's claims ({seeds_text(seeds)} its pilot; at most {run} seeds run)",
        ),
        folded(
            table[[ACC, "seeds", "pooled accuracy at the best validation round (%)"]],
            "Table II with the pooled accuracy",
        ),
        Markdown(text),
        comm.reset_index(names="method"),
        Markdown(bytes_text(up, share, sizes["router"], rounds - pretrain_end, clients, flat)),
    ]
    return up, share, shown


def fig2_means(fin: pd.DataFrame) -> pd.DataFrame:
    """Figure 2's points: each arm's mean parameters transmitted and accuracy over its seeds."""
    cols = ["parameters transmitted (M)", "mean_acc"]
    return fin.groupby(["arm", "method", "blocks"])[cols].mean().reset_index()


def counts_text(rows: list[dict], shown: int):
    """The line under the claims table: how many claims, per verdict word, how many budget-limited,
    and how many runs the page shows.  Used in *What reproduced*."""
    from IPython.display import Markdown

    words = pd.Series([r["verdict"] for r in rows]).value_counts()
    limited = sum(r["budget"] == "budget-limited" for r in rows)
    return Markdown(f"{len(rows)} claims: " + ", ".join(f"{n} {w}" for w, n in words.items())
                    + f"; {limited} of them rest on runs still improving at the end of their rounds. "
                    f"This page shows {shown} runs.")  # fmt: skip


def oracle_shown(changes: pd.DataFrame, oracle: pd.DataFrame, first, last, rounds: int, tuned: str, rate: str,
                 rows: tuple, resolution: float, apart: str | None = None) -> list:  # fmt: skip
    """What the router section shows: the router's changes per seed from the switch to the last round,
    the oracle's table, and the text (``rows``: the oracle's swap, its gain, the swap test at the
    network's step size and, with the arm ``apart``, the swap test of decisions started apart)."""
    from IPython.display import Markdown

    from ..claims import say

    swap, gain, rate_row, *apart_row = rows
    text = (router_text(first, last, tuned, rate, apart if apart_row else None) + " On the trained network a client's own cluster's fitted decision "
            f"against its partner cluster's reads {say(swap)}, and against the best common decision {say(gain)}"
            + (": decisions matter on this network, but a personal one is worth little over the best shared one"
               if swap["verdict"] == "reproduces" and gain["_v"].mean < resolution else "")
            + f". At the network's step size the swap test reads {say(rate_row)}"
            + (f"; with decisions started apart, {say(apart_row[0])}." if apart_row else "."))  # fmt: skip
    return [Markdown(f"From the switch (round {int(first['round'].min())}) to the last round ({rounds}), per seed:"),
            changes, Markdown("The oracle: mean client test accuracy (%) per seed with each decision."),
            with_mean(oracle), Markdown(text)]  # fmt: skip


# ----------------------------------------------------------------------------- the figures


def _done(fig):
    """A figure drawn for the notebook to glue: closed, so that only the glue shows it.
    Used by every figure of the page."""
    plt.close(fig)
    return fig


def draw_table2_curves(history: pd.DataFrame, arms: list, flat: str, pretrain_end: int):
    """Table II's runs (``arms``) over rounds (``history``: arm, round, mean_acc; mean over seeds): FedMN strong,
    FedEM and the no-routing control (``flat``) dark, the other baselines muted; a dotted line where
    the encoders' pretraining ends."""
    fig, ax = plt.subplots(figsize=(6.9, 3.9))
    others = [a for a in arms if a not in ("FedMN", "FedEM", flat)]
    styles = {
        "FedMN": dict(color=STRONG, lw=2.4),
        "FedEM": dict(color="0.25", lw=1.4),
        flat: dict(color="0.25", lw=1.4, ls="--"),
    }
    for a in others + ["FedEM", flat, "FedMN"]:  # the strongest colour last, on top
        curve = history[history.arm == a].groupby("round").mean_acc.mean()
        ax.plot(curve.index, curve.values, **styles.get(a, dict(color=MUTED, lw=1)), label=a if a in styles else None)
    ax.plot([], [], color=MUTED, lw=1, label=f"the {len(others)} other baselines")
    ax.axvline(pretrain_end, color="0.5", ls=":", lw=1)
    ax.set(xlabel="round", ylabel="mean client test accuracy (%)")
    ax.legend(fontsize=10, loc="lower right")
    return _done(fig)


def draw_figure2(points: pd.DataFrame, rounds: int):
    """Figure 2: each arm's accuracy against the parameters it sent (``points``: :func:`fig2_means`),
    coloured by method, the marker by block count."""
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6.9, 4.0))
    sns.scatterplot(data=points, x="parameters transmitted (M)", y="mean_acc", hue="method", style="blocks", s=90, ax=ax,
                    palette={"FedMN": STRONG, "FedMN, no routing": "0.3", "FedAvg": "C0"})  # fmt: skip
    ax.set(ylabel=f"mean client test accuracy, round {rounds} (%)")
    ax.legend(fontsize=10, ncol=2, loc="lower left")
    return _done(fig)


def draw_split(mix: np.ndarray, dominant: np.ndarray, seed: int):
    """The split: each client's share of images in every label cluster (``mix``: clients × clusters),
    the clients ordered by their dominant cluster, then by that share.  Used in *The split and the rounds*."""
    fig, ax = plt.subplots(figsize=(6.9, 2.4))
    order = np.lexsort((-mix.max(1), dominant))
    pd.DataFrame(mix[order], columns=[f"cluster {k}" for k in range(mix.shape[1])]).plot.bar(
        stacked=True, ax=ax, width=0.9
    )
    ax.set(xlabel="client (ordered by dominant cluster)", ylabel="share of its images", xticks=[],
           title=f"seed {seed}: label clusters per client")  # fmt: skip
    ax.legend(fontsize=10, loc="upper right")
    return _done(fig)


def draw_decisions(paths, dominant: np.ndarray, rounds: int, seed: int):
    """FedMN's decisions: each client's path weights (rows: clients ordered by their dominant label
    cluster; columns: the paths).  Used in *The routing decisions*."""
    import seaborn as sns

    order = np.argsort(dominant, kind="stable")
    fig, ax = plt.subplots(figsize=(6.9, 0.2 * len(paths) + 1.4))
    every = max(1, len(paths[0]) // 6)  # a label every few paths: numbers that do not run together at the column
    sns.heatmap(np.array(paths)[order], cmap="viridis", vmin=0, vmax=1, ax=ax, xticklabels=every,
                yticklabels=[f"c{i} (cluster {dominant[i]})" for i in order], cbar_kws={"label": "path weight"})  # fmt: skip
    ax.set(xlabel=f"path (E = {len(paths[0])})", title=f"FedMN's decisions after round {rounds} (seed {seed})")
    return _done(fig)


def draw_router_trace(result):
    """What the router reads over rounds, per arm of ``result`` (FedMN's tuned router step strong, the
    network's step size muted, decisions started apart dark and dashed): the cluster gap, the labels'
    share, the spread of G (log scale)."""
    import seaborn as sns

    trace = pd.concat([router_trace(result, a).assign(arm=a) for a in result.arms], ignore_index=True)
    styles = [dict(color=STRONG), dict(color=MUTED), dict(color="0.2", ls="--")][: len(result.arms)]
    names = ["tuned router step", "the network's step size", "decisions started apart"][: len(result.arms)]
    fig, axes = plt.subplots(1, 3, figsize=(6.9, 3.0))
    for ax, (col, name) in zip(
        axes, {"gap": "cluster gap", "label_share": "labels' share", "g_sd": "spread of G"}.items()
    ):
        for a, style in zip(result.arms, styles):
            sns.lineplot(data=trace[trace.arm == a], x="round", y=col, ax=ax, legend=False, **style)
        ax.set(title=name, ylabel="", yscale="log" if col == "g_sd" else "linear")
    fig.legend([plt.Line2D([], [], **st) for st in styles], names, loc="lower center", ncol=len(names),
               frameon=False, fontsize=9)  # fmt: skip
    fig.subplots_adjust(wspace=0.5, bottom=0.32, top=0.88)
    return _done(fig)
