"""The pFedMB chapter's sections, the base the others build on: the chapter's parameters (:class:`Params`, built
once in book/pfedmb.ipynb from its parameters cell) and the names its sections share, the validation pilot every
setting's arms come from (:func:`pilot_tuner`), and "What reproduced", the compact claims table.  Each section takes
the parameters and what earlier sections returned, by name; none reads the notebook's namespace.  The other
sections: the pairs (Figure 3, Table I, Figure 4) are :mod:`pflkit.chapters.pfedmb_pairs`, Table II, Table III and
Figure 5 :mod:`pflkit.chapters.pfedmb_table2`, the laboratory notes :mod:`pflkit.chapters.pfedmb_notes`, the values
and sentences the markdown reads by name :mod:`pflkit.chapters.pfedmb_glue`; the
measurements, tables and words they are built from are in :mod:`pflkit.chapters.pfedmb`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from ..engine import RunConfig
from ..experiments import MIN_SEEDS, arms_for, claims_table, mark_leads, tune_axis
from ..methods import display_name, get_method
from ..pages import folded, glue_findings
from ..verdicts import RESOLUTION, fmt_interval, interval, seeds_text
from .pfedmb import PFEDMB, PROSE_NAMES, VALUE_WORDS, Compact, is_our_check, pilot_table

EQ5 = PFEDMB  # the pairs' pFedMB with α-weighted averaging (eq. 5) ...
EQ6 = f"{PFEDMB} (w/o α-weighted avg.)"  # ... and with plain averaging (eq. 6)
PAIR_MAIN = ["Local", "FedAvg", EQ6, EQ5]  # Table I's columns
VARIANTS = {EQ5: "with α-weighted averaging (eq. 5)", EQ6: "without (eq. 6)"}  # Figure 3's rows
BASELINES = ["pfedme", "ifca", "fedfomo", "fedamp", "fedprox", "fedper", "fedavg", "local"]  # Table II's, slowest first
OTHERS = [display_name(m) for m in BASELINES]
PAPER_NAME = {"FedAMP": "FedAmp"}  # the registry's names as the paper's Table II spells them
REGISTRY_NAME = {v: k for k, v in PAPER_NAME.items()}
ALPHA_MOMENTUM = {"momentum": -1.0, "no momentum": 0.0}  # the kit's alpha_momentum: -1 = the run's momentum
PLAN_COLUMN = {"plan": "plan (a word here is provisional, on the pilot seeds only)"}
PILOT_GRID_TITLE = (
    "The pilot's grid: validation accuracy (%) of each value, mean over the pilot seeds (two seeds: each seed's value "
    "in brackets; more: ± the 95 % interval); η is the learning rate (η_W for pFedMB)"
)


# ----------------------------------------------------------------------------- the chapter's parameters


@dataclasses.dataclass(frozen=True)
class Params:
    """The chapter's parameters, each under its notebook name in lower case (``SEEDS`` -> ``seeds``):
    the parameters cell's, and the setup cell's ``train_images``, ``margin``, ``width``, ``pilot_lr``
    and ``options``.  Table II's settings and the B each one chooses among follow from them."""

    profile: str
    datasets: list  # Table II's CIFAR-10 settings (and the pairs) read the first, its CIFAR-100 setting the last
    val_fraction: float
    seeds: list
    pilot_seeds: list
    data_fraction: float
    test_images: int | None
    epochs: int
    paper_epochs: int
    momentum: float
    batch: int
    lr_grid: list
    alpha_lr_grid: dict
    extend: int
    sigma_grid: list
    baseline_grids: (
        dict  # method -> {option: grid}: a baseline's own hyperparameters, one axis at a time, at the pilot's rate
    )
    pair_rounds: int
    pair_pilot_rounds: int
    pair_branches: int
    pair_clients: int
    visits: int
    dirichlet_visits: int
    client_setups: tuple
    pilot_visits: int
    k_classes: int
    table2_settings: list
    pilot_branches: int
    rho_resolution: float
    table2_run: int
    amp_evals: int
    ifca_evals: int
    branch_choices: list
    fig5_setting: str
    fig5_branches: list
    fig5_visits: int
    eq2_images: int
    concentrated_alpha: float
    scale_shift: float
    local_high: float
    amp_self_local: float
    amp_self_average: float
    amp_peak_flat: float
    train_images: int | None
    margin: float
    width: str
    pilot_lr: float
    options: dict

    @property
    def settings(self) -> dict[str, dict]:
        """Table II's six settings (two per kind of split, one per federation size of
        ``client_setups``): each one's dataset and partition options and the paper's (dataset, setting) it
        stands for: the paper's CIFAR-10 settings read ``datasets[0]``, its CIFAR-100 setting ``datasets[-1]``."""
        out = {}
        d10, d100 = self.datasets[0], self.datasets[-1]
        for n, rate in self.client_setups:
            out[f"random 2 classes / {n} clients"] = dict(
                cfg=dict(
                    dataset=d10, partition="pathological-equal", clients=n, sample_rate=rate, classes_per_client=2
                ),
                paper=("CIFAR10", f"random 2 classes / {n} clients"),
            )
            out[f"Dirichlet 0.4 / {n} clients"] = dict(
                cfg=dict(dataset=d10, partition="dirichlet", clients=n, sample_rate=rate, alpha=0.4),
                paper=("CIFAR10", f"Dirichlet 0.4 / {n} clients"),
            )
            out[f"random {self.k_classes} classes / {n} clients"] = dict(
                cfg=dict(
                    dataset=d100, partition="pathological", clients=n, sample_rate=rate,
                    classes_per_client=self.k_classes, shares=(0.3, 0.7),
                ),
                paper=("CIFAR100", f"random 20 classes with different size / {n} clients"),
            )  # fmt: skip
        return out

    @property
    def headline(self) -> list[str]:
        """Table II's headline settings, fixed in advance by name: every setting run but random 2 classes,
        which comes close to saturating on Fashion-MNIST (the check under Table II shows it)."""
        return [n for n in self.table2_settings if not n.startswith("random 2 ")]

    def choices_of(self, name: str) -> list[int]:
        """The numbers of branches validation chooses among in setting ``name``: Figure 5's setting sweeps
        more of them."""
        return self.fig5_branches if name == self.fig5_setting else self.branch_choices

    def visits_of(self, name: str) -> int:
        """Table II's visits per client in setting ``name``."""
        return self.dirichlet_visits if name.startswith("Dirichlet") else self.visits

    def prose_values(self) -> dict:
        """The values the prose shows ({glue:text} roles), under their notebook names (:data:`PROSE_NAMES`)."""
        kit = {"MIN_SEEDS": MIN_SEEDS, "RESOLUTION": RESOLUTION}
        return {k: kit[k] if k in kit else getattr(self, k.lower()) for k in PROSE_NAMES}


