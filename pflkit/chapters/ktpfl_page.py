"""What the KT-pFL chapter's page says and draws from its runs: the tables beside the paper's (Table 1,
Table 2), the curves, the distillation channel's and the coefficients' figures, the ledger of Figure 5,
the sentences under each section, the findings' lead claims, the setup card and the glued prose values.
Data in, pages out: the experiment (probes, protocol, runs) is :mod:`pflkit.chapters.ktpfl`, the claims
:mod:`pflkit.chapters.ktpfl_claims`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .ktpfl import (
    G_RATIO,
    KIT_NAMES,
    NAME2,
    PAPER_NAMES,
    PAPER_TRAIN_SHARE,
    PARTS,
    W_SELF,
    c_moved,
    multiply_adds,
    paper_row,
    sampling_rate,
)
from .ktpfl_claims import table2_claims

STRONG = "#c0392b"  # the paper's method, in every curve plot of the chapter


COLUMNS = {  # paper_vs_ours's columns -> the headers the page shows
    "paper Fashion_MNIST": "paper",
    "ours mean_acc": "ours",
    "seeds": "seeds",
    "still improving": "still improving",
    "ours pooled, at the round of best mean val": "ours, pooled (best-val round)",
}


def accuracy_view(table: pd.DataFrame) -> pd.DataFrame:
    """A table of :func:`pflkit.claims.paper_vs_ours` (or several, concatenated) with the page's headers:
    "paper", "ours" (mean ± 95 % CI), "seeds", "still improving"; the row labels named "method"; the
    paper's missing numbers "—", the others rounded to the paper's two digits."""
    out = table.rename(columns=COLUMNS).rename_axis(index=lambda n: "method" if n == "arm" else n)
    if "paper" in out:
        out["paper"] = [("—" if v != v else f"{v:.2f}") if isinstance(v, float) else v for v in out["paper"]]
    return out


def muted_palette(arms, strong: str = "KT-pFL") -> dict:
    """One colour per arm: ``strong`` (and arms named after it, such as "KT-pFL (parameters)") in the
    chapter's strong red, every other arm in a muted colour of its own."""
    import seaborn as sns

    others = [a for a in arms if not str(a).startswith(strong)]
    muted = [c for i, c in enumerate(sns.color_palette("muted", 10)) if i != 3]  # no red beside the strong red
    muted = (muted * (len(others) // len(muted) + 1))[: len(others)]
    pal = {a: sns.desaturate(c, 0.45) for a, c in zip(others, muted)}
    return pal | {a: STRONG for a in arms if str(a).startswith(strong)}


def curves(
    hist: pd.DataFrame, panel: str, *, strong: str = "KT-pFL", width: float = 7.0, ylabel: str = "", titles=None
):
    """Accuracy by round, one panel per value of ``panel`` (``hist``: round, mean_acc, arm, seed and the panel
    column), the mean over seeds; ``strong`` drawn thick in the strong colour (its variants, such as "KT-pFL
    (parameters)", dashed), the rest thin and muted; one
    legend under the panels.  Returns the figure (text at least 9 pt)."""
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys(hist[panel]))
    arms = list(dict.fromkeys(hist["arm"]))
    pal = muted_palette(arms, strong)
    with plt.rc_context({"font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "legend.fontsize": 9.5}):
        fig, axes = plt.subplots(1, len(keys), figsize=(width, 3.3), sharey=True, squeeze=False)
        for ax, key in zip(axes[0], keys):
            mean = hist[hist[panel] == key].groupby(["arm", "round"], sort=False).mean_acc.mean()
            for arm in arms:
                if arm in mean.index.get_level_values(0):
                    s = mean[arm]
                    bold = str(arm).startswith(strong)
                    ls = "--" if bold and arm != strong else "-"  # a variant of the paper's method: dashed
                    ax.plot(
                        s.index,
                        s.values,
                        color=pal[arm],
                        lw=2.4 if bold else 1.2,
                        ls=ls,
                        zorder=3 if bold else 2,
                        label=arm,
                    )
            ax.set(title=(titles or {}).get(key, f"{panel} = {key}" if panel != "split" else str(key)), xlabel="round")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel(ylabel or "mean client test accuracy (%)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:  # arms that only a later panel has
            for h, lab in zip(*ax.get_legend_handles_labels()):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False)
        fig.tight_layout()
    return fig


def split_claims(table: pd.DataFrame, rows: list[dict], aside=()) -> tuple[pd.DataFrame, ...]:
    """A claims table (:func:`pflkit.claims.claims_table`, indexed by claim) cut in three, each in the
    table's order: the paper's claims on the main path; the paper's claims whose text starts with one of
    ``aside`` (those judged in the laboratory notes); and our own checks (:func:`pflkit.claims.is_own`:
    mechanisms, controls, questions we added)."""
    from ..claims import is_own

    own = table.index.isin([r["claim"] for r in rows if is_own(r)])
    noted = table.index.str.startswith(tuple(aside)) & ~own if aside else np.zeros(len(table), bool)
    return table[~own & ~noted], table[noted], table[own]


def model_sizes(archs: list[str], full: list[str], profile: str, per_round: int) -> pd.DataFrame:
    """Each architecture's parameters at ``profile`` beside its full-width model's (the ``paper`` profile's,
    ``full``, in the same order), their ratio (``profile`` over ``paper``), and the KB of soft predictions a client sends a round
    (``per_round`` public images × 10 classes, float32)."""
    from ..models import build_model, n_params

    params = {a: n_params(build_model(a, (1, 28, 28), 10)) for a in {*archs, *full}}
    out = pd.DataFrame(
        {
            "parameters": [params[a] for a in archs],
            "full width": full,
            "its parameters": [params[b] for b in full],
        },
        index=pd.Index(archs, name="model"),
    )
    out["ratio"] = (out["parameters"] / out["its parameters"]).round(4)
    out["soft KB a round"] = per_round * 10 * 4 / 1e3
    return out


def model_cost(models: list[str]) -> pd.DataFrame:
    """Parameters and multiply-adds per 28×28 image of each model (Table 2's and the paper's)."""
    from ..models import build_model, n_params

    built = {h: build_model(h, (1, 28, 28), 10) for h in dict.fromkeys(models)}
    return pd.DataFrame(
        {
            "parameters": {h: n_params(m) for h, m in built.items()},
            "multiply-adds per image": {h: multiply_adds(m) for h, m in built.items()},
        }
    ).rename_axis(index="model")


def split_summary(fed) -> str:
    """A federation's clients in one sentence: the median training images a client and the classes
    it holds (over 1 % of its images), on average."""
    counts = fed.partition.class_counts(fed.ds.y_train.numpy())
    held = np.mean((counts / counts.sum(1, keepdims=True) > 0.01).sum(1))
    return f"training images per client median {np.median(counts.sum(1)):.0f}; classes held per client (> 1 % of its images): {held:.1f}"


def channel_sentence(last: pd.DataFrame, clients: int) -> str:
    """What :func:`channel_last` says of KT-pFL against FedMD on each split."""
    splits = list(dict.fromkeys(last.index.get_level_values(0)))
    parts = [
        f"on {s}, KT-pFL's distillation gradient is {last.loc[(s, 'KT-pFL'), G_RATIO]:.2f} of its private one (FedMD's "
        f"{last.loc[(s, 'FedMD'), G_RATIO]:.2f}) and its self-weight {last.loc[(s, 'KT-pFL'), W_SELF]:.2f}, against 1/N = {1 / clients:.2f}"
        for s in splits
    ]
    return (
        "At the last round: "
        + "; ".join(parts)
        + ". A ratio well below 1 leaves a client's training to its own labels; near or "
        "above 1, distillation pulls about as hard as they do."
    )


def architecture_table(groups: pd.DataFrame, near_chance: float) -> tuple[pd.DataFrame, str]:
    """Per split, arm and architecture (``groups``: :func:`by_architecture` with a split column), the mean
    accuracy over seeds with the lowest seed's in brackets; and the sentence that counts the
    architecture-seed pairs below ``near_chance`` % and names the lowest."""
    summary = groups.groupby(["split", "arm", "architecture"], sort=False).acc.agg(["mean", "min"])
    table = summary.apply(lambda r: f"{r['mean']:.1f} ({r['min']:.1f})", axis=1).unstack("architecture")
    low = groups[groups.acc < near_chance]
    collapsed = low.groupby(["split", "arm"]).size()
    worst = groups.loc[groups.acc.idxmin()]
    text = (
        f"Architecture-seed pairs below {near_chance:g} %: "
        + ("; ".join(f"{a} on {s}: {n}" for (s, a), n in collapsed.items()) if len(low) else "none")
        + f". The lowest: {worst.arm}'s {worst.architecture} clients on {worst.split}, seed {worst.seed}, at {worst.acc:.1f} %."
    )
    return table.rename_axis(index=["split", "method"]), text


def near_column(points: float) -> str:
    return f"within {points:g} points"


def table2_frame(results: dict, paper: pd.DataFrame, near_points: float) -> pd.DataFrame:
    """Table 2 at each client count (``results``: n -> SweepResult; ``paper``: the paper's Table 2 rows on
    Fashion_MNIST): :func:`~pflkit.claims.paper_vs_ours` with ours − paper (the mean's gap), whether it
    lies within ``near_points`` ("—" where the paper has no number) and the client count."""
    from ..claims import paper_vs_ours

    frames = []
    for n, res in results.items():
        d = paper[paper.setting.str.startswith(f"{n} clients")]
        pub = {a: dict(zip(d.method, d.value)).get(NAME2.get(a, a), np.nan) for a in res.arms}
        t = paper_vs_ours(res, pub, label="paper Fashion_MNIST")
        t["ours − paper"] = [res.values(a).mean() - pub[a] for a in t.index]
        frames.append(t.assign(clients=n))
    out = pd.concat(frames)
    gaps = out["ours − paper"]
    out[near_column(near_points)] = ["—" if np.isnan(g) else "yes" if abs(g) <= near_points else "no" for g in gaps]
    return out


def table2_outcome(
    rows: pd.DataFrame,
    n: int,
    *,
    near_points: float,
    near_goal: int,
    profile: str,
    images_each: float,
    pool: int,
    public: int,
    all_images: int,
    rounds: int,
    local_epochs: int,
    model_words: str | None = None,
    kp: str = "KT-pFL (parameters)",
) -> str:
    """Whether Table 2's runs at ``n`` clients (``rows``: :func:`table2_frame` at n) meet the table's goal (at
    least ``near_goal`` methods within ``near_points`` of the paper), and what the runs say of the misses:
    ``images_each`` training images a client of a ``pool`` less ``public`` ones, against ``all_images`` of
    Fashion-MNIST spread over the paper's clients; ``rounds`` of ``local_epochs``; ``model_words``: the model
    every client runs where it is not the paper's CNN (None: it is)."""
    near = near_column(near_points)
    rows = rows[rows[near] != "—"]
    goal = f"at least {near_goal} methods within {near_points:g} points of the paper's Fashion_MNIST numbers"
    if rows.empty:
        return f"The paper has no Fashion_MNIST run with {n} clients: the goal ({goal}) is not assessed at `{profile}`."
    hits = int((rows[near] == "yes").sum())
    text = (
        f"With {n} clients, {hits} of {len(rows)} methods land within {near_points:g} points of the paper: the goal "
        f"({goal}) is **{'met' if hits >= near_goal else 'not met'}**."
    )
    misses = rows[rows[near] == "no"]
    if misses.empty:
        return text
    text += (
        " Further off (ours − paper): " + ", ".join(f"{a} {d:+.1f}" for a, d in misses["ours − paper"].items()) + "."
    )
    below, above = misses[misses["ours − paper"] < 0], misses[misses["ours − paper"] > 0]
    limited = [a for a in below.index if below.loc[a, "still improving"] == "yes"]
    settled = [a for a in below.index if below.loc[a, "still improving"] == "no"]
    reasons = []
    if len(below):
        reasons.append(
            f"each client trains on about {images_each:.0f} images ({pool:,} training images less the {public:,} public "
            f"ones, over {n} clients, less validation); the paper does not give its clients' sizes, but were all "
            f"{all_images:,} Fashion-MNIST images spread over its {n} clients, its {PAPER_TRAIN_SHARE:.0%} training split "
            f"would give each about {PAPER_TRAIN_SHARE * all_images / n:.0f}"
        )
    if len(below) and sampling_rate(n) < 1:
        reasons.append(
            f"at a sampling rate of {sampling_rate(n):g} a client trains in about {rounds * sampling_rate(n):.0f} of the {rounds} rounds"
        )
    if limited:
        reasons.append(
            f"{', '.join(limited)} still improved at the end of {rounds} rounds of {local_epochs} local epochs (budget-limited)"
        )
    if settled:
        reasons.append(f"{', '.join(settled)} had stopped improving by the last evaluation (at this learning rate)")
    if len(below) and model_words:
        reasons.append(
            f"every client runs {model_words}, not the paper's CNN of McMahan et al. (the two models' sizes are in the "
            "laboratory notes)"
        )
    if "pFedHN" in below.index:
        reasons.append("pFedHN keeps the authors' client learning rate, untuned here")
    if kp in misses.index:
        reasons.append(f"{kp} is our reading of a variant the paper details only in an appendix we lack (Deviations)")
    if len(above):
        reasons.append(
            f"{', '.join(above.index)} {'lies' if len(above) == 1 else 'lie'} above the paper's number, which nothing "
            "measured here explains (the split and test protocol differ from the paper's: Deviations)"
        )
    return text + " What the runs show: " + "; ".join(reasons) + "."


def figure5_sentence(fig5: pd.DataFrame, label: str, per_round: int, batch_mb: float) -> str:
    """What Figure 5's bars say: a FedAvg upload against a KT-pFL one, and a client's round with the public
    images counted as sent against FedAvg's (``label``: the homogeneous model's name)."""
    ratio = (
        fig5.loc["FedAvg (parameters)", "parameters (up)"]
        / fig5.loc["KT-pFL (homogeneous, soft predictions)", "soft predictions (up)"]
    )
    fedavg = fig5.loc["FedAvg (parameters)"].sum()
    kt = fig5.loc["KT-pFL (heterogeneous), public batch sent"].sum()
    end = (
        "soft predictions still move less."
        if kt < fedavg
        else f"with a model as small as {label}, the images outweigh the parameters they replace."
    )
    return (
        f"A FedAvg upload of {label} is {ratio:.1f}× a KT-pFL upload of {per_round} soft predictions. Counting the round's "
        f"public images as sent ({batch_mb:.2f} MB; our reading of the Data bar of the paper's Figure 5, 'batch size used "
        f"in distillation phase'), a KT-pFL client's round moves {kt:.2f} MB against FedAvg's {fedavg:.2f} MB ({label} "
        f"both ways): " + end
    )


KEY_WORDS = {"lam": "λ", "sigma": "σ", "alpha": "α", "models": "models", "ft_epochs": "fine-tuning epochs",
             "hn_lr": "hypernetwork rate", "server_patience": "early-stopping patience", "server_lr": "server rate"}  # fmt: skip
"""A baseline's own hyperparameter, as the prose names it."""


def chosen_sentence(soft: dict, lr: dict, local: tuple[str, float], c: dict, lr_homog: dict, tuned: dict) -> str:
    """What the pilots chose, in one sentence: ``soft`` (the soft methods' shared lr and λ), ``lr`` (the other
    Table 1 methods' rates, by display name), ``local`` (Local's name and its own rate), ``c`` (η₃ and ρ by
    variant), ``lr_homog`` (Table 2's rates) and ``tuned`` (each baseline's own hyperparameters)."""
    return (
        f"Chosen: the four soft-prediction methods lr {soft['lr']:g} and λ {soft['lam']:g}; "
        + ", ".join(f"{m} lr {v:g}" for m, v in lr.items())
        + f"; {local[0]} on its own lr {local[1]:g} (Table 1 runs it at {soft['lr']:g}); "
        + ", ".join(f"{m}'s η₃ {v['c_lr']:g} and ρ {v['rho']:g}" for m, v in c.items())
        + "; homogeneous: "
        + ", ".join(f"{m} {v:g}" for m, v in lr_homog.items())
        + "; the baselines' own: "
        + ", ".join(f"{m} " + ", ".join(f"{KEY_WORDS.get(k, k)} {v:g}" for k, v in o.items()) for m, o in tuned.items())
        + "."
    )


def channel_figure(diag: pd.DataFrame, arms):
    """The channel (:func:`channel_frame`) by round: a row per measure, a column per split, ``arms`` coloured
    as everywhere (KT-pFL strong); one title a column, the measure on each row's y axis."""
    import seaborn as sns

    g = sns.relplot(data=diag.melt(id_vars=["split", "arm", "seed", "round"], var_name="measure"), x="round",
                    y="value", hue="arm", row="measure", col="split", kind="line", height=2.4, aspect=1.45,
                    facet_kws={"sharey": "row"}, palette=muted_palette(arms))  # fmt: skip
    g.set_titles(template="{col_name}")  # the split over the top row; the measure on each row's y axis
    for ax in g.axes[1:].flat:
        ax.set_title("")
    for ax_row, measure in zip(g.axes, ["self-weight\nin the teacher", "distillation /\nprivate gradient"]):
        ax_row[0].set_ylabel(measure)
    sns.move_legend(g, "upper center", bbox_to_anchor=(0.45, 0.02), ncol=3, title=None, frameon=False)
    return g.figure


def c_heatmap(c: np.ndarray, order, tags):
    """c as a heatmap, rows and columns in ``order`` and labelled ``tags`` (:func:`class_order`)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(7.5, 6))
    sns.heatmap(c[np.ix_(order, order)], cmap="viridis", xticklabels=tags, yticklabels=tags, ax=ax)
    ax.set(xlabel="client n (teacher of), by its two classes", ylabel="client m (contributes)")
    return fig


def figure5_plot(fig5: pd.DataFrame):
    """Figure 5's analog: :func:`figure5_table`'s rows as stacked horizontal bars, one colour per part."""
    import seaborn as sns

    ax = fig5.plot.barh(stacked=True, figsize=(5.6, 3.4), color=sns.color_palette("tab10", len(PARTS)))
    ax.invert_yaxis()
    ax.set(xlabel="MB per client and round")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.3, -0.2), ncol=3, frameon=False)
    return ax.figure


def gain(row: dict) -> str:
    """A claim's mean difference as the glance says it ("+1.8")."""
    return row["ours (a − b, 95 % CI)"].split(" [")[0]


def leads(mech: dict, claims: list[dict], clients: int, local_epochs: int, train_images) -> list[tuple]:
    """The paper's lead claims in its order (Table 1 on both splits, then Table 2), whatever our verdict, as
    :func:`pflkit.claims.mark_leads` takes them: the claim's start, its short name, our setting and why
    (``mech``: Table 1's distillation check by split; ``claims``: every claim so far, for the data control)."""
    setting = f"FMNIST {{}}, {clients} clients, E = {local_epochs} (paper: 20)"
    out = []
    for split, start, short in (
        ("Non-IID_1", "Table 1, Non-IID_1: KT-pFL beats FedMD", "KT-pFL beats FedMD (Table 1, Non-IID_1)"),
        ("Non-IID_2", "Table 1, Non-IID_2: a learned c beats", "KT-pFL beats Sim-pFD (Table 1, Non-IID_2)"),
    ):
        why = f"c moves; distillation vs Local: {mech[split]['verdict']} ({gain(mech[split])})"
        out.append((start, short, setting.format(split), why))
    control = next((r for r in claims if "every training image" in r["claim"]), None)
    out.append(("Table 2, 20 clients: KT-pFL (parameters) beats the strongest", "KT-pFL beats every baseline (Table 2)",
                f"FMNIST, 20 clients, {train_images or 'all'} images (paper: all)",
                f"few images a client: all of them lift FedAvg + FT by {gain(control)}" if control else ""))  # fmt: skip
    return out


def setting_text(claims: list[dict], clients: int, local_epochs: int, train_images) -> str:
    """How our KT-pFL setting differs from the paper's, for the bottom line: the images a client holds and
    the local epochs a round, and what the data control measured (``claims``: the chapter's claims)."""
    if train_images is None:
        return ""
    control = next((r for r in claims if "every training image" in r["claim"]), None)
    lift = f"; every training image lifts FedAvg + FT by {gain(control)} points here" if control else ""
    return (f"Our clients hold about {train_images // clients} training images each and train {local_epochs} local "
            f"epochs a round, where the paper's hold all of theirs and train 20{lift}: a claim measured here is measured "
            "with far less data a client.")  # fmt: skip


SHORT_PARTS = dict(
    zip(PARTS, ["soft ↑", "teacher ↓", "batch indices ↓", "batch images ↓", "parameters ↑", "parameters ↓"])
)
"""Figure 5's parts as a narrow table's headers (↑ up, ↓ down)."""


def ledger_view(fig5: pd.DataFrame) -> pd.DataFrame:
    """:func:`figure5_table` as the notes show it: the parts' short headers (:data:`SHORT_PARTS`), MB to three
    decimals."""
    return fig5.rename(columns=SHORT_PARTS).round(3).rename_axis(index="MB per client and round")


def bullets(lines: list[str]) -> str:
    """Lines of a log as a Markdown list (wrapped by the page, where a printed line would scroll)."""
    return "\n".join(f"* {line}" for line in lines) if lines else "* none"


def setup_rows(p: dict) -> list[tuple[str, str, str]]:
    """The setup card's rows (what, ours, the paper's) from the chapter's parameters ``p`` (name -> value:
    TRAIN_IMAGES, TEST_IMAGES, DIRICHLET_ALPHA, CLIENTS, ARCHS, HOMOG_MODEL, PUBLIC_IMAGES, PUBLIC_PER_ROUND,
    ROUNDS, LOCAL_EPOCHS, DISTILL_EPOCHS, TEMPERATURE, EXTEND_CAP, SEEDS, T1_RUN, and PUBLIC_SETS: each dataset's
    public set, "" held out of its training images; default Fashion-MNIST's, held out)."""
    from ..pages import prose

    sets = p.get("PUBLIC_SETS") or {"fashion-mnist": ""}
    data = prose([KIT_NAMES.get(d, d) for d in sets])
    public = "; ".join(f"{KIT_NAMES.get(s, s)} for {KIT_NAMES.get(d, d)}" for d, s in sets.items() if s)
    public = f"images of {public}" if public else f"held-out {data} images"  # `book`: held out of Fashion-MNIST's
    theirs = prose([PAPER_NAMES.get(d, d) for d in sets]) if len(sets) > 1 else "Fashion-MNIST"
    return [
        ("Data", f"{data}, {prose(p['TRAIN_IMAGES'])} training and {prose(p['TEST_IMAGES'])} test images; each "
         "client is tested on its own class mix", f"{theirs}; each client's data split 75/25"),
        ("Splits", f"Non-IID_1: Dirichlet({p['DIRICHLET_ALPHA']}), every label; Non-IID_2: two labels a client",
         "the same two (no α given)"),
        ("Clients, models", f"{p['CLIENTS']}, five per architecture: {prose(p['ARCHS'].split(','))}; Table 2: all "
         f"{p['HOMOG_MODEL']}", "20 (Table 2: 20 and 100); full widths; Table 2: the CNN of McMahan et al."),
        ("Public set", f"{p['PUBLIC_IMAGES']} {public}, {p['PUBLIC_PER_ROUND']} a round",
         "MNIST (CIFAR-100 for CIFAR-10), 3000 a round" if len(sets) > 1 else "MNIST, 3000 a round"),
        ("Training", f"{p['ROUNDS']} rounds of {p['LOCAL_EPOCHS']} local epochs and {p['DISTILL_EPOCHS']} distillation "
         f"epoch; T = {p['TEMPERATURE']:g}; a still-improving headline arm runs on, up to {p['EXTEND_CAP']}×",
         "E = 20 local epochs"),
        ("Tuning", "every learning rate, λ, η₃ and ρ, and each baseline's own hyperparameter, on validation "
         "([the pilots](ktpfl-tuning))", "η₁ = η₂ = η₃ = 0.01"),
        ("Seeds", f"{prose(p['SEEDS'])}; a claim's arms to its seed plan, at most {p['T1_RUN']} in Table 1", ""),
    ]  # fmt: skip


def table1_frame(results: dict, paper: pd.DataFrame) -> pd.DataFrame:
    """Table 1 on every split (``results``: split -> SweepResult; ``paper``: the paper's Table 1 rows on
    Fashion_MNIST) as the page shows it (:func:`accuracy_view`), with the pooled accuracy at the round of best
    mean validation accuracy; rows indexed by split and method."""
    from ..claims import paper_vs_ours
    from ..verdicts import fmt_interval

    rows = []
    for split, res in results.items():
        t = paper_vs_ours(res, paper_row(paper, split), label="paper Fashion_MNIST")
        t["ours pooled, at the round of best mean val"] = [
            fmt_interval(res.values(a, "pooled_acc@best_val")) for a in t.index
        ]
        rows.append(t.assign(split=split).set_index("split", append=True))
    return accuracy_view(pd.concat(rows).reorder_levels(["split", "arm"]))


def table2_on(h: dict, paper: pd.DataFrame, n: int, *, near_points: float, seeds, inert_c: float, kp: str, label: str):
    """Table 2 on one more dataset (``h``: :func:`table2_runs`'s; ``paper``: the paper's Table 2 rows on it) as the
    page shows it, and its claims at ``n`` clients (:func:`table2_claims`, each prefixed with ``label``)."""
    pub = paper[paper.setting.str.startswith(f"{n} clients")].set_index("method").value
    c = table2_claims(h["runs"][n], h["first"], h["budget"], n, best=h["best"], pub=pub, seeds=seeds, inert_c=inert_c,
                      kp=kp, label=label, plan=h.get("plans", {}).get(n))  # fmt: skip
    return accuracy_view(table2_frame(h["runs"], paper, near_points).round({"ours − paper": 1})), [
        c["mech"],
        *c["claims"],
    ]


def factor_table(result, paper_arms: dict, seeds) -> pd.DataFrame:
    """Tables 3–6 beside the paper's Fashion_MNIST values, with how far c moved (mean over ``seeds``)."""
    from ..claims import paper_vs_ours

    cols = ["paper Fashion_MNIST", "ours mean_acc", "seeds", "still improving"]
    table = paper_vs_ours(result, paper_arms, label="paper Fashion_MNIST")[cols]
    table["max |c − 1/N| (mean over seeds)"] = [
        round(np.mean([c_moved(result, a, s) for s in seeds]), 2) for a in table.index
    ]
    return table


HOMOG_LABELS = {"lenet": "LeNet", "fedavg-cnn": "the CNN of McMahan et al."}


def claims_summary(claims: list[dict], n_runs: int, hours: float) -> str:
    """The sentence under the claims table: the verdicts' counts, the budget-limited ones, the runs and CPU-hours."""
    from ..pages import claims_tally

    return claims_tally(claims) + (
        f" The {n_runs} runs behind this page took {hours:.2f} CPU-hours (process CPU time, as measured where each ran)."
    )


def cost_sentence(cost: pd.DataFrame, model: str, paper_model: str) -> str:
    """How much larger the paper's Table 2 model is than ours (``cost``: :func:`model_cost`'s frame)."""
    times = cost.loc[paper_model] / cost.loc[model]
    return (
        f"The paper's CNN (`{paper_model}`, run at `paper`) has {times['parameters']:.0f}× the parameters of "
        f"Table 2's `{model}` and {times['multiply-adds per image']:.0f}× its multiply-adds."
    )


SETUP_NAMES = (
    "TRAIN_IMAGES TEST_IMAGES DIRICHLET_ALPHA CLIENTS ARCHS HOMOG_MODEL PUBLIC_IMAGES PUBLIC_PER_ROUND ROUNDS "
    "LOCAL_EPOCHS DISTILL_EPOCHS TEMPERATURE EXTEND_CAP SEEDS T1_RUN PUBLIC_SETS"
).split()


PROSE_NAMES = """
PILOT_SEEDS VAL_SHARE BASELINE_GRID_WORDS CLIENTS DATA_METHODS T1_RUN FEDDF_PATIENCE FEDDF_LR_GRID PUBLIC_IMAGES
SEEDS LOCAL_EPOCHS DIRICHLET_ALPHA BATCH PUBLIC_BATCH DISTILL_EPOCHS PUBLIC_PER_ROUND PILOT_ROUNDS LR_GRID
LR_EXTEND LAMBDA_GRID C_LR_GRID C_RHO_GRID PARAMS_C_LR_GRID PARAMS_RHO_GRID BASELINE_GRIDS ROUNDS EXTEND_CAP
NEAR_CHANCE HOMOG_MODEL SWEEP_ROUNDS E_CHOICES R_CHOICES ROBUST_MARGIN FOREIGN_PUBLIC TRAIN_IMAGES TEST_IMAGES
ARCHS ARCH_CHOICES TABLE2_CLIENT_COUNTS HOMOG_CHOICES TABLE2_METHODS TEMPERATURE PUBLIC_CHOICES MOMENTUM
FEDDF_STEPS TOP_K PFEDHN_LR LAMBDA C_LR RHO HOMOG_LABEL
""".split()  # the values the page's prose shows ({glue:text} roles)


def setup_markdown(ns: dict) -> str:
    """The setup card (Markdown) from the notebook's namespace ``ns`` (its parameters :data:`SETUP_NAMES`)."""
    from ..pages import setup_card

    return setup_card(setup_rows({k: ns[k] for k in SETUP_NAMES}))


def prose_values(ns: dict) -> dict:
    """The values the page's prose shows (:data:`PROSE_NAMES`), from the notebook's namespace ``ns``: its
    parameters, with the validation share and the baselines' grids in words computed here."""
    from ..engine import RunConfig
    from ..methods import display_name
    from ..pages import prose

    words = "; ".join(
        f"{display_name(m)}'s {KEY_WORDS.get(k, k)} over {prose(v)}"
        for m, axes in ns["BASELINE_GRIDS"].items()
        for k, v in axes.items()
    )
    computed = {"VAL_SHARE": f"{RunConfig().val_fraction:.0%}", "BASELINE_GRID_WORDS": words}
    return {k: computed[k] if k in computed else ns[k] for k in PROSE_NAMES}


def glue_all(ns: dict) -> None:
    """Glue every value the page's prose shows (:func:`prose_values`) as this execution set them."""
    from ..pages import glue_values

    glue_values(prose_values(ns))


def style_page() -> None:
    """The page's display settings: seaborn's theme, "—" for a missing value, table cells never cut short."""
    import seaborn as sns

    from ..pages import dash_for_missing

    sns.set_theme(context="notebook", style="whitegrid")
    dash_for_missing()
    pd.set_option("display.max_colwidth", None)


def glue_figure(name: str, fig) -> None:
    """Glue a figure (or what stands in its place) for a ``{glue:figure}`` directive and close it (nothing
    when ``fig`` is None)."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from myst_nb import glue

    if fig is not None:
        glue(name, fig)
        if isinstance(fig, Figure):
            plt.close(fig)


C_WORDS = {"c_lr": "η₃", "rho": "ρ"}
"""The coefficients' pilot options, as the prose names them."""


def c_moved_view(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`~pflkit.chapters.ktpfl.pilots_c_moved` as the page shows it: each pilot arm as "KT-pFL:
    η₃ = 0.01, ρ = 0.1 (seed 0)", the distance from 1/N with two decimals.  Used in *The coefficients' pilot*."""
    import re

    def label(arm: str) -> str:
        method, _, rest = arm.partition(" · ")
        method = method.removesuffix(" η₃, ρ")
        return f"{method}: " + re.sub(r"(\w+)=([^,\s]+)", lambda m: f"{C_WORDS.get(m[1], m[1])} = {m[2]}", rest)

    out = table.rename(index=label).round(2)
    out.index.name = "pilot arm"
    return out
