"""The pFedMB chapter's glue: the values and sentences its markdown reads by name ({glue:text} roles) and the setup
card under the findings, from the chapter's parameters and Table II's runs.  Used by *Setup* and the prose
throughout book/pfedmb.ipynb (glued once, at the chapter's end)."""

from __future__ import annotations

from IPython.display import Markdown

from ..experiments import SEED_CAP
from ..methods import get_method
from ..pages import glue_values, prose, setup_card
from .pfedmb import TRAIN_SIZE, arm, setup_rows
from .pfedmb_sections import Params
from .pfedmb_table2 import PAPER_FIG5, PaperTable2

DATA_NAMES = {
    "fashion-mnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
}  # as the prose writes them


def glue_texts(P: Params, runs, *, paper: PaperTable2, cap_text: str, paper_peak: int) -> None:
    """The values and sentences the chapter's markdown reads by name (glue), and the setup card: from the
    parameters, Table II's ``runs``, the ``paper``'s Table II, the seed cap's sentence (``cap_text``) and
    the B at which the paper's Figure 5 peaks."""
    from myst_nb import glue

    # the values the prose shows ({glue:text} roles), as this execution set them
    glue_values(P.prose_values())
    glue_values({"PAPER_GAP": ", ".join(f"{d} {st}: {g:+.2f}" for (d, st), g in paper.gap.items())})
    glue_values(
        {
            "FIRST_SEED": P.seeds[0],
            "IFCA_K": P.options["ifca"]["clusters"],
            "PFEDME_K": P.options["pfedme"]["K"],
            **{f"{m.upper()}_{k.upper()}_GRID": v for m, grids in P.baseline_grids.items() for k, v in grids.items()},
            "FEDAMP_LAM": P.options["fedamp"]["lam"],
        }
    )

    def share(rate):  # a share of the clients per round, in words
        return "all in every round" if rate >= 1 else f"{100 * rate:g} % per round"

    fig5_cfg = P.settings[P.fig5_setting]["cfg"]
    n_train = f"{TRAIN_SIZE.get(P.datasets[0], 60_000):,}".replace(",", " ")  # the official training set
    r2_run = [n for n in P.table2_settings if n.startswith("random 2 ")]
    resolved = {
        m: get_method(m).resolve_options(P.options.get(m, {})) for m in ("pfedme", "fedfomo", "fedamp", "fedprox")
    }
    ran = (
        f"every table and figure, Table II in all {len(P.settings)} of its settings"
        if set(P.table2_settings) == set(P.settings)
        else f"every table and figure, Table II in {len(P.table2_settings)} of its {len(P.settings)} settings"
    ) + f" and Figure 5 in {P.fig5_setting} (the paper: {PAPER_FIG5[1]})"
    deviations = (
        [f"Fashion-MNIST instead of CIFAR-10/100 (random {P.k_classes} classes for the paper's random 20 of CIFAR-100)"]
        if P.datasets[0] == "fashion-mnist"
        else [f"{P.datasets[0]} and {P.datasets[-1]} as in the paper, the kit's LeNet with {P.width} and "
              f"{2 * int(P.width)} filters (the paper's: 6 and 16)"]
    )  # fmt: skip
    if P.epochs != P.paper_epochs:
        deviations.append(
            f"E = {P.epochs} local epoch{'s' if P.epochs != 1 else ''} (the paper: {P.paper_epochs}), also in fine-tuning"
        )
    deviations.append("fixed rounds, not convergence")
    glue_values({
        "RAN_TEXT": ran,
        "DEVIATIONS_TEXT": "; ".join(deviations) + ".",
        "DATA_TEXT": " and ".join(DATA_NAMES.get(d, d) for d in dict.fromkeys(P.datasets)),
        "E_TEXT": (f"E = {P.epochs} local epoch{'s' if P.epochs != 1 else ''} at this profile, against the paper's "
                   f"{P.paper_epochs} (§V-A)." if P.epochs != P.paper_epochs else f"E = {P.epochs} local epochs, as in the paper (§V-A)."),
        "PAIR_GROUPS": P.pair_clients // 2,
        "ALPHA_GRID_MOM": P.alpha_lr_grid["momentum"],
        "ALPHA_GRID_PLAIN": P.alpha_lr_grid.get("no momentum", []),  # the paper profile's dry run pilots one variant
        "SEED_CAP": SEED_CAP,
        "T2_CAP_TEXT": cap_text,
        "SETTINGS_RUN_TEXT": (
            f"This profile runs all {len(P.settings)} settings."
            if set(P.table2_settings) == set(P.settings)
            else f"This profile runs {len(P.table2_settings)} of the {len(P.settings)}: {prose(P.table2_settings)} "
            f"({P.fig5_setting} runs for Figure 5, with pFedMB, FedAvg and Local only); the paper profile runs all "
            f"{len(P.settings)}."
        ),
        "R2_LOCAL_TEXT": (
            f"Local reaches {runs.values(arm(r2_run[0], 'Local')).mean():.1f} % in our {r2_run[0]} runs (Table II)"
            if r2_run
            else "a client alone tells two classes apart almost perfectly"
        ),
        "PAPER_LOCAL_R2_50": f"{paper.col(f'random 2 classes / {P.client_setups[-1][0]} clients')['Local']:.2f}",
        "PAPER_PEAK": paper_peak,
        "WIDTH_TEXT": f"{P.width} and {2 * int(P.width)}",
        "TRAIN_IMAGES_TEXT": f"{P.train_images} (a {P.data_fraction:g} share of the {n_train})" if P.train_images
        else f"all {n_train}",
        "TEST_TEXT": "The whole test set is used." if P.test_images is None
        else f"{P.test_images} of the 10 000 test images are used at this profile.",
        "CLIENT_SETUPS_TEXT": "; ".join(f"{n} clients, {share(r)}" for n, r in P.client_setups),
        "FIG5_ROUNDS_TEXT": f"{fig5_cfg['clients']} clients, {share(fig5_cfg['sample_rate'])}: "
        f"{int(round(P.fig5_visits / fig5_cfg['sample_rate']))} rounds",
        "PFEDME_LAM": resolved["pfedme"]["lam"],
        "PFEDME_PLR": P.options["pfedme"]["personal_lr"],
        "FEDFOMO_M": resolved["fedfomo"]["models"],
        "FEDFOMO_EPS": resolved["fedfomo"]["epsilon"],
        "FEDFOMO_DECAY": resolved["fedfomo"]["epsilon_decay"],
        "FEDAMP_GAMMA": resolved["fedamp"]["alpha_k"],
        "FEDPROX_MU": resolved["fedprox"]["mu"],
    })  # fmt: skip

    glue(
        "setup_card",
        Markdown(
            setup_card(
                setup_rows(
                    train_images=P.train_images,
                    data_fraction=P.data_fraction,
                    width=P.width,
                    branch_choices=P.branch_choices,
                    pair_clients=P.pair_clients,
                    pair_branches=P.pair_branches,
                    settings=P.table2_settings,
                    epochs=P.epochs,
                    paper_epochs=P.paper_epochs,
                    batch=P.batch,
                    momentum=P.momentum,
                    pair_rounds=P.pair_rounds,
                    visits=P.visits,
                    dirichlet_visits=P.dirichlet_visits,
                    fig5_visits=P.fig5_visits,
                    seeds=P.seeds,
                    cap=SEED_CAP,
                )
            )
        ),
        display=False,
    )  # the setup card, under the findings