def _glue_figure(name: str) -> None:
    """Glue the current figure under ``name`` for a ``{glue:figure}`` with its caption, and close it; shown as
    :func:`pflkit.plots.png_with_text_size` writes it (importing :mod:`pflkit.plots` installs that), so that the
    browser check can read its smallest text."""
    from myst_nb import glue

    import pflkit.plots  # noqa: F401  (installs the figures' PNG formatter)

    fig = plt.gcf()
    glue(name, fig, display=False)
    plt.close(fig)


# ----------------------------------------------------------------------------- the validation pilot


class Pilot(NamedTuple):
    """A setting's validation pilot: the chosen config per label, the pilot's table, its edges (the choice
    before and after the grids grew), per label the learning-rate pilot and grid its config comes from
    (what the kit's divergence rule falls back on), and the pilot's sweeps."""

    chosen: dict
    table: pd.DataFrame
    edges: pd.DataFrame
    fallback: dict
    sweeps: list


def pilot_tuner(P: Params, store) -> Callable[..., Pilot]:
    """The validation pilot of one setting, as a function ``tuned(base, methods, *, mb_options, probe)``
    running its sweeps in ``store``, in two stages.
    1. At ``P.pilot_lr``: pFedMB's η_α over ``P.alpha_lr_grid`` with momentum on α and without (branches × √B),
       FedAMP's σ, and each baseline's own hyperparameters of ``P.baseline_grids`` (pFedMe's personal learning rate
       and then its λ, FedProx's μ; one axis at a time).
    2. The learning rate (``P.lr_grid``) of every method at its stage-1 choice; pFedMB with the branches as drawn
       and × √B.
    Every grid follows the kit's edge rule (``tune_axis``)."""

    def tuned(base: RunConfig, methods: list[str], *, mb_options: dict, probe) -> Pilot:
        """The validation pilot of one setting (``base``: its config with the pilot's rounds), in two stages.
        1. At P.pilot_lr: pFedMB's η_α over P.alpha_lr_grid with momentum on α and without (branches × √B, the
           kit's default: as drawn, a deep multi-branch net barely trains at some settings), FedAMP's σ, pFedMe's
           personal learning rate and then its λ, FedProx's μ (P.baseline_grids' axes in order, each at the last
           one's choice).
        2. The learning rate (P.lr_grid) of every method at its stage-1 choice; pFedMB with the branches as drawn
           and × √B.
        Every grid follows the kit's edge rule (``tune_axis``): a choice at an end of its grid adds the next value
        past it, at most P.extend times, and the pilot chooses again (best mean validation accuracy over
        P.pilot_seeds).  ``probe``: the experiment's own, so that a pilot run equal to a main run (at ``smoke``)
        is reused."""
        mid = dataclasses.replace(base, lr=P.pilot_lr)
        mb = dataclasses.replace(mid, method="pfedmb", options={**mb_options, "scale_init": True})
        sweeps = []

        def axis(configs, name, values):
            t = tune_axis(configs, name, values, P.pilot_seeds, store, extend=P.extend, probe=probe, progress=False)
            sweeps.append(t.result)
            return t

        variants = {f"{PFEDMB}, {k} on α": dataclasses.replace(mb, options={**mb.options, "alpha_momentum": ALPHA_MOMENTUM[k]})
                    for k in P.alpha_lr_grid}  # fmt: skip
        alpha = axis(variants, "alpha_lr", {f"{PFEDMB}, {k} on α": v for k, v in P.alpha_lr_grid.items()})
        best = alpha.result.select(list(alpha.chosen.values()))  # momentum on α or not
        mb = next(g[best] for g in alpha.grids.values() if best in g)
        stage2 = {display_name(m): arms_for([m], mid, P.options)[display_name(m)] for m in methods}
        pilots = [alpha]
        if "fedamp" in methods:
            pilots.append(axis({"FedAMP, σ": stage2["FedAMP"]}, "sigma", P.sigma_grid))
            stage2["FedAMP"] = pilots[-1].config("FedAMP, σ")
        for method, grids in P.baseline_grids.items():
            for option, values in grids.items() if method in methods else ():
                name = display_name(method)
                label = f"{name}, {VALUE_WORDS.get(option, option)}"
                pilots.append(axis({label: stage2[name]}, option, values))
                stage2[name] = pilots[-1].config(label)
        for scaled, k in ((False, "branches as drawn"), (True, "branches × √B")):
            stage2[f"{PFEDMB}, {k}"] = dataclasses.replace(mb, options={**mb.options, "scale_init": scaled})
        lr = axis(stage2, "lr", P.lr_grid)
        pilots.append(lr)
        chosen = {display_name(m): lr.config(display_name(m)) for m in methods}
        best = lr.result.select([lr.chosen[k] for k in stage2 if k.startswith(PFEDMB)])  # the initial scale
        mb_grid = next(k for k, g in lr.grids.items() if best in g)
        chosen[PFEDMB] = lr.grids[mb_grid][best]
        # for the kit's divergence rule: the learning-rate pilot and the grid each chosen config comes from
        fallback = {display_name(m): (lr, display_name(m)) for m in methods} | {PFEDMB: (lr, mb_grid)}
        return Pilot(chosen, pd.concat([pilot_table(t) for t in pilots]), pd.concat([t.edges() for t in pilots]),
                     fallback, sweeps)  # fmt: skip

    return tuned


