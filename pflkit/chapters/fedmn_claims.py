"""The FedMN chapter's claims: the rows of its claims table, computed from the sweeps' results and
the measurements of :mod:`pflkit.chapters.fedmn`, each judged by the book's verdict rule."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..verdicts import seeds_text
from .fedmn import PAPER_NAMES, pub_for, swap_gain


def clipped_interval(v, lo: float = -1.0, hi: float = 1.0, digits: int = 2, unit: str = "ARI") -> str:
    """A verdict's mean and 95 % interval as the claims table shows them, the interval cut to the
    range the quantity can take (an ARI is at most 1), for a claim row's ``ours``; ``unit=""`` leaves
    the unit out (a sentence that names it).
    Used by the claims of *The routing decisions* and *Beyond the paper*, and by that section's sentence."""
    seeds = f"({seeds_text(v.n)})"
    mean = f"{v.mean:+.{digits}f}" + (f" {unit}" if unit else "")
    if v.lo != v.lo:  # too few seeds for an interval
        return f"{mean} {seeds}"
    return f"{mean} [{max(v.lo, lo):+.{digits}f}, {min(v.hi, hi):+.{digits}f}] {seeds}"


SWAP_CLAIM = (
    "mechanism: a client scores higher with its own routing decision than with another group's (the swap test, points)"
)


def table2_claims(result, pub: pd.DataFrame, paper_row: dict, best: str, best_other: str, swap, *, flat: str,
                  plan=None, swap_plan: str = "", resolution: float = 1.0) -> list[dict]:  # fmt: skip
    """Table II's claims, the mechanism first: the swap test (``swap``: per seed, own − other decision,
    points), routing against the same network with every path on (arm ``flat``); then FedMN against the
    strongest baseline ``best``, FedEM against the strongest other ``best_other`` and FedAvg + FT against
    FedAvg, beside the paper's margins (``pub``: the paper's Table II, rows its methods, columns its
    datasets; ``paper_row``: our arm → its row there)."""
    from ..experiments import claim, mechanism, verdict
    from ..results import PaperMargin

    def name(a):
        return paper_row.get(a, a)

    def margin(a, b, prefix=""):  # the paper's a − b per dataset, with its numbers (a PaperMargin)
        va = {d: pub[d][name(a)] for d in pub.columns if not isinstance(b, str) or name(b) in pub.index}
        vb = {d: pub[d][name(b)] if isinstance(b, str) else b[d] for d in va}
        return PaperMargin(prefix + ", ".join(f"{d} {va[d] - vb[d]:+.1f}" for d in va), datasets=list(va),
                           values=[(va[d], vb[d]) for d in va])  # fmt: skip

    best_paper = {d: pub[d].drop(["FedMN", "FedEM"]).max() for d in pub.columns}
    mech = mechanism(f"Table II: {SWAP_CLAIM}", verdict(list(swap), resolution=resolution, budget=result.improving("FedMN")),
                     paper="personalised architectures (not measured there)",
                     control="a client of another label cluster's decision", plan=plan, plan_name=swap_plan)  # fmt: skip
    return [
        mech,
        claim("ours: routing beats the same network with every path on (FedMN − FedMN, no routing)", result, "FedMN",
              flat, paper="not measured", resolution=resolution, plan=plan, plan_name="FedMN − no routing"),
        claim(f"Table II: FedMN beats the strongest baseline ({best}, on validation)", result, "FedMN", best,
              paper=margin("FedMN", "FedEM", "vs FedEM: "), resolution=resolution, headline=True, mechanism=mech,
              plan=plan, plan_name="FedMN − strongest baseline"),
        claim(f"Table II: FedEM beats the other baselines (strongest: {best_other}, on validation)", result, "FedEM",
              best_other, paper=margin("FedEM", best_paper),
              resolution=resolution, plan=plan, plan_name="FedEM − strongest other"),
        claim("Table II: FedAvg+ (fine-tuned) beats FedAvg (the paper's text: on CIFAR-10; its table: CIFAR-10 and "
              "EMNIST)", result, "FedAvg + FT", "FedAvg", paper=margin("FedAvg + FT", "FedAvg"), resolution=resolution,
              plan=plan, plan_name="FedAvg + FT − FedAvg"),
    ]  # fmt: skip


