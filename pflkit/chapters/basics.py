"""The basics chapter's small measurements: the published numbers it sets beside its runs, and whether
two engines ran the same experiment."""

from __future__ import annotations

import math

import pandas as pd


def published(df: pd.DataFrame, setting_prefix: str) -> dict[str, float]:
    """A source's published accuracy per method, in the settings whose name starts with ``setting_prefix``."""
    d = df[df.setting.str.startswith(setting_prefix)]
    return dict(zip(d.method, d.value))


def paper_gap(source: dict[str, float], a: str, b: str) -> float | None:
    """The published difference a − b, or None when the source does not report both."""
    return source[a] - source[b] if a in source and b in source else None


def published_margin(source: dict[str, float], a: str, b: str, name: str, dataset: str = "FMNIST"):
    """The published margin a − b as the claims table prints it ("+11.6 (PFLlib)"), with its two
    accuracies (:class:`~pflkit.verdicts.PaperMargin`), or "(not reported)"."""
    from ..results import PaperMargin

    gap = paper_gap(source, a, b)
    if gap is None:
        return "(not reported)"
    return PaperMargin(f"{gap:+.1f} ({name})", datasets=[dataset], values=[(source[a], source[b])], vs=b)


def strip_times(rec: dict) -> list[dict]:
    """A run's per-round history without its wall-clock times: what two engines running the same
    experiment must agree on exactly."""
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in rec["history"]]


IMPROVING = {True: "yes", False: "no", None: "not measured"}


def published_table(finals: pd.DataFrame, names: list[str], improving: dict, pfllib: dict,
                    kt: dict | None = None) -> pd.DataFrame:  # fmt: skip
    """One setting's accuracy (%) beside the published numbers, a row per method: ours at the last
    round and at the best validation round, PFLlib's view (pooled clients, best test round), whether
    the arm was still improving, its seeds, PFLlib's number and (``kt``) KT-pFL's Table 2."""
    from ..verdicts import fmt_interval

    def ours(column: str) -> list[str]:
        return [fmt_interval(finals[finals.arm == m][column]) for m in names]

    table = pd.DataFrame(index=names)
    table["ours: last round"] = ours("mean_acc")
    table["ours: best val round"] = ours("mean_acc@best_val")
    table["PFLlib's view (pooled, best test)"] = ours("pooled_acc@best_test")
    table["still improving"] = [IMPROVING[improving.get(m)] for m in names]
    table["seeds"] = [finals[finals.arm == m].seed.nunique() for m in names]
    table["PFLlib"] = [pfllib.get(m) for m in names]
    if kt is not None:
        table["KT-pFL Table 2 (all labels)"] = [kt.get(m) for m in names]
    return table


def selection_optimism(finals: pd.DataFrame) -> pd.DataFrame:
    """Per setting and arm, the best round by test minus the best round by validation (points, mean ±
    95 % CI over seeds), over clients and pooled: what selecting the round on the test set adds."""
    from ..verdicts import fmt_interval

    gain = finals.assign(
        **{
            "mean over clients": finals["mean_acc@best_test"] - finals["mean_acc@best_val"],
            "pooled": finals["pooled_acc@best_test"] - finals["pooled_acc@best_val"],
        }
    )
    cols = ["mean over clients", "pooled"]
    return gain.groupby(["setting", "arm"], sort=False)[cols].agg(fmt_interval).unstack(0)


