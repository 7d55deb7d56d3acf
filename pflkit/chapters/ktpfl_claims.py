"""The KT-pFL chapter's claims, from its runs: Table 1's (KT-pFL against FedMD, Sim-pFD, Local and the
strongest other method, with the coefficients' mechanism), Tables 3–6's factors, Table 2's at every
client count, the data-per-client control, the coefficients' claims and Figure 5's.  Runs in, claims-table
rows out: the runs are :mod:`pflkit.chapters.ktpfl`, what the page says of them
:mod:`pflkit.chapters.ktpfl_page`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..claims import claim, claim_row, flagged, mechanism, say
from ..pages import claim_bullets
from ..results import PaperMargin, margin_text, pair_margin
from ..verdicts import INERT, SEED_CAP, WEAK_BELOW, seed_plan, verdict
from .ktpfl import LOCAL, NAME2, NO_SERVER, STEPS_CTL, T2_HEADLINE, TOPK_A, c_moved, paper_margin


def c_mechanism(text: str, result, arm: str, seeds, threshold: float, **row) -> dict:
    """The mechanism check of the claims about what c learns: c leaves its start 1/N in ``arm``'s runs.
    Per seed, the largest |c_mn − 1/N| less ``threshold`` (c "moved" beyond it: the acting side > 0),
    judged by the book's rule against uniform c (FedMD's mixture); ``row``: :func:`~pflkit.claims.claim_row`'s
    options."""
    far = [c_moved(result, arm, s) for s in seeds if (arm, s) in result.records]
    seeds = f"{len(far)} seed{'s' if len(far) != 1 else ''}"
    ours = f"largest |c − 1/N| {np.mean(far):.3f} (mean over {seeds}; above {threshold:g} on {sum(f > threshold for f in far)})"
    v = verdict([f - threshold for f in far], unit=f"(|c − 1/N| − {threshold:g})")
    return mechanism(text, v, control="uniform c = 1/N (FedMD's mixture)", ours=ours, **row)


def table1_claims(
    split: str,
    res,
    first,
    budget: pd.DataFrame,
    *,
    best: str,
    plan,
    pub: dict,
    rounds: int,
    inert_c: float,
    resolution: float,
) -> dict:
    """Table 1's claims on one split, and what the page says of them.  ``res``: the split's runs (each headline
    arm at its stopping point), ``first``: the same at the first budget, ``budget``: the headline arms'
    budgets (:func:`~pflkit.sweeps.until_flat`), ``best``: the strongest other method on validation,
    ``plan``: the seed plan, ``pub``: the paper's numbers (method -> value).  Returns ``mech`` (distillation
    against Local, λ = 0), ``mech_c`` (c leaves 1/N), ``claims`` (both, then the paper's claims), ``lines`` (the
    bullets under the table) and ``notes`` (the controls and the seeds run, for the laboratory notes)."""
    pub_best = max((a for a in res.arms if a in pub and a != "KT-pFL"), key=pub.get)
    mech = mechanism(
        f"Table 1, {split}: mechanism: distillation raises accuracy (KT-pFL − Local, λ = 0)",
        res.compare("KT-pFL", LOCAL, resolution=resolution),
        paper="(not reported)",
        control="λ = 0 (Local)",
        plan=plan,
        plan_name="KT-pFL − Local",
    )
    seeds = [s for a, s in res.records if a == "KT-pFL"]
    text = f"Table 1, {split}: mechanism: c leaves 1/N (largest |c − 1/N| > {inert_c:g})"
    mech_c = c_mechanism(text, res, "KT-pFL", seeds, inert_c, paper="c learned by eq. 7")
    # a claim about c rests on both: an inert one of them flags it "mechanism inert"
    about_c = next((m for m in (mech, mech_c) if flagged(m, INERT)), mech_c)
    pairs = [(best, f"KT-pFL beats the strongest other method ({best}, on validation)", "KT-pFL − strongest other")]
    pairs = pairs * (best not in ("FedMD", "Sim-pFD"))  # else the next rows make it
    pairs += [
        ("FedMD", "KT-pFL beats FedMD (learned c − uniform c)", "KT-pFL − FedMD"),
        ("Sim-pFD", "a learned c beats a similarity-computed c (KT-pFL − Sim-pFD)", "KT-pFL − Sim-pFD"),
    ]
    claims = [mech, mech_c]
    for b, what, name in pairs:
        # the paper's margin for the claim's own comparison (over that method, or the paper's strongest among
        # our arms where it does not report ours), and beside it the margin over its strongest comparator
        top = margin_text(pub, "KT-pFL")
        own = b if b in pub else pub_best
        gap = pair_margin(pub, "KT-pFL", own, dataset="FMNIST", digits=2,
                          strongest=f"{top.margins[0]:+.2f} vs {top.vs}" if top.vs != own else "")  # fmt: skip
        claims.append(
            claim(
                f"Table 1, {split}: {what}",
                res,
                "KT-pFL",
                b,
                paper=gap,
                resolution=resolution,
                plan=plan,
                plan_name=name,
                mechanism=about_c if b in ("FedMD", "Sim-pFD") else mech,
                headline=b == best,
            )
        )
    lines = [claim_bullets(claims)]
    ran_on = budget[budget.budget != "1×"]
    if len(ran_on):  # which headline arms ran longer, and what that changed
        name = "KT-pFL − strongest other" if best not in ("FedMD", "Sim-pFD") else f"KT-pFL − {best}"
        now = claims[2 + [b for b, _, _ in pairs].index(best)]  # the headline's claim (saturated: not a headline)
        before = claim(
            "before",
            first,
            "KT-pFL",
            best,
            resolution=resolution,
            plan=plan,
            plan_name=name,
            paper=now["paper"],
            headline=bool(now.get("headline")),  # judged as the headline is, by its own plan
        )
        arms = " and ".join(f"{r.arm} ran on to {r.rounds} rounds" for r in ran_on.itertuples())
        lines.append(
            f"* {split}: {arms} (still improving at {rounds}); the headline read {say(before)} at {rounds} rounds, "
            f"{say(now)} at the budget both arms reached."
        )
    # the two controls, measured (not claims of the paper): FedDF's server step, TopK's rule in the authors' code
    controls = [("FedDF", NO_SERVER, "FedDF's server distillation")]
    controls += [(TOPK_A, "TopK-pFD", "the authors' TopK rule against the paper's")] * (TOPK_A in res.arms)
    notes = [
        f"* {split}, control: {w} ({a} − {b}): {res.compare(a, b, resolution=resolution)}." for a, b, w in controls
    ]
    runs = pd.Series([a for a, _ in res.records]).value_counts()
    if runs.nunique() > 1:  # some arms ran their claims' seed plan further than the others
        more = runs[runs > runs.min()]
        notes.append(
            f"* {split}: {' and '.join(more.index)} ran {more.max()} seeds (their claim's seed plan), the other arms "
            f"{runs.min()}: the table's means are over each arm's own seeds; every claim pairs the seeds its two arms share."
        )
    return {"mech": mech, "mech_c": mech_c, "claims": claims, "lines": lines, "notes": notes}


def factor_claims(
    th, pf: dict, *, e: list, public: list, rho: list, foreign: tuple[str, str], n_foreign: int, public_images: int,
    sweep_rounds: int, margin: float, helps, inert_c: float, seeds: list, resolution: float,
) -> tuple[list[dict], pd.DataFrame]:  # fmt: skip
    """The claims of Tables 3–6 on the factor sweep ``th`` (arms "E=…", "|D_r|=…", "ρ=…" and the two public
    sets ``foreign`` = (other domain, held out)), with the paper's numbers ``pf`` (:func:`paper_factors`), and
    their seed plan.  ``e``, ``public``, ``rho``: the values run; ``margin``: the band of "has little effect";
    ``helps``: whether distillation helped on Non-IID_1 (a Verdict on validation accuracy).  A "little
    effect" claim is not tested where its factor acts on nothing: Tables 4 and 5 unless distillation helped,
    Table 4 unless c moved beyond ``inert_c`` at one of its two values of ρ."""
    e_lo, e_hi = f"E={min(e)}", f"E={max(e)}"
    small, large = f"|D_r|={min(public)}", f"|D_r|={max(public)}"
    rho_lo, rho_hi = f"ρ={min(rho):g}", f"ρ={max(rho):g}"
    foreign_arm, own_arm = foreign
    pairs = {"E": (e_hi, e_lo), "|D_r|": (large, small), "ρ": (rho_lo, rho_hi), "public set": (foreign_arm, own_arm)}
    pairs = {k: (a, b) for k, (a, b) in pairs.items() if a != b}
    plan = seed_plan({k: list(th.paired(a, b)) for k, (a, b) in pairs.items()}, cap=SEED_CAP, resolution=resolution,
                     margins={"ρ": margin, "public set": margin})  # fmt: skip
    pub3, pub4, pub6 = pf["E"], pf["rho"], pf["public"]
    rows = []
    if e_lo != e_hi:
        rows.append(claim(f"Table 3: more local epochs a round speed convergence ({e_hi} − {e_lo} after the same "
                          f"{sweep_rounds} rounds, so {max(e) // min(e)}× the private epochs; the paper: "
                          "'larger values of E can benefit the convergence')", th, e_hi, e_lo, plan=plan, plan_name="E", unit="rounds",
                          paper=PaperMargin(f"{pub3[max(pub3)] - pub3[min(pub3)]:+.2f} (E={max(pub3)} vs E={min(pub3)})",
                                            values=[(pub3[max(pub3)], pub3[min(pub3)])])))  # fmt: skip
    if small != large:
        lo_k, hi_k = min(public), max(public)
        gap = (PaperMargin(f"{pub6[hi_k] - pub6[lo_k]:+.1f} ({hi_k} vs {lo_k})", values=[(pub6[hi_k], pub6[lo_k])])
               if lo_k in pub6 and hi_k in pub6 else "—")  # fmt: skip
        rows.append(claim(f"Table 6: a larger public batch helps ({large} − {small})", th, large, small, paper=gap,
                          plan=plan, plan_name="|D_r|"))  # fmt: skip
    if rho_lo != rho_hi:
        pub_rho = [pub4[r] for r in (min(rho), max(rho)) if r in pub4]
        rows.append(claim(f"Table 4: accuracy is robust to ρ ({rho_lo} vs {rho_hi}, ±{margin:g} points; the text "
                          "adds that a significantly large ρ hurts)", th, rho_lo, rho_hi, margin=margin, plan=plan,
                          plan_name="ρ", paper=f"{min(pub4.values()):.1f}–{max(pub4.values()):.1f} over ρ ∈ {sorted(pub4)}"
                          + (f"; {pub_rho[1] - pub_rho[0]:+.2f} for this pair" if len(pub_rho) == 2 else "")))  # fmt: skip
    rows.append(claim(f"Table 5: the public set's domain matters little ({foreign_arm} vs Fashion-MNIST held out, "
                      f"{n_foreign} images against {public_images}, ±{margin:g} points)", th, foreign_arm, own_arm,
                      margin=margin, plan=plan, plan_name="public set",
                      paper=PaperMargin(f"{pf['domain']:+.2f} (MNIST vs the unlabeled open dataset)", [pf["domain"]])))  # fmt: skip
    # "has little effect" passes by itself where the factor acts on nothing: ρ acts through c, and both ρ and the
    # public set act through distillation
    c_far_rho = max(np.mean([c_moved(th, a, s) for s in seeds]) for a in (rho_lo, rho_hi))
    for i, r in enumerate(rows):
        why = None
        if r["claim"].startswith(("Table 4", "Table 5")) and helps.word != "reproduces":
            why = (f"distillation was not shown to help on Non-IID_1 (KT-pFL − Local on validation accuracy, so that "
                   f"the gate reads no test number: {helps})")  # fmt: skip
        elif r["claim"].startswith("Table 4") and c_far_rho < inert_c:
            why = f"c stayed within {inert_c:g} of 1/N at both values of ρ (largest |c − 1/N|: {c_far_rho:.4f})"
        if why:
            rows[i] = claim_row(r["claim"], verdict([]), paper=r["paper"], ours=why)
    return rows, plan


def half_updates_why(res, n: int, arm: str = "Per-FedAvg", ref: str = "FedAvg") -> dict[str, str]:
    """Why ``arm`` (Per-FedAvg) reads below ``ref`` (FedAvg) on Table 2's ``n`` clients at one budget of samples
    (the rule's unit), measured on the stored curves: its adaptation step spends every other minibatch, so at
    equal local epochs it makes half ``ref``'s model updates; read at equal updates (``ref`` at the evaluation
    nearest half its rounds), per seed both ran. For :func:`pflkit.claims.explain_weak`; {} without such seeds,
    or where ``arm`` is still more than :data:`~pflkit.verdicts.WEAK_BELOW` below ``ref`` at equal updates."""
    seeds = [s for s in res.seeds if (arm, s) in res.records and (ref, s) in res.records]
    if not seeds:
        return {}
    ours = np.mean([100 * res[arm, s]["final"]["mean_acc"] for s in seeds])
    last = res[ref, seeds[0]]["final"]["round"]
    half = [min(res[ref, s]["history"], key=lambda h: abs(h["round"] - last / 2)) for s in seeds]
    theirs = np.mean([100 * h["mean_acc"] for h in half])
    if ours < theirs - WEAK_BELOW["FedAvg"]:  # still below at equal updates: this is not the reason
        return {}
    return {arm: (f"the method's own cost, not a bug: {arm} spends every other minibatch on its adaptation step, so "
                  f"at equal samples it makes half {ref}'s model updates; at equal updates ({ref} read at round "
                  f"{half[0]['round']} of {last} on its stored curve) it reads {ours:.1f} % against {ref}'s "
                  f"{theirs:.1f} % (Table 2, {n} clients, {len(seeds)} seeds)")}  # fmt: skip


def steps_why(res, ctl, n: int, images: float, arm: str = "Per-FedAvg", ref: str = "FedAvg") -> dict[str, str]:
    """Why ``arm`` (Per-FedAvg) reads far below ``ref`` (FedAvg) at ``n`` clients, measured by a control run: a
    Per-FedAvg step takes two minibatches, so at the same local epochs it makes half ``ref``'s model updates or
    fewer (a client's ``images`` training images in one minibatch: one step of three minibatches); ``ctl``: ``arm``
    at twice the local epochs (:func:`~pflkit.chapters.ktpfl.steps_control`, arm :data:`STEPS_CTL`), ``ref``'s
    updates on twice its samples.  The reason stands where the control closes at least half of the gap (mean over
    the seeds all three ran); {} otherwise, or without such seeds."""
    seeds = [s for s in ctl.seeds if all((a, s) in r.records for r, a in ((res, arm), (res, ref), (ctl, STEPS_CTL)))]
    if not seeds:
        return {}
    acc = {a: np.mean([100 * r[a, s]["final"]["mean_acc"] for s in seeds]) for r, a in ((res, arm), (res, ref),
                                                                                       (ctl, STEPS_CTL))}  # fmt: skip
    cfg = res[arm, seeds[0]]["config"]
    epochs, batch = cfg["local_epochs"], cfg["batch_size"]
    batches = epochs * -(-round(images) // batch)  # a typical client's minibatches a round: ref's updates
    if acc[STEPS_CTL] - acc[arm] < (acc[ref] - acc[arm]) / 2:  # the control does not close the gap: not the reason
        return {}
    closed = (acc[STEPS_CTL] - acc[arm]) / (acc[ref] - acc[arm])
    share = "the whole gap" if closed >= 1 else f"{100 * closed:.0f} % of the gap"
    return {arm: (f"its step count at this client size, not a bug: a {arm} step takes two minibatches, so a client "
                  f"with about {images:.0f} training images (minibatches of {batch}) makes {batches // 2} model "
                  f"update{'s' * (batches // 2 != 1)} a round where {ref} makes {batches}; at twice the local epochs "
                  f"({ref}'s updates, twice its samples) it reads {acc[STEPS_CTL]:.1f} % against {ref}'s "
                  f"{acc[ref]:.1f} % ({acc[arm]:.1f} % at {epochs} epochs): the updates account for {share} "
                  f"(Table 2, {n} clients, {len(seeds)} seeds)")}  # fmt: skip


def undertrained_why(res, n: int, ref: str = "FedAvg") -> dict[str, str]:
    """Why an arm reads below ``ref`` at ``n`` clients where each client trains only a few times in the budget
    (a share of the clients a round): each client's visits, and how far the arm and ``ref`` still rose over the
    last fifth on validation (their stored curves, mean over seeds); only for an arm still rising (one that
    falls is not under-trained).  For :func:`pflkit.claims.explain_weak`."""
    gain = res.finals().groupby("arm").gain_last_fifth.mean()
    if ref not in gain.index:
        return {}
    cfg = next(iter(res.records.values()))["config"]
    visits = cfg["rounds"] * (cfg.get("sample_rate") or 1.0)
    seeds = len(res.seeds)
    return {
        a: (
            f"under-trained at this budget, not broken: at {n} clients each client trains about {visits:.0f} times "
            f"in {cfg['rounds']} rounds, too few for its own personalised model; {a} still rose {gain[a]:+.1f} "
            f"points over the last fifth on validation ({ref} {gain[ref]:+.1f}; {seeds} seeds)"
        )
        for a in res.arms
        if a != ref and gain.get(a, 0.0) > 0
    }  # fmt: skip  (an arm not rising: no such reason)


def table2_claims(
    res,
    first,
    budget: pd.DataFrame,
    n: int,
    *,
    best: str,
    pub: pd.Series,
    seeds,
    inert_c: float,
    kp: str = "KT-pFL (parameters)",
    label: str = "",
    explained: dict | None = None,
    plan: pd.DataFrame | None = None,
) -> dict:
    """Table 2's claims at ``n`` clients (``label``: the dataset's prefix, :func:`on_label`) (``res``: its runs, the headline arms at their stopping points;
    ``first``: at the first budget; ``budget``: the headline arms' budgets; ``best``: the strongest other
    method on validation; ``pub``: the paper's numbers, method -> value).  Returns ``mech`` (the
    parameter-exchanging KT-pFL's c leaves 1/N), ``claims`` (the paper's headline, then our two) and
    ``ran_on`` (what running on changed, "" when no arm ran on).  ``explained``: arm -> why it is a weak
    baseline at this count (:func:`pflkit.claims.explain_weak`'s mapping); ``plan``: the headline's seed plan
    (row :data:`~pflkit.chapters.ktpfl.T2_HEADLINE`, :func:`~pflkit.chapters.ktpfl.table2_runs`)."""
    mech = c_mechanism(
        f"Table 2, {label}{n} clients, {kp}: mechanism: c leaves 1/N (largest |c − 1/N| > {inert_c:g})",
        res, kp, seeds, inert_c, paper="c learned by eq. 7",
    )  # fmt: skip
    claims = [
        claim(f"Table 2, {label}{n} clients: {kp} beats the strongest other method ({best}, on validation)", res, kp, best,
              paper=paper_margin(pub, n), mechanism=mech, headline=True, explained=explained, plan=plan,
              plan_name=T2_HEADLINE),
        claim(f"Table 2, {label}{n} clients (ours): the soft-prediction KT-pFL beats {best} too (its λ, η₃ and ρ from "
              "Table 1's pilots)", res, "KT-pFL", best),
        claim(f"Table 2, {label}{n} clients (ours): exchanging parameters beats exchanging soft predictions (η₃ and ρ "
              "piloted here for the first, on Table 1's setting for the second)", res, kp, "KT-pFL"),
    ]  # fmt: skip
    ran = budget[budget.budget != "1×"]
    ran_on = ""
    if len(ran):  # which headline arms ran longer, and what that changed
        before = claim("before", first, kp, best, mechanism=mech, paper=claims[0]["paper"],
                       headline=bool(claims[0].get("headline")), plan=plan, plan_name=T2_HEADLINE)  # fmt: skip
        arms = " and ".join(f"{r.arm} ran on to {r.budget} its first budget" for r in ran.itertuples())
        ran_on = (
            f"{arms} (still improving at its end); the headline read {say(before)} at the first budget, "
            f"{say(claims[0])} at the budget both arms reached."
        )
    return {"mech": mech, "claims": claims, "ran_on": ran_on}


def table2_more_counts(t2: dict, counts, pub: pd.DataFrame, *, seeds, inert_c: float, kp: str = "KT-pFL (parameters)",
                       label: str = "", controls: dict | None = None, images=None, plans: dict | None = None,
                       ) -> list[dict]:  # fmt: skip
    """Table 2's claims at the larger client counts ``counts`` (``t2``: count -> its runs; ``pub``: the paper's
    Table 2 rows), each against the strongest other method on validation at that count, by the same rule as at
    the first count (:func:`table2_claims`; no arm runs on there); a weak mark explained from the count's own runs
    and its step-count control (``controls``: count -> :func:`~pflkit.chapters.ktpfl.steps_control`'s runs;
    ``images``: count -> a client's training images; ``plans``: count -> the headline's seed plan).
    Used in *Table 2*."""
    rows = []
    for n in counts:
        res = t2[n]
        best = res.select([a for a in res.arms if a not in ("KT-pFL", kp)], by="val_mean_acc")
        pub_n = pub[pub.setting.str.startswith(f"{n} clients")].set_index("method").value
        why = undertrained_why(res, n) | half_updates_why(res, n)  # the weak marks at this count, from its own runs
        if controls and n in controls:
            why |= steps_why(res, controls[n], n, images(n))
        out = table2_claims(res, res, pd.DataFrame(columns=["arm", "budget"]), n, best=best, pub=pub_n, seeds=seeds,
                            inert_c=inert_c, kp=kp, label=label, explained=why, plan=(plans or {}).get(n))  # fmt: skip
        rows += [out["mech"], *out["claims"]]
    return rows


def data_control(
    sub, full, n: int, methods: list[str], pub: pd.Series, images: tuple[int, int], resolution: float
) -> tuple[pd.DataFrame, list[dict]]:
    """Table 2 again on every training image (``full``, arms "<method>, all training images") against the
    subset's runs (``sub``), per method of ``methods`` (display names): the table (images a client on the
    subset and on all, ``images``; the two accuracies; the paper's number) and one claim each, that every
    training image lifts the method."""
    rows, claims = [], []
    for a in methods:
        subset, whole = sub.values(a), full.values(a + ", all training images")
        gap = pub.get(NAME2.get(a, a), np.nan)
        rows.append({"method": a, "images a client, subset": images[0], "images a client, all": images[1],
                     "ours, subset": subset.mean(), "ours, all images": whole.mean(), "paper": gap})  # fmt: skip
        v = verdict((whole - subset).dropna(), resolution=resolution, budget=full.budget(a + ", all training images"))
        claims.append(claim_row(f"Table 2, {n} clients (ours): every training image lifts {a} (the data-per-client "
                                "control)", v, paper=f"{gap:.1f} ({a}, the paper's level)" if gap == gap else "—",
                                note=f"{whole.mean():.1f} % on all images, {subset.mean():.1f} % on the subset"))  # fmt: skip
    return pd.DataFrame(rows, columns=["method", "images a client, subset", "images a client, all", "ours, subset",
                                       "ours, all images", "paper"]).set_index("method").round(1), claims  # fmt: skip


def coefficient_claims(corr: pd.DataFrame, results: dict, mech_c: dict) -> list[dict]:
    """Per split, the claim that c puts more weight on clients with similar label mixes: the Spearman
    correlations of :func:`coefficient_rows` over seeds (``corr``), against 0, resting on c moving
    (``mech_c``: the split's mechanism check)."""
    rows = []
    for split, res in results.items():
        d = corr[corr.split == split].set_index("seed")
        v = verdict(d["Spearman(c, label similarity)"], unit="(ρ_S)", budget=res.improving("KT-pFL"))
        text = f"{split}: c puts more weight on clients with similar label mixes (Spearman > 0)"
        # rank correlations of entries that differ by rounding errors say nothing: the claim rests on c moving
        rows.append(claim_row(text, v, paper="reinforces collaboration among similar clients (§1)", digits=2,
                              mechanism=mech_c[split]))  # fmt: skip
    return rows


def figure5_claims(d: dict, homog_label: str) -> list[dict]:
    """Figure 5's two claims (soft predictions move fewer bytes a round than parameters), from the per-seed
    −log ratios ``d`` ("batch sent": the server sends the round's images; "as run": only their indices)."""
    cases = (
        ("batch sent", "the server sends the round's public images, as in the paper", "Figure 5"),
        ("as run", "every client holds the public set, so only the batch's indices travel", "Figure 5 (ours)"),
    )
    return [
        claim_row(
            f"{head}: exchanging soft predictions moves fewer bytes a round than exchanging parameters "
            f"({homog_label}; {text})",
            verdict(d[how], unit="(−log ratio)"),
            paper="fewer (Figure 5, the public set on the server)",
            digits=2,
        )
        for how, text, head in cases
    ]