WEAK_REFERENCE = {"pfedme": "Local", "fedprox": "FedAvg"}  # what a tuned baseline's weak mark measures it against


def tuned_baselines_why(pilots: dict, grids: dict, runs) -> dict[str, str]:
    """Why a baseline whose own hyperparameters the pilot tunes (``grids``: :class:`Params`'
    ``baseline_grids``) stays a weak baseline where Table II's claims mark it (for
    :func:`pflkit.claims.explain_weak`, keyed by the marked arm "<setting> · <method>"): the values its
    setting's pilot chose, its best pilot run against its reference's (:data:`WEAK_REFERENCE`: Local for
    pFedMe, FedAvg for FedProx) on validation, and the paired difference on the table's seeds (``runs``)."""
    why = {}
    for name, pilot in pilots.items():
        for method, axes in grids.items():
            label, ref = display_name(method), WEAK_REFERENCE.get(method, "Local")
            if label not in pilot.chosen or ref not in pilot.chosen:
                continue
            lr, _ = pilot.fallback[label]
            val = {m: lr.result.values(lr.chosen[m], "val_mean_acc").mean() for m in (label, ref)}
            cfg = pilot.chosen[label]
            opts = get_method(method).resolve_options(cfg.options)
            chosen = ", ".join(f"{VALUE_WORDS.get(k, k)} {opts[k]:g}" for k in axes)
            text = (f"tuned on this setting's validation pilot as pFedMB is ({chosen}, learning rate {cfg.lr:g}; each grid "
                    f"grown past an edge): its best pilot run scores {val[label]:.1f} % against {ref}'s {val[ref]:.1f} % on "
                    "validation")  # fmt: skip
            arm, other = f"{name} · {label}", f"{name} · {ref}"
            if arm in runs.arms and other in runs.arms:
                d = runs.paired(arm, other, "mean_acc").dropna()
                mean, half, n = interval(d)
                holds = half == half and mean - half <= 0 <= mean + half
                text += (f"; on the table's {seeds_text(n)}, {label} − {ref} is {fmt_interval(d)}"
                         + (": an interval that holds 0, so the table does not show it below" if holds else
                            ": the gap is the method's at this budget and data, not its tuning"))  # fmt: skip
            why[arm] = text
    return why