def room(ours: pd.Series, pub: dict, personal: list[str], ceiling: float, saturated: str) -> dict:
    """Whether a setting leaves room to judge: the strongest personalized arm and FedAvg, ours
    (``ours``: mean accuracy per arm) and PFLlib's (``pub``), whether PFLlib's best lies within
    ``ceiling`` points of 100 % and why ours is saturated ("no" when it is not)."""
    best = ours[personal].idxmax()
    best_pub = max((m for m in personal if m in pub), key=pub.get, default=None)  # None: PFLlib has no such setting
    near = "yes" if best_pub and 100 - pub[best_pub] < ceiling else "no"
    return {
        "ours: strongest personalized": f"{ours[best]:.1f} ({best})",
        "ours: FedAvg": f"{ours['FedAvg']:.1f}",
        "PFLlib: strongest personalized": f"{pub[best_pub]:.1f} ({best_pub})" if best_pub else "—",
        "PFLlib: FedAvg": f"{pub['FedAvg']:.1f}" if "FedAvg" in pub else "—",
        f"PFLlib within {ceiling:g} points of 100 %": "—" if best_pub is None else near,
        "saturated (ours)": saturated or "no",
    }


def tally(claims: pd.DataFrame, rows: list[dict], saturated: dict[str, str], seeds_note: str = "") -> list[str]:
    """The paragraph under the claims table, then a bullet per saturated setting and per contradicted
    claim: the count of each verdict word and of the budget-limited claims."""
    words = claims.verdict.value_counts()
    limited = int(claims.verdict.str.contains("budget-limited").sum())
    lines = [
        f"Of {len(claims)} claims: " + ", ".join(f"**{n}** {w}" for w, n in words.items())
        + f". {limited} of them rest on an arm that was still improving at the end of its budget"
        " (*budget-limited*, with how far it was still rising)." + seeds_note
    ]  # fmt: skip
    lines += [f"* The {s} setting is **{why}**: its claims stay in the table, labelled, and lead no finding."
              for s, why in saturated.items() if why]  # fmt: skip
    lines += [f"* *{r['claim']}*: {r['_v']}." for r in rows if r["_v"].word == "contradicted"]
    return lines


def plain(row: dict) -> str:
    """A claim's word with its flags, then ours: how a before-and-after table says it."""
    from ..claims import verdict_text

    return f"{verdict_text(row, bold=False)}, {row['ours (a − b, 95 % CI)']}"


def claim_rows(specs: dict, results: dict, pfllib: dict, kt: dict, plan: pd.DataFrame, *, n_clients: int,
               resolution: float, where: dict[str, str] | None = None,
               explained: dict | None = None) -> tuple[list[dict], dict]:  # fmt: skip
    """The page's claims, each an arm against FedAvg's global model (``specs``: per setting, claim →
    (arm, margin); a margin makes it a no-difference claim), judged on ``results`` with the seed ``plan``;
    ``pfllib`` and ``kt``: per setting, the published accuracies (method → %) of PFLlib and of KT-pFL's
    Table 2; ``where``: per setting, how a lead claim names it (default "FMNIST <setting>"); ``explained``:
    arm -> why it lags where it is a *weak baseline* (:func:`peer_explanations`).

    Where a setting has FedAvg + FT, its claim is the mechanism every personalized arm relies on
    (adapting to a client's own data pays off), checked against FedAvg's global model as it is, and the
    setting's headline claims link to it.  The first setting with room to judge (not saturated) carries
    the benchmarks' lead claims, in the paper's order.  Returns the rows and each setting's mechanism row."""
    from ..claims import claim, mark_leads, mechanism, saturation

    rows, mechs = [], {}
    for s, spec in specs.items():
        sat = saturation(results[s], m=resolution)
        ft = next((t for t, (m, _) in spec.items() if m == "FedAvg + FT"), None)
        mech = None
        if ft:
            paper = published_margin(kt[s], "FedAvg + FT", "FedAvg", "KT-pFL Table 2")
            row = claim(ft, results[s], "FedAvg + FT", "FedAvg", paper=paper,
                        resolution=resolution, saturated=sat, plan=plan)  # fmt: skip
            mech = mechanism(f"Mechanism ({s}): adapting to a client's own data acts (FedAvg + FT beats FedAvg)",
                             row["_v"], row["paper"], control="FedAvg's global model without the fine-tuning",
                             plan=plan, plan_name=ft, note=row["notes"])  # fmt: skip
            mechs[s] = mech
        for text, (m, mg) in spec.items():
            if text == ft:
                rows.append(mech)
                continue
            rows.append(claim(text, results[s], m, "FedAvg", paper=published_margin(pfllib[s], m, "FedAvg", "PFLlib"),
                              margin=mg, resolution=None if mg else resolution, headline=mg is None, saturated=sat,
                              plan=plan, mechanism=mech if mg is None else None, explained=explained))  # fmt: skip
    head = next((s for s in specs if not saturation(results[s], m=resolution)), None)
    if head:
        mech_row = mechs.get(head) or next((r for r in rows if r["kind"] == "mechanism"), None)
        why = f"fine-tuning FedAvg locally gains {mech_row['ours (a − b, 95 % CI)'].split(' [')[0]}" if mech_row else ""
        res = results[head]
        rounds = {a: res[a, res.seeds[0]]["config"]["rounds"] for a in res.arms}
        name = (where or {}).get(head, f"FMNIST {head}")
        mark_leads(rows, [(t, f"{m} beats FedAvg's global model",
                           f"{name}, {n_clients} clients, {rounds[m]} rounds" + (
                               f" (FedAvg ran on to {rounds['FedAvg']}; read at the budget both reached)"
                               if rounds["FedAvg"] != rounds[m] else ""), why)
                          for t, (m, mg) in specs[head].items() if mg is None and m != "FedAvg + FT"])  # fmt: skip
    return rows, mechs


