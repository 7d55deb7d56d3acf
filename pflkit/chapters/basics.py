"""The basics chapter's small measurements: the published numbers it sets beside its runs, and whether
two engines ran the same experiment."""

from __future__ import annotations

import pandas as pd


def published(df: pd.DataFrame, setting_prefix: str) -> dict[str, float]:
    """A source's published accuracy per method, in the settings whose name starts with ``setting_prefix``."""
    d = df[df.setting.str.startswith(setting_prefix)]
    return dict(zip(d.method, d.value))


def paper_gap(source: dict[str, float], a: str, b: str) -> float | None:
    """The published difference a − b, or None when the source does not report both."""
    return source[a] - source[b] if a in source and b in source else None


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
    best_pub = max((m for m in personal if m in pub), key=pub.get)
    return {
        "ours: strongest personalized": f"{ours[best]:.1f} ({best})",
        "ours: FedAvg": f"{ours['FedAvg']:.1f}",
        "PFLlib: strongest personalized": f"{pub[best_pub]:.1f} ({best_pub})",
        "PFLlib: FedAvg": f"{pub['FedAvg']:.1f}",
        f"PFLlib within {ceiling:g} points of 100 %": "yes" if 100 - pub[best_pub] < ceiling else "no",
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
    from ..verdicts import verdict_text

    return f"{verdict_text(row, bold=False)}, {row['ours (a − b, 95 % CI)']}"


def claim_rows(specs: dict, results: dict, pfllib: dict, kt: dict, plan: pd.DataFrame, *, n_clients: int,
               resolution: float) -> tuple[list[dict], dict]:  # fmt: skip
    """The page's claims, each an arm against FedAvg's global model (``specs``: per setting, claim →
    (arm, margin); a margin makes it a no-difference claim), judged on ``results`` with the seed ``plan``.

    Where a setting has FedAvg + FT, its claim is the mechanism every personalized arm relies on
    (adapting to a client's own data pays off), checked against FedAvg's global model as it is, and the
    setting's headline claims link to it.  The first setting with room to judge (not saturated) carries
    the benchmarks' lead claims, in the paper's order.  Returns the rows and each setting's mechanism row."""
    from ..verdicts import claim, mark_leads, mechanism, saturation

    rows, mechs = [], {}
    for s, spec in specs.items():
        sat = saturation(results[s], m=resolution)
        ft = next((t for t, (m, _) in spec.items() if m == "FedAvg + FT"), None)
        mech = None
        if ft:
            gap = paper_gap(kt, "FedAvg + FT", "FedAvg")
            row = claim(ft, results[s], "FedAvg + FT", "FedAvg", paper=f"{gap:+.1f} (KT-pFL Table 2)",
                        resolution=resolution, saturated=sat, plan=plan)  # fmt: skip
            mech = mechanism(f"Mechanism ({s}): adapting to a client's own data acts (FedAvg + FT beats FedAvg)",
                             row["_v"], row["paper"], control="FedAvg's global model without the fine-tuning",
                             plan=plan, plan_name=ft, note=row["notes"])  # fmt: skip
            mechs[s] = mech
        for text, (m, mg) in spec.items():
            if text == ft:
                rows.append(mech)
                continue
            gap = paper_gap(pfllib[s], m, "FedAvg")
            rows.append(claim(text, results[s], m, "FedAvg", paper="(not reported)" if gap is None else f"{gap:+.1f} (PFLlib)",
                              margin=mg, resolution=None if mg else resolution, headline=mg is None, saturated=sat,
                              plan=plan, mechanism=mech if mg is None else None))  # fmt: skip
    head = next((s for s in specs if not saturation(results[s], m=resolution)), None)
    if head:
        mech_row = next((r for r in rows if r["kind"] == "mechanism"), None)
        why = f"fine-tuning FedAvg locally gains {mech_row['ours (a − b, 95 % CI)'].split(' [')[0]}" if mech_row else ""
        res = results[head]
        rounds = {a: res[a, res.seeds[0]]["config"]["rounds"] for a in res.arms}
        mark_leads(rows, [(t, f"{m} beats FedAvg's global model",
                           f"FMNIST {head}, {n_clients} clients, {rounds[m]} rounds (FedAvg {rounds['FedAvg']})", why)
                          for t, (m, mg) in specs[head].items() if mg is None and m != "FedAvg + FT"])  # fmt: skip
    return rows, mechs


def changed_claims(first: dict, specs: dict, rows: list[dict], mechs: dict, plan: pd.DataFrame, *, rounds: int,
                   resolution: float) -> dict[str, pd.DataFrame]:  # fmt: skip
    """Per setting whose rising arms ran on (``first``: its sweep at the first budget), each claim at
    ``rounds`` rounds beside the same claim with each arm at its stopping point."""
    from ..verdicts import claim

    out = {}
    for s, res0 in first.items():
        after = {r["claim"]: r for r in rows} | {t: mechs[s] for t, (m, _) in specs[s].items()
                                                  if m == "FedAvg + FT" and s in mechs}  # fmt: skip
        before = {t: claim(t, res0, m, "FedAvg", margin=mg, resolution=None if mg else resolution, plan=plan)
                  for t, (m, mg) in specs[s].items()}  # fmt: skip
        out[s] = pd.DataFrame([{"claim": t, f"at {rounds} rounds": plain(before[t]),
                                "each arm at its stopping point": plain(after[t])}
                               for t in specs[s] if t in after]).set_index("claim")  # fmt: skip
    return out


LEADS = ["FedPer", "Ditto", "pFedMe", "Per-FedAvg", "Local"]  # the arms the benchmarks' lead claims name


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