# ----------------------------------------------------------------------------- what reproduced


class Reproduced(NamedTuple):
    """The claims table (``claims``, with a column "claim of"), its rows with the paper's lead claims marked
    (``rows``), the paper's claims and our own checks."""

    claims: pd.DataFrame
    rows: list[dict]
    paper_rows: list[dict]
    our_rows: list[dict]


def what_reproduced(P: Params, rows: list[dict]) -> Reproduced:
    """The compact claims table of 'What reproduced' from the chapter's claims ``rows``, the paper's claims
    first, our own checks folded; the findings at the top of the page (glued)."""

    paper_rows = [r for r in rows if not is_our_check(r)]  # the paper's claims
    our_rows = [r for r in rows if is_our_check(r)]  # our checks: the mechanism checks and the diagnostic under Table I

    leads = []  # the paper's lead claims (Table II in its headline settings), whatever our verdict
    for r in [r for r in rows if r["headline"]]:
        where = r["claim"].split(": ")[0].removeprefix("Table II, ")  # "Dirichlet 0.4 / 15 clients"
        checks = [m for m in rows if m["kind"] == "mechanism" and m["claim"].startswith(where)]
        short = {"similar α": "α follows the label mixes", "plain averaging": "eq. 5 beats eq. 6"}
        why = "; ".join(next((v for k, v in short.items() if k in m["claim"]), "our check") + " (" +
                        m["ours (a − b, 95 % CI)"].split(" [")[0] + ")" for m in checks)  # fmt: skip
        what = (
            "beats every other method" if "beats" in r["claim"].split(": ", 1)[1] else "is comparable (±1) to the best"
        )
        leads.append((r["claim"].split(" (")[0], f"Table II, {where.split(' / ')[0]}: pFedMB {what}",
                      f"FMNIST {where.replace(' / ', ', ')}, E = {P.epochs} (paper: {P.paper_epochs})", why))  # fmt: skip
    rows = mark_leads(list(rows), leads)  # the caller's list unmarked
    fewer = f"a {P.data_fraction:g} share of the training images, " if P.data_fraction < 1 else ""
    setting = (
        f"Our clients train {P.epochs} local epoch{'s' * (P.epochs != 1)} a round on {fewer}where the paper's "
        f"train {P.paper_epochs}: pFedMB, which learns its branches and α together, has less to learn them with."
    )
    glue_findings(
        rows, "pFedMB", setting=setting if P.epochs < P.paper_epochs else "", own=is_our_check
    )  # atop the page
    claims = claims_table(rows)
    claims.insert(0, "claim of", ["ours" if is_our_check(r) else "the paper" for r in rows])
    paper_claims = claims[claims["claim of"] == "the paper"].drop(columns="claim of")
    own_claims = claims[claims["claim of"] == "ours"].drop(columns="claim of")
    display(
        Compact(paper_claims, "The claims in full, with the paper's numbers and the notes"),
        folded(
            own_claims, f"Our own checks ({len(own_claims)}): the mechanism checks and the diagnostic under Table I"
        ),
    )
    return Reproduced(claims, rows, paper_rows, our_rows)