def changed_claims(first: dict, specs: dict, rows: list[dict], mechs: dict, plan: pd.DataFrame, *, rounds: int,
                   resolution: float) -> dict[str, pd.DataFrame]:  # fmt: skip
    """Per setting whose rising arms ran on (``first``: its sweep at the first budget), each claim at
    ``rounds`` rounds beside the same claim with each arm run on to its stopping point, both read at the
    budget both reached."""
    from ..claims import claim

    out = {}
    for s, res0 in first.items():
        after = {r["claim"]: r for r in rows} | {t: mechs[s] for t, (m, _) in specs[s].items()
                                                  if m == "FedAvg + FT" and s in mechs}  # fmt: skip
        before = {t: claim(t, res0, m, "FedAvg", margin=mg, resolution=None if mg else resolution, plan=plan,
                           paper=after[t]["paper"] if t in after else "",
                           headline=bool(after.get(t, {}).get("headline")))  # a headline by its own plan
                  for t, (m, mg) in specs[s].items()}  # fmt: skip
        out[s] = pd.DataFrame([{"claim": t, f"at {rounds} rounds": plain(before[t]),
                                "arms run on, read at the budget both reached": plain(after[t])}
                               for t in specs[s] if t in after]).set_index("claim")  # fmt: skip
    return out


LEADS = ["FedPer", "Ditto", "pFedMe", "Per-FedAvg", "Local"]  # the arms the benchmarks' lead claims name


def headline_margins(specs: dict, pfllib: dict[str, float], fedavg_acc: float, saturated: str = "") -> dict:
    """A setting's headline claims for its seed plan (:func:`pflkit.verdicts.seed_plan`'s ``headlines``):
    claim -> PFLlib's margin over FedAvg (``pfllib``: method -> %) carried to our scale at FedAvg's pilot
    accuracy ``fedavg_acc``, or () where PFLlib reports none.  As :func:`claim_rows` judges them: a headline
    is an arm's claim against FedAvg without a margin, FedAvg + FT's being the mechanism; in a ``saturated``
    setting one without the paper's margin is not tested, so it plans no seeds.  Used in *The runs*."""
    heads = {}
    for text, (m, mg) in specs.items():
        if mg is not None or m == "FedAvg + FT":
            continue
        theirs = published_margin(pfllib, m, "FedAvg", "PFLlib")
        if hasattr(theirs, "carried"):
            heads[text] = theirs.carried(fedavg_acc)
        elif not saturated:
            heads[text] = ()
    return heads