def concept_claims(result, swap, aris, *, flat: str, plan=None, resolution: float = 1.0) -> list[dict]:
    """The claims under concept shift (beyond the paper): FedMN against FedEM, FedAvg and Local, routing
    against every path on (arm ``flat``), the swap test (``swap``: per seed, points) as the mechanism,
    and whether the decisions follow the groups (``aris``: per seed, the ARI of the path weights against
    the groups)."""
    from ..experiments import claim, claim_row, mechanism, verdict

    why = "the motivation (§I), not tested there"
    text = "beyond the paper: under concept shift "
    pairs = [("FedEM", "FedEM", "FedMN beats FedEM"), ("FedAvg", "FedAvg", "FedMN beats FedAvg"),
             ("Local", "Local", "FedMN beats Local (each client alone)"),
             ("no routing", flat, "routing beats every path on (FedMN − FedMN, no routing)")]  # fmt: skip
    rows = [claim(text + t, result, "FedMN", b, paper=why, resolution=resolution, plan=plan, plan_name=n)
            for n, b, t in pairs]  # fmt: skip
    mech = mechanism(f"Concept shift: {SWAP_CLAIM}", verdict(list(swap), resolution=resolution,
                     budget=result.improving("FedMN")), paper=why, control="a client of another group's decision")  # fmt: skip
    v = verdict(list(aris), unit="ARI", budget=result.improving("FedMN"))
    ari = claim_row(text + "FedMN's decisions follow the groups (ARI − 0)", v, paper=why, ours=clipped_interval(v),
                    mechanism=mech)  # fmt: skip
    return [*rows, mech, ari]


def fig2_claims(result, diffs: dict, mn_of: dict, claim_arms: dict, flat: dict, ratio, *, rounds: int, routing: str,
                plan=None, resolution: float = 1.0) -> list[dict]:  # fmt: skip
    """Figure 2's claims: per block count b, FedMN (the mean of its arrangements ``mn_of[b]``) against the
    FedAvg MLP of as many layers (``diffs[f"{b} blocks"]``, per seed; its arms ``claim_arms``), routing
    against every path on (``diffs[routing]``; the arms ``flat``), and the parameters transmitted
    (``ratio``: per seed, FedMN's over FedAvg's; judged as −log ratio, above 0 when FedMN sends fewer)."""
    from ..experiments import claim_row, verdict

    rows = []
    for b in mn_of:
        article = "an" if str(b)[0] == "8" or b in (11, 18) else "a"
        v = verdict(diffs[f"{b} blocks"], resolution=resolution, budget=result.budget(*claim_arms[f"{b} blocks"]))
        rows.append(claim_row(f"Figure 2, {b} blocks: FedMN (mean of its {len(mn_of[b])} architectures) is more accurate "
                              f"than {article} {b}-layer FedAvg MLP at round {rounds}", v, paper="higher accuracy",
                              plan=plan, plan_name=f"{b} blocks"))  # fmt: skip
    v = verdict(diffs[routing], resolution=resolution, budget=result.budget(*flat.values()))
    rows.append(claim_row("ours, Figure 2: routing beats every path on (each block count's first arrangement − the same "
                          "network without routing, mean over the block counts)", v, paper="not measured", plan=plan,
                          plan_name=routing))  # fmt: skip
    rows.append(claim_row("Figure 2: FedMN transmits fewer parameters than FedAvg (−log of FedMN / FedAvg)",
                          verdict(-np.log(ratio), unit="(−log ratio)"), paper="much less", digits=2))  # fmt: skip
    return rows


def routing_claims(ari, spread: float, mech: dict, spread_diffs, step: pd.DataFrame, budget=False) -> list[dict]:
    """The routing section's claims: whether clients of a label cluster get similar path weights (``ari``:
    per seed; ``spread``: Π's mean spread over clients; flagged by the swap test ``mech``), and whether a
    router trained every batch spreads Π more than one step a round (``spread_diffs``: per seed; ``step``:
    :func:`step_table` unformatted)."""
    from ..experiments import claim_row, flagged, mechanism, verdict
    from ..verdicts import INERT

    v = verdict(ari, unit="ARI", budget=budget)
    override = "it carries the flag mechanism inert because the swap test finds the clients' decisions interchangeable"
    notes = [f"the clients' path probabilities differ by {spread:.4f} on average (spread over clients, per path)"]
    row_ari = claim_row("ours: clients of a label cluster get similar path weights (ARI of the clustered path weights "
                        "vs their clusters − 0)", v, paper="personalised architectures per joint distribution "
                        "(not shown)", ours=clipped_interval(v), mechanism=mech,
                        note="; ".join(notes + ([override] if flagged(mech, INERT) else [])))  # fmt: skip
    top, once = step["Π's spread over clients"].max(), step.loc["once a round"]
    note = (f"neither reading personalises: Π's spread over clients is at most {top:.3f} on a 0 to 1 scale, and once a "
            f"round leaves Π between {once['Π lowest']:.2f} and {once['Π highest']:.2f}") if top < 0.01 else ""  # fmt: skip
    row_step = mechanism("Table II: mechanism: a router trained every batch spreads Π over the clients more than one step "
                         "a round", verdict(list(spread_diffs), unit="(Π spread)"),
                         paper="the router trains in the local steps (Algorithm 1, l. 19)",
                         control="one router step a round", digits=3, note=note)  # fmt: skip
    return [row_ari, row_step]


