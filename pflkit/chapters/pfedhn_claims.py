"""The pFedHN chapter's claims, from its runs: Table 1's (on the paper's split and on the headroom split, with
the mechanism checks), Table 2's at every size, Figures 2 and 7's, 4's, 5 and 6's, Proposition 1's, Table 4's
and App. C.5's, the paper's lead claims, the seed plans and why an untuned baseline is weak.  Runs in,
claims-table rows out: the runs are :mod:`pflkit.chapters.pfedhn`, what the page says of them
:mod:`pflkit.chapters.pfedhn_page`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..claims import arms_budget, claim, claim_row, mechanism, paper_vs_ours, rising, saturation, say, weak_arms
from ..results import PaperMargin, absent_rival, margin_text
from ..verdicts import fmt_interval, interval, seed_plan, verdict
from .pfedhn import (
    PAPER_DATASETS,
    _default_rate,
    data_heading,
    data_label,
    hn_size_acc,
    novel_rows,
    own_minus_other,
    paper_dataset,
    paper_label,
    paper_t1,
    size_swaps,
    t1_best,
    t1_text,
    where,
)

# ----------------------------------------------------------------------------- Table 1


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


def headroom_plan(pilot_diffs: dict, swaps, cap: int, resolution: float) -> pd.DataFrame:
    """The headroom split's seed plan: the accuracy differences between arms pooled together, the
    within-run swap diagnostics (``swaps``, their own pool of spread) apart."""
    return pd.concat(
        [
            seed_plan({k: list(v) for k, v in pilot_diffs.items() if (k in swaps) == s}, cap=cap, resolution=resolution)
            for s in (False, True)
        ]
    )


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


# ----------------------------------------------------------------------------- Table 2


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


# ----------------------------------------------------------------------------- Figures 2 and 7


def novel_diffs(res, arms, gap_claim: str, corr_claim: str) -> dict[str, pd.Series]:
    """Per seed: pFedHN's gap minus Per-FedAvg's (points, averaged over α; keyed ``gap_claim``), and
    −r between a novel client's accuracy and its TV distance (pFedHN; keyed ``corr_claim``)."""
    d = novel_rows(res, arms)
    per_seed = d.groupby(["seed", "method", "alpha"])["gap"].mean().unstack("method")
    hn_ = d[d.method == "pFedHN"]
    corr_ = hn_.groupby("seed").apply(lambda g: np.corrcoef(g["TV to nearest"], g["acc_novel"])[0, 1])
    return {gap_claim: 100 * (per_seed["pFedHN"] - per_seed["Per-FedAvg"]).groupby("seed").mean(), corr_claim: -corr_}


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


# ----------------------------------------------------------------------------- Figures 5 and 6


def diffs56(res, k_arms, k1, embed, depth) -> dict[str, pd.Series]:
    """Per-seed differences of the three ablation claims: the best of ``k_arms`` other than ``k1``
    (on validation) − ``k1``, the two embedding sizes ``embed`` (a, b), the two depths ``depth`` (a, b)."""
    best_k = res.select([a for a in k_arms if a != k1], by="val_mean_acc")
    return {"Figure 5": res.paired(best_k, k1), "Figure 6a": res.paired(*embed), "Figure 6b": res.paired(*depth)}


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


# ----------------------------------------------------------------------------- the paper's lead claims


def lead_claims(*, n0, counts, hr_rows, best_hr, t1, t1_pilot, mech2h, widths, budget_clients, fig2, row_gap,
                novel_clients: str, resolution: float, data: str = "FMNIST") -> list[tuple[str, str, str, str]]:  # fmt: skip
    """The paper's lead claims in its order, whatever our verdict (:func:`pflkit.claims.mark_leads`:
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