def claim_specs(setting: str, fedprox_margin: float) -> dict[str, tuple[str, float | None]]:
    """A setting's claims, claim → (arm, margin), each against FedAvg's global model: every lead arm
    beats it; on a Dirichlet split FedAvg + FT beats it too; FedProx does not differ from it by more
    than ``fedprox_margin`` points (a margin makes a no-difference claim)."""
    specs = {f"{setting}: {m} beats FedAvg's global model": (m, None) for m in LEADS}
    if setting.startswith("dirichlet"):
        specs[f"{setting}: FedAvg + FT beats FedAvg"] = ("FedAvg + FT", None)
    specs[f"{setting}: FedProx and FedAvg do not differ (±{fedprox_margin:g} points)"] = ("FedProx", fedprox_margin)
    return specs


def summary_table(finals: pd.DataFrame) -> pd.DataFrame:
    """Per arm (rows) and setting (the inner column level), the means over seeds of the test and
    validation accuracy (%, one decimal), the seconds a run took, and the seeds run."""
    summary = finals.groupby(["setting", "arm"], sort=False).agg(
        **{
            "accuracy (%)": ("mean_acc", "mean"),
            "validation (%)": ("val_mean_acc", "mean"),
            "seconds a run": ("wall_s", "mean"),
            "seeds": ("seed", "nunique"),
        }
    )
    out = summary.unstack(0).round(1)
    out.index.name = None
    return out


def ran_on_text(budgets: dict[str, pd.DataFrame], rounds: int, notes: str = "basics-budgets") -> str:
    """One sentence per setting whose arms ran on past ``rounds`` (a budget other than 1×), naming them
    and linking the budgets in the notes ("" when none did)."""
    from ..pages import prose

    ran_on = {s: b[b.budget != "1×"] for s, b in budgets.items()}
    return " ".join(f"In the {s} setting {prose(list(b.index))} ran on past {rounds} rounds (budgets in the "
                    f"[laboratory notes]({notes}))." for s, b in ran_on.items() if len(b))  # fmt: skip


# ---- the datasets of the headline section (one at `book`; the paper profile's list at `paper`) ----

DATA_NAMES = {"fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10"}  # as the page names them
# each dataset as the published tables name it: PFLlib's leaderboard, KT-pFL's Table 2
PUBLISHED_NAMES = {"fashion-mnist": {"pfllib": "FMNIST", "ktpfl": "Fashion_MNIST"}, "cifar10": {"ktpfl": "CIFAR-10"}}
KT_NAMES = {"Fedavg": "FedAvg", "Per-Fedavg": "Per-FedAvg", "Fedavg-Local FT": "FedAvg + FT"}  # as KT-pFL prints them


def settings_for(datasets: list[str], alpha: float) -> dict[str, dict]:
    """The headline settings, label → RunConfig fields (dataset, partition and its options): the
    pathological split and a Dirichlet(``alpha``) split on each dataset.  With one dataset a label is
    the split alone ("pathological"); with several it names the dataset ("pathological on CIFAR-10")."""
    splits = {
        "pathological": dict(partition="pathological", classes_per_client=2, shares=(0.4, 0.6)),
        f"dirichlet({alpha})": dict(partition="dirichlet", alpha=alpha),
    }
    several = len(datasets) > 1
    return {(f"{s} on {DATA_NAMES.get(d, d)}" if several else s): dict(dataset=d, **kw)
            for d in datasets for s, kw in splits.items()}  # fmt: skip


def published_by_setting(pfllib: pd.DataFrame, ktpfl: pd.DataFrame, settings: dict[str, dict]) -> tuple[dict, dict]:
    """Per setting label, the published accuracies on its dataset and split: PFLlib's leaderboard
    (method → %; empty where PFLlib reports no such dataset) and KT-pFL's Table 2 at 20 clients
    (all labels in different counts; method → %, in the kit's method names; empty where absent)."""
    pf, kt = {}, {}
    for label, kw in settings.items():
        names = PUBLISHED_NAMES.get(kw["dataset"], {})
        rows = pfllib[pfllib.dataset == names.get("pfllib")]
        pf[label] = published(rows, "pathological" if kw["partition"] == "pathological" else "Dirichlet")
        k = ktpfl[(ktpfl.table == "Table 2") & (ktpfl.dataset == names.get("ktpfl"))
                  & ktpfl.setting.str.startswith("20 clients")]  # fmt: skip
        kt[label] = {KT_NAMES.get(m, m): v for m, v in zip(k.method, k.value)}
    return pf, kt