def oracle_claims(oracle: pd.DataFrame, rate_swap, resolution: float = 1.0, apart_swap=None) -> list[dict]:
    """The oracle's two claims on the trained network (``oracle``: :func:`oracle_table`), a client's own
    cluster's fitted decision against its partner cluster's and against the best common one, and the
    swap test with the router at the network's step size (``rate_swap``: per seed, points), judged
    within ± ``resolution``; given ``apart_swap`` (per seed), the swap test of decisions started apart too.
    Used in *What the router reads*."""
    from ..experiments import claim_row, verdict

    own = oracle["own cluster's"]
    return [
        claim_row("ours: on the trained network, a client scores higher with its own cluster's fitted decision than "
                  "with its partner cluster's (the oracle, points)", verdict(own - oracle["partner cluster's"],
                  resolution=resolution), paper="not measured"),
        claim_row("ours: on the trained network, a cluster's fitted decision beats the best common one (the oracle, "
                  "points)", verdict(own - oracle["best common"], resolution=resolution), paper="not measured"),
        claim_row(f"ours: at the network's step size the router's decisions stay interchangeable (swap test within "
                  f"±{resolution:g} point)", verdict(list(rate_swap), margin=resolution), paper="not measured"),
    ] + ([claim_row(f"ours: decisions started apart end interchangeable (swap test within ±{resolution:g} point)",
                    verdict(list(apart_swap), margin=resolution), paper="not measured")]
         if apart_swap is not None else [])  # fmt: skip


def departure_claims(result, options, ari: pd.DataFrame, mech: dict, *, paper_arm: str, frozen: str, plan=None,
                     resolution: float = 1.0) -> list[dict]:  # fmt: skip
    """The departures' claims: the paper's FedMN (arm ``paper_arm``) against each departure of the authors'
    code (``options``: their names; arm "FedMN, <name>"), and the routing claim against its control, the
    ARI with the router trained minus frozen at its initialisation (``ari``: per seed, a column per arm;
    flagged by the swap test ``mech``)."""
    from ..experiments import claim, claim_row, verdict

    rows = [claim(f"ours: the paper's FedMN − {n} (both at the paper arm's tuned rate)", result, paper_arm,
                  f"FedMN, {n}", paper="not measured", resolution=resolution, plan=plan, plan_name=n)
            for n in options]  # fmt: skip
    v = verdict(ari[paper_arm] - ari[frozen], unit="ARI", budget=result.budget(paper_arm, frozen))
    rows.append(claim_row("ours: training the router makes clients of a label cluster share decisions (ARI, trained "
                          "router − router frozen at its initialisation)", v, paper="routing per joint distribution",
                          digits=2, mechanism=mech))  # fmt: skip
    return rows


# ----------------------------------------------------------------- Table II on each dataset (the paper profile)


def on_dataset(rows: list[dict], name: str) -> list[dict]:
    """Claims rows of a dataset after the first, named by it: "Table II: …" reads "Table II on
    CIFAR100: …", "ours: …" reads "ours, CIFAR100: …" (the lead claim stays the first dataset's)."""
    label = PAPER_NAMES.get(name, name)
    out = []
    for r in rows:
        text = r["claim"]
        for head, new in (("Table II: ", f"Table II on {label}: "), ("ours: ", f"ours, {label}: ")):
            if text.startswith(head):
                text = new + text[len(head) :]
        out.append(r | {"claim": text})
    return out


def table2_claims_on(runs: dict, pub: pd.DataFrame, v: dict) -> dict:
    """Per dataset of ``runs`` (its :func:`table2_on`): :func:`table2_claims` beside the paper's column
    for it, the rows of every dataset after the first named by it (:func:`on_dataset`)."""
    out = {}
    for i, (name, r) in enumerate(runs.items()):
        rows = table2_claims(r.t2, pub_for(pub, name), v["PAPER_ROW"], r.best, r.best_other,
                             swap_gain(r.t2, "FedMN", v["ROUNDS"]), flat=v["NO_ROUTE"], plan=r.plan,
                             swap_plan=v["SWAP"], resolution=v["RESOLUTION"])  # fmt: skip
        out[name] = rows if i == 0 else on_dataset(rows, name)
    return out