def kt_note(kt: dict[str, float], dataset: str, personal: list[str]) -> str:
    """KT-pFL's Table 2 on ``dataset`` in one sentence: its strongest personalized baseline and FedAvg
    ("" when the table has no such dataset)."""
    if "FedAvg" not in kt:
        return ""
    best = max((m for m in personal if m in kt), key=kt.get)
    return (f"KT-pFL's Table 2 ({DATA_NAMES.get(dataset, dataset)}, 20 clients holding all labels in different "
            f"counts): strongest personalized {kt[best]:.1f} % ({best}), FedAvg {kt['FedAvg']:.1f} %.")  # fmt: skip


# ---- the paper profile's cost ----

TRAIN_SIZE = {"fashion-mnist": 60_000, "mnist": 60_000, "cifar10": 50_000, "cifar100": 50_000}  # official training sets


def steps_a_round(dataset: str, clients: int, *, batch_size: int, local_steps: int | None = None,
                  train_images: int | None = None, val_fraction: float = 0.1) -> int:  # fmt: skip
    """Optimiser steps (batches) of one round in which every one of ``clients`` trains: ``local_steps``
    each, or one epoch of its training images (the training set, or ``train_images`` of it, less the
    ``val_fraction`` held out, shared equally) in batches of ``batch_size``."""
    if local_steps:
        return clients * local_steps
    per_client = (train_images or TRAIN_SIZE[dataset]) * (1 - val_fraction) / clients
    return clients * math.ceil(per_client / batch_size)


def paper_cost(p: dict) -> dict:
    """The runs of the chapter at the profile whose parameters cell set ``p`` and their optimiser steps:
    the headline settings (two splits a dataset), every method at the seed cap (an upper bound: the
    seed plan asks for fewer where the pilot seeds decide); the doublings of a still-rising lead arm up
    to ``EXTEND_CAP``; the learning-rate pilot unless it is the seed-0 run itself (one rate, the runs'
    rounds); the two runs of the Flower section (the kit's defaults, first dataset)."""
    from ..federation import RunConfig

    batch = p.get("BATCH_SIZE") or RunConfig.batch_size
    datasets, settings = p["DATASETS"], settings_for(p["DATASETS"], p["DIRICHLET_ALPHA"])
    n, rounds, cap = len(p["METHODS"]), p["ROUNDS"], p["SEED_CAP"]
    extend = [f for f in (2**k for k in range(1, 16)) if f <= p["EXTEND_CAP"]]
    pilot_free = len(p["LR_GRID"]) == 1 and p["PILOT_ROUNDS"] == rounds and set(p["PILOT_SEEDS"]) <= set(p["SEEDS"])
    runs = steps = 0
    per_run = {}
    for s, kw in settings.items():
        a_round = steps_a_round(kw["dataset"], p["N_CLIENTS"], batch_size=batch, local_steps=p["LOCAL_STEPS"],
                                train_images=p["TRAIN_IMAGES"])  # fmt: skip
        per_run[kw["dataset"]] = rounds * a_round
        leads = 1 + sum(mg is None for _, mg in claim_specs(s, p["FEDPROX_MARGIN"]).values())  # FedAvg too
        runs += n * cap + leads * cap * len(extend)
        steps += n * cap * rounds * a_round + leads * cap * sum(extend) * rounds * a_round
        if not pilot_free:
            pilots = n * len(p["LR_GRID"]) * len(p["PILOT_SEEDS"])
            runs, steps = runs + pilots, steps + pilots * p["PILOT_ROUNDS"] * a_round
    flower = p["FLOWER_ROUNDS"] * steps_a_round(datasets[0], p["FLOWER_CLIENTS"], batch_size=RunConfig.batch_size,
                                                local_steps=p["LOCAL_STEPS"], train_images=p["TRAIN_IMAGES"])  # fmt: skip
    return {
        "runs": runs + 2, "steps": steps + 2 * flower, "datasets": list(datasets), "clients": p["N_CLIENTS"],
        "rounds": rounds, "seeds": cap, "steps_per_run": per_run,
        "note": "two splits a dataset, every method at the seed cap, nominal local steps (one epoch a round; a "
                "method's extra inner or fine-tuning steps not counted); the pilot only where it is not the seed-0 "
                "run itself; the two runs on Flower",
    }  # fmt: skip


MODEL_TEXT = {
    "lenet": "LeNet (two convolutions of 16 and 32 filters, 120–84–10)",
    "fedavg-cnn": "the 4-layer CNN of McMahan et al. (`fedavg-cnn`)",
}  # the setup card's model row; fmt: skip


def training_text(rounds: int, local_steps: int | None, extend_cap: int, lr_grid: list[float],
                  batch_size: int | None = None, momentum: float | None = None) -> str:  # fmt: skip
    """The setup card's training row: the rounds and local work, the running on of a still-rising
    headline arm (where ``extend_cap`` allows it), the learning rate (tuned on a grid of several, else the
    one rate), and the batch and momentum where the profile sets them (None: the kit's defaults)."""
    text = f"{rounds} rounds of {'one local epoch' if local_steps is None else f'{local_steps} local steps'}"
    if extend_cap > 1:
        text += f"; a headline arm still improving runs on, to {extend_cap}×"
    text += "; learning rate tuned per method on validation" if len(lr_grid) > 1 else f"; learning rate {lr_grid[0]:g}"
    if batch_size:
        text += f", batch {batch_size}"
    if momentum == 0:
        text += ", plain SGD (no momentum)"
    return text


def on_both_engines(cfg, store) -> dict:
    """One run of ``cfg`` on the in-process engine and on Flower's simulation runtime (Ray), both with one
    torch thread (float sums depend on the thread count): ``{"in-process": record, "Flower simulation":
    record}``.  Kept in the chapter's store as one derived result (:meth:`pflkit.store.Store.derived`, keyed
    by the run's canonical config): at `book` the committed store holds it, at `smoke` (CI) it runs live."""
    import torch

    from ..engine import run
    from ..store import canonical

    def both() -> dict:
        from ..flower import run_flower  # here: Flower is imported only when the comparison runs

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return {"in-process": run(cfg), "Flower simulation": run_flower(cfg)}
        finally:
            torch.set_num_threads(threads)

    return store.derived("engines", canonical(cfg, 1), both)


# ----------------------------------------------------------------------------- the peer check

# what reading PFLlib's code (commit d832e76) showed each algorithm does differently from its paper
# and from the kit, where it could move the number: named in the peer table, measured where it matters
PEER_CODE_NOTES = {
    "PerAvg": "PFLlib's server calls each client's training twice a round: two local epochs, twice "
              "FedAvg's local work (the kit and the paper: one); α = β = the learning rate",
    "pFedMe": "its 'personalised' accuracy is its global model's: the optimiser returns the model's own "
              "parameters as the personal ones, so the server's broadcast overwrites them before every "
              "evaluation; its θ also carries over from minibatch to minibatch (the kit starts each inner "
              "problem at w, as Algorithm 1 reads) and its server weights clients by their images",
    "FedAMP": "PFLlib's proximal term is computed from detached weights (no gradient) and clients keep "
              "training their own model rather than starting from the server's message: its FedAMP "
              "trains as Local does",
    "Ditto": "the same algorithm (personal model first, then the global one, one epoch each)",
}  # fmt: skip


def peer_display(table: pd.DataFrame) -> pd.DataFrame:
    """The peer table (:func:`pflkit.peer.peer_table`) with human headers: a row per algorithm."""
    from ..methods import display_name

    ours = [f"{r.kit:.1f} [{r.lo:.1f}, {r.hi:.1f}]" if r.seeds > 1 else f"{r.kit:.1f}" for r in table.itertuples()]
    agree = {True: "yes", False: "no", None: "—"}
    return pd.DataFrame({
        "PFLlib's algorithm": table.algorithm,
        "the kit's method": [display_name(m) for m in table.method],
        "hyperparameters": [h or "—" for h in table.hyperparameters],
        "PFLlib (its run)": table.pfllib.round(1),
        "ours (mean [95 % CI])": ours,
        "seeds": table.seeds,
        "PFLlib − ours": table.difference.round(1),
        "agree": [agree[a] for a in table.agree],
    }).set_index("PFLlib's algorithm")  # fmt: skip


PEER_REFERENCES = {"FedAvg": "FedAvg global model", "Local": "Local models"}  # what a disagreeing curve may track


def peer_sentences(table: pd.DataFrame, tolerance: float, notes: dict[str, str] = PEER_CODE_NOTES,
                   pfllib: pd.DataFrame | None = None, near: float = 5.0) -> list[str]:  # fmt: skip
    """One bullet per algorithm: whether PFLlib's number and ours agree, and (where they do not, or
    where PFLlib's code differs) what PFLlib's code does differently.  With PFLlib's runs (``pfllib``), a
    disagreeing algorithm whose PFLlib curve stays within ``near`` points of PFLlib's FedAvg (or Local) at
    every round is said to, with our run of that reference beside it: it then behaves as that one does."""
    from ..methods import display_name

    curves = {} if pfllib is None else {a: g.set_index("round").accuracy for a, g in pfllib.groupby("algorithm")}
    ours, methods = dict(zip(table.algorithm, table.kit)), dict(zip(table.algorithm, table.method))
    lines = []
    for r in table.itertuples():
        name = display_name(r.method)
        if r.agree is None:
            head = f"**{name}**: no PFLlib run yet"
        else:
            verb = "agree" if r.agree else "disagree"
            head = (f"**{name}**: PFLlib {r.pfllib:.1f} %, ours {r.kit:.1f} % — they {verb} "
                    f"({r.difference:+.1f} points; tolerance ±{tolerance:g} or our interval)")  # fmt: skip
        note = notes.get(r.algorithm)
        for ref, what in PEER_REFERENCES.items():
            if r.agree is not False or ref == r.algorithm or ref not in curves or r.algorithm not in curves:
                continue
            gap = (curves[r.algorithm] - curves[ref]).abs().dropna()
            if len(gap) and gap.max() < near:
                head += (f"; PFLlib's {name} stays within {gap.max():.1f} points of PFLlib's {what} at every one of "
                         f"its {len(gap)} evaluations")  # fmt: skip
                if ref in ours and ours[ref] == ours[ref]:  # our run of the reference, where the check has one
                    head += f" (our {display_name(methods[ref])}: {ours[ref]:.1f} %)"
                break
        lines.append(f"* {head}." + (f" In PFLlib's code: {note}." if note else ""))
    return lines


def peer_explanations(table: pd.DataFrame) -> dict[str, str]:
    """Why an arm the peer check found in agreement with PFLlib's own code may lag here: per method that
    agrees (the kit's display name), the sentence a *weak baseline* flag's notes cite."""
    from ..methods import display_name

    return {
        display_name(r.method): f"the peer check finds our {display_name(r.method)} where PFLlib's own code is on "
        f"PFLlib's split at the same budget (PFLlib {r.pfllib:.1f} %, ours {r.kit:.1f} %, pooled test accuracy): "
        "its lag here is the method's at our budget, not a fault of our code"
        for r in table.itertuples()
        if r.agree
    }
