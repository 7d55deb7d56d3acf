"""Execute the book's chapters at a profile and build the HTML book.

    python tools/build_book.py --profile book          # make book
    python tools/build_book.py --profile smoke --no-execute   # build from executed smoke copies

Chapters are executed with papermill into ``_build/<profile>/stage/`` (a copy of the book's
sources); a chapter is re-executed when it, any file of ``pflkit/`` or ``data/`` changed
since its executed copy was written.  The staged copy is then built by Jupyter Book with
execution off (everything in it has just been executed), ``-n -W --keep-going``.
The execution report page lists each chapter's wall time, profile and commit.
The book profile's HTML is copied to ``_build/html``.

At ``book`` the chapters read the committed store and compute nothing (``PFLBOOK_STORE_ONLY``):
a chapter whose store lacks runs is executed up to the first sweep that needs them, and its page
says "not computed yet" there, in a marked note, with the cells below it shown without outputs.
``--fill`` (``make book FILL=1``) computes the missing runs into the store instead (hours);
``PFLBOOK_FRESH=1`` recomputes every run into ``_build/store/book/``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from pflkit.profiles import build_name, fresh, repo_relative

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    "_config.yml",
    "_toc.yml",
    "references.bib",
    "_static",
    "book",
    "data",
    "pflkit",
]  # pflkit: pages include its source


def chapters() -> list[Path]:
    """Notebooks named in _toc.yml, in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", [{"chapters": toc.get("chapters", [])}]):
        files += [c["file"] for c in part.get("chapters", [])]
    return [ROOT / (f + ".ipynb") for f in files if (ROOT / (f + ".ipynb")).exists()]


def newest_input(nb: Path) -> float:
    deps = [nb] + list((ROOT / "pflkit").rglob("*.py")) + list((ROOT / "data").rglob("*.csv"))
    deps += list((ROOT / "results" / nb.stem).glob("*.json"))  # the chapter's committed runs
    return max(p.stat().st_mtime for p in deps)


NOT_COMPUTED = """```{{admonition}} Not computed yet
:class: warning
{message}.

This page was rendered from the committed result store, which does not hold these runs yet.
The cells below this note are shown **without their outputs**: no number or figure on this page
comes from the missing runs. The README gives the CPU-hours that computing them takes.
```"""


def mark_not_computed(path: Path) -> str | None:
    """Turn a chapter stopped by ``NotInStore`` into a readable partial page: drop papermill's
    error banners and the traceback, put a marked note after the cell that stopped, and leave
    every later cell without outputs.  Returns the note's message (None: not stopped that way)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if "papermill-error-cell-tag" not in c.get("metadata", {}).get("tags", [])]
    stopped, message = None, None
    for i, cell in enumerate(nb.cells):
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if stopped is None and errors:
            if errors[0].get("ename") != "NotInStore":
                return None
            stopped, message = i, errors[0]["evalue"]
            cell.outputs = [o for o in cell.outputs if o.get("output_type") != "error"]
        elif stopped is not None and cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    if stopped is None:
        return None
    body = message.removeprefix("not computed yet: ").rstrip(".")
    note = nbformat.v4.new_markdown_cell(NOT_COMPUTED.format(message=body[:1].upper() + body[1:]))
    note.metadata["tags"] = ["not-computed-yet"]
    nb.cells.insert(stopped + 1, note)
    glue_placeholders(nb)
    nbformat.write(nb, path)
    return message


GLUE_REF = re.compile(r"\{glue(?::\w*)?\}`?\s*([\w-]+)")


def glue_placeholders(nb) -> None:
    """A page that stopped early references glued values (its findings, at the top) that no cell
    made: glue each missing one as "not computed yet", in a hidden cell, so the page still builds."""
    import nbformat

    made = {o["metadata"]["scrapbook"]["name"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "scrapbook" in o.get("metadata", {})}  # fmt: skip
    wanted = [k for c in nb.cells if c.cell_type == "markdown" for k in GLUE_REF.findall(c.source)]
    for key in dict.fromkeys(k for k in wanted if k not in made):
        cell = nbformat.v4.new_code_cell(f"# {key}: not computed yet")
        cell.metadata["tags"] = ["remove-cell"]
        cell.outputs = [nbformat.v4.new_output(
            "display_data", data={"text/markdown": "*Not computed yet in this build: see the note below.*"},
            metadata={"scrapbook": {"name": key, "mime_prefix": ""}},
        )]  # fmt: skip
        nb.cells.append(cell)


def execute(profile: str, force: bool = False, only: list[str] | None = None, fill: bool = False) -> dict:
    import papermill as pm

    stage = ROOT / "_build" / build_name(profile) / "stage"
    report_path = stage / "execution.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    env_profile = os.environ.get("PFLBOOK_PROFILE")
    os.environ["PFLBOOK_PROFILE"] = profile
    os.environ["PFLBOOK_PROGRESS"] = "0"  # sweeps draw no progress bars into the executed pages
    read_only = profile == "book" and not fill and not fresh()
    os.environ["PFLBOOK_STORE_ONLY"] = "1" if read_only else "0"
    if not read_only:  # runs are computed: glibc's malloc keeps freed memory (see tools/fill_store.py's MALLOC)
        from fill_store import MALLOC

        for k, v in MALLOC.items():
            os.environ.setdefault(k, v)
    try:
        for nb in chapters():
            rel = nb.relative_to(ROOT)
            out = stage / rel
            if only and nb.stem not in only:
                continue
            stamp = store_stamp(nb, profile, read_only)
            fresh_enough = out.exists() and out.stat().st_mtime >= newest_input(nb)
            if not force and fresh_enough and report.get(str(rel), {}).get("store_stamp") == stamp:
                print(f"[{profile}] {rel}: up to date", flush=True)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            print(f"[{profile}] executing {rel} ...", flush=True)
            t0 = time.perf_counter()
            failed = out.with_name(out.stem + ".failed.ipynb")  # a failed run must never look up to date
            usage = out.with_name(out.stem + ".usage.jsonl")  # which runs came from the store (pflkit sweeps append)
            usage.unlink(missing_ok=True)
            os.environ["PFLBOOK_USAGE_LOG"] = str(usage)
            claims = out.with_name(out.stem + ".claims.csv")  # the chapter's claims table, as data
            claims.unlink(missing_ok=True)
            os.environ["PFLBOOK_CLAIMS_FILE"] = str(claims)
            try:
                pm.execute_notebook(
                    str(nb), str(failed), cwd=str(nb.parent), kernel_name="python3", progress_bar=False,
                    request_save_on_cell_execute=False,
                )  # fmt: skip
            except BaseException as err:
                not_computed = read_only and getattr(err, "ename", None) == "NotInStore" and mark_not_computed(failed)
                if not not_computed:
                    print(f"[{profile}] {rel}: FAILED; the partial run is in {failed.relative_to(ROOT)}", flush=True)
                    raise
                print(f"[{profile}] {rel}: {not_computed}", flush=True)
            failed.replace(out)
            wall = time.perf_counter() - t0
            print(f"[{profile}] {rel}: {wall:.1f} s", flush=True)
            report = record_execution(report_path, str(rel), {
                "profile": profile,
                "wall_s": round(wall, 1),
                "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
                "commit": git_commit(),
                "device": device_name(),
                **store_usage(usage),
                "claims": claims_tally(claims),
                "store_stamp": stamp,
            })  # fmt: skip
    finally:
        if env_profile is None:
            os.environ.pop("PFLBOOK_PROFILE", None)
        else:
            os.environ["PFLBOOK_PROFILE"] = env_profile
    return report


def record_execution(report_path: Path, rel: str, entry: dict) -> dict:
    """Add one chapter's entry to the execution report, under a lock: chapters executed side by
    side (``--jobs``, the test suite on both cores) write the one report.  Returns the report."""
    import fcntl

    with open(report_path.with_name(report_path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        report = json.loads(report_path.read_text()) if report_path.exists() else {}
        report[rel] = entry
        tmp = report_path.with_name(report_path.name + ".tmp")
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(report_path)
    return report


def execute_side_by_side(profile: str, jobs: int, force: bool, only: list[str] | None, fill: bool) -> None:
    """:func:`execute`, ``jobs`` chapters at a time, each in its own process pinned to one core
    (so a chapter's sweeps run one worker of one torch thread: the same runs, the same keys),
    the longest chapters of the last report first.  Raises naming the chapters that failed."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    report_path = ROOT / "_build" / build_name(profile) / "stage" / "execution.json"
    last = json.loads(report_path.read_text()) if report_path.exists() else {}
    todo = [nb for nb in chapters() if not only or nb.stem in only]
    todo.sort(key=lambda nb: -last.get(str(nb.relative_to(ROOT)), {}).get("wall_s", 0.0))
    cores = queue.Queue()
    for core in sorted(os.sched_getaffinity(0))[: max(1, jobs)]:
        cores.put(core)

    def one(nb: Path) -> int:
        core = cores.get()
        try:
            cmd = [sys.executable, __file__, "--profile", profile, "--no-build", "--no-stage", "--only", nb.stem]
            cmd += ["--force"] * force + ["--fill"] * fill
            return subprocess.run(cmd, preexec_fn=lambda: os.sched_setaffinity(0, {core})).returncode
        finally:
            cores.put(core)

    with ThreadPoolExecutor(cores.qsize()) as pool:
        codes = dict(zip((nb.stem for nb in todo), pool.map(one, todo)))
    if failed := [c for c, rc in codes.items() if rc]:
        raise RuntimeError(f"{', '.join(failed)} failed (their partial runs are in _build/{profile}/stage/book/)")


def store_stamp(nb: Path, profile: str, read_only: bool = False) -> str:
    """What a chapter's execution read from outside its sources: the committed runs it could
    reuse (their names: deleting one to recompute it re-executes the chapter), FRESH, and
    whether the store was read-only (a page rendered "not computed yet" is redone by FILL=1)."""
    import hashlib

    names = sorted(p.name for p in (ROOT / "results" / nb.stem).glob("*.json"))
    fresh = os.environ.get("PFLBOOK_FRESH", "0")
    blob = json.dumps({"runs": names, "fresh": fresh, "profile": profile, "read_only": read_only})
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def store_usage(log: Path) -> dict:
    """Runs a chapter read from its store (distinct, and the commits that made them) and computed."""
    entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    reused = {k for e in entries for k in e["reused"]}
    computed = {k for e in entries for k in e["computed"]}
    commits = sorted({c for e in entries for c in e["commits"]})
    stores = sorted({repo_relative(e["store"]) for e in entries})
    missing = {k for e in entries for k in e.get("missing", [])}
    return {
        "runs_from_store": len(reused - computed),
        "runs_computed": len(computed),
        "runs_not_computed": len(missing),
        "store_commits": commits,
        "stores": stores,
    }


def claims_tally(path: Path) -> dict:
    """The verdict words of a chapter's claims file (``pflkit.claims.tally``); {} without one."""
    if not path.exists() or path.stat().st_size == 0:
        return {}
    import pandas as pd

    from pflkit.claims import tally

    return tally(pd.read_csv(path))


def git_commit() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() or "uncommitted"


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({os.cpu_count()} cores)"


def stage_sources(profile: str) -> Path:
    """Copy the non-notebook sources next to the executed chapters; turn execution off."""
    stage = ROOT / "_build" / build_name(profile) / "stage"
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            for f in src.rglob("*"):
                if f.is_file() and f.suffix != ".ipynb" and not {".ipynb_checkpoints", "__pycache__"} & set(f.parts):
                    dst = stage / f.relative_to(ROOT)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dst)
        else:
            shutil.copy2(src, stage / name)
    cfg = yaml.safe_load((stage / "_config.yml").read_text())
    cfg.setdefault("execute", {})["execute_notebooks"] = "off"
    buttons_need_repository(cfg)
    (stage / "_config.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    write_report_page(stage, profile)
    write_findings(stage)
    return stage


def buttons_need_repository(cfg: dict) -> None:
    """Without a repository URL (``repository.url`` in _config.yml) the repository, issue and
    launch buttons would point nowhere: hide them."""
    if (cfg.get("repository") or {}).get("url"):
        return
    cfg.pop("repository", None)
    cfg["html"] = {**cfg.get("html", {}), "use_repository_button": False, "use_issues_button": False,
                   "use_edit_page_button": False}  # fmt: skip
    cfg["launch_buttons"] = {
        "notebook_interface": "classic",
        "binderhub_url": "",
        "colab_url": "",
        "jupyterhub_url": "",
    }


def write_report_page(stage: Path, profile: str) -> None:
    report_path = stage / "execution.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    lines = [
        "# Execution report",
        "",
        f"Every chapter of this build was executed with the **`{profile}`** profile just before the",
        "HTML was built; the numbers and figures in it come from that execution.",
        "",
        "Runs *from the store* were read back from the chapter's result store (at `book`, the store",
        "committed under `results/`, made by the commits listed); runs *computed* were trained during",
        "this execution. Runs *not computed yet* were missing from a read-only store (`make book`",
        "without `FILL=1`): the chapter stopped at the first sweep that needed them, and its page says",
        "so there; later sweeps of that chapter may need more.",
        "",
        "| chapter | profile | wall time (s) | runs from store | runs computed | runs not computed yet | finished "
        "| device |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rel, r in sorted(report.items()):
        lines.append(
            f"| {Path(rel).stem} | {r['profile']} | {r['wall_s']} | {r.get('runs_from_store', '—')} "
            f"| {r.get('runs_computed', '—')} | {r.get('runs_not_computed', '—')} | {r['finished']} | {r['device']} |"
        )
    total = sum(r["wall_s"] for r in report.values())
    lines += ["", f"Total execution time: {total:.0f} s.", "", ":::{dropdown} Commits: the code each chapter ran, the store's",
              "", "| chapter | commit | store commits |", "|---|---|---|"]  # fmt: skip
    for rel, r in sorted(report.items()):
        lines.append(f"| {Path(rel).stem} | {r['commit']} | {', '.join(r.get('store_commits', [])) or '—'} |")
    lines += [":::", ""]
    lines += claims_section(report)
    lines += budget_section(stage)
    lines += paper_section()
    (stage / "book" / "report.md").write_text("\n".join(lines))


def paper_section() -> list[str]:
    """What ``make paper`` runs per chapter (the `paper` profile: the papers' datasets, clients, rounds and
    seeds) and what it costs, estimated from measured GPU step times (:func:`pflkit.paper.cost_table`)."""
    from pflkit.pages import markdown_table
    from pflkit.paper import cost_table, step_seconds

    seconds, gpu = step_seconds()
    table = cost_table()
    return [
        "## The papers' own experiments: what `make paper` runs and costs",
        "",
        "The `paper` profile runs each chapter's headline tables on the paper's datasets, clients, rounds and seeds",
        "(`make paper` on a machine with a GPU and the datasets; `python -m pflkit paper-check` says in one line what",
        "is missing). Its runs and optimiser steps per chapter, counted from the chapters' parameters at `paper` (an",
        "upper bound where seeds are planned from the spread), and the GPU-hours they take at "
        f"{1000 * seconds:.1f} ms a step, the median measured on {gpu} (`benchmarks/gpu_check.py`); evaluation",
        "comes on top. `make test` executes every chapter at `paper` on stand-in data of the papers' shapes, every",
        "budget cut to its dry value (the dry run, on the CPU; alone: `make paper-dry`).",
        "",
        markdown_table(table),
        "",
    ]


def budget_section(stage: Path) -> list[str]:
    """The budgets of the claims the papers lead with, from the chapters' claims files: per claim,
    the rounds each of its arms ran and its validation gain over the last fifth (an arm still
    improving by more than a point ran on, to its chapter's cap), and the verdict with its flags."""
    import pandas as pd

    from pflkit.claims import verdict_text

    rows = []
    for f in sorted((stage / "book").glob("*.claims.csv")):
        data = pd.read_csv(f, keep_default_na=False)
        if "lead" not in data:
            continue
        for _, r in data[data["lead"].astype(str) != ""].iterrows():
            flags = [x for x in str(r.get("flags", "")).split("; ") if x]
            rows.append((f.name.split(".")[0], int(float(r["lead"])), r.get("short") or r["claim"], r.get("arms") or "—",
                         verdict_text({"verdict": r["verdict"], "flags": flags}, bold=False)))  # fmt: skip
    if not rows:
        return []
    lines = [
        "## Budgets of the headline claims",
        "",
        "Each claim a paper leads with, the rounds each of its arms ran and, in brackets, its validation gain over the",
        "last fifth of them (mean over seeds, points). An arm still rising by more than a point ran on at the same",
        "per-round protocol, to its chapter's cap; one that reached the cap still rising keeps *budget-limited*.",
        "",
        "| chapter | claim | arms: rounds (last fifth's gain) | verdict |",
        "|---|---|---|---|",
    ]
    lines += [f"| {c} | {short} | {arms} | {v} |" for c, _, short, arms, v in sorted(rows, key=lambda t: t[:2])]
    return [*lines, ""]


FINDINGS_MARKER = "<!-- findings -->"


def write_findings(stage: Path) -> None:
    """The landing page's results at a glance, in place of the marker: what every run of ours is, one
    row per claim each paper leads with (in the paper's order, whatever our verdict), and the tally
    split three ways: the papers' claims, the book's own checks, the basics chapter (PFLlib's
    baselines); then each chapter's count, and the words and flags in a fold."""
    import pandas as pd

    intro = stage / "book" / "intro.md"
    if not intro.exists() or FINDINGS_MARKER not in intro.read_text():
        return
    from pflkit.claims import words_text
    from pflkit.pages import bottom_line, glance, markdown_table, runs_sentence
    from pflkit.verdicts import FLAG_MEANINGS, MEANINGS, SIZE_MEANINGS

    titles = {p.stem: p for p in chapters()}
    files = {stem: stage / "book" / f"{stem}.claims.csv" for stem in titles}
    claims = {
        stem: pd.read_csv(f, keep_default_na=False) for stem, f in files.items() if f.exists() and f.stat().st_size
    }
    papers = {stem: d for stem, d in claims.items() if stem != "basics"}
    every = pd.concat(papers.values()) if papers else pd.DataFrame({"verdict": [], "seeds": []})
    rows = []
    for stem, d in papers.items():
        g = glance(d)  # the paper named in its claims' cell: one column less to wrap the others
        name = chapter_title(titles[stem]).split(":")[0]
        g["The paper claims"] = [f"[{name}]({stem}.ipynb): {c}" for c in g["The paper claims"]]
        g.insert(0, "Paper", name)
        rows.append(g)
    lines = [runs_sentence(every), "", "**The bottom line, paper by paper.**", ""]
    for stem, d in papers.items():  # what each paper's lead claims came to, in words, before the table's numbers
        name = chapter_title(titles[stem]).split(":")[0]
        if line := bottom_line(d, f"[{name}]({stem}.ipynb)", runs=False):
            lines.append(f"* {line}")
    lines.append("")
    if rows:  # a row for every paper in the first screen (its first lead claim), every lead claim in the fold below
        everything = pd.concat(rows, ignore_index=True)
        first = everything.groupby("Paper", sort=False).head(1).drop(columns="Paper")
        lines += [markdown_table(first, css="glance"), ""]
        lines += [f"::::{{dropdown}} Every lead claim of the five papers ({len(everything)})",
                  markdown_table(everything.drop(columns="Paper"), css="glance"), "::::", ""]  # fmt: skip
    lines += ["Each row is a paper's first lead claim, in the paper's order, whatever our verdict; each chapter opens "
              "with all of its own. The words follow [the verdict rule](verdict-rule); the [glossary](glossary.md) "
              "defines the sizes and the flags.", ""]  # fmt: skip

    def said(d: pd.DataFrame) -> str:
        return (
            words_text(d.assign(flags=d["flags"].astype(str).str.split("; ")).to_dict("records")) if len(d) else "none"
        )

    own = every["own"].astype(str) == "True" if len(every) else pd.Series([], dtype=bool)
    lines.append(f"**The five papers' {int((~own).sum())} claims:** {said(every[~own])}. "
                 f"**The book's {int(own.sum())} own checks** (mechanism checks, controls and questions we chose): "
                 f"{said(every[own])}." + (f" **Basics** ({len(claims['basics'])} claims on PFLlib's baselines): "
                                          f"{said(claims['basics'])}." if "basics" in claims else ""))  # fmt: skip
    lines.append("")
    for stem in titles:
        if stem not in claims:
            lines.append(f"* [{stem}]({stem}.ipynb): not executed in this build.")
            continue
        lines.append(
            f"* [{chapter_title(titles[stem])}]({stem}.ipynb): {len(claims[stem])} claims; {said(claims[stem])}."
        )
    lines += ["", ":::{dropdown} The words, the sizes and the flags"]
    lines += [f"* *{w}*: {m}." for w, m in MEANINGS.items()] + [f"* size *{z}*: {m}." for z, m in SIZE_MEANINGS.items()]
    lines += [f"* flag *{f}*: {m}." for f, m in FLAG_MEANINGS.items()]
    lines += [":::", ""]
    intro.write_text(intro.read_text().replace(FINDINGS_MARKER, "\n".join(lines)))


def chapter_title(nb: Path) -> str:
    """A chapter's title: its first Markdown heading."""
    import nbformat

    for cell in nbformat.read(nb, as_version=4).cells:
        if cell.cell_type == "markdown" and cell.source.startswith("# "):
            return cell.source.splitlines()[0][2:].strip()
    return nb.stem


HEADS = {"no difference": "no diff.", "inconclusive": "inconcl.", "underpowered": "under-powered"}  # to fit the column


def claims_section(report: dict) -> list[str]:
    """The claims of every chapter, tallied by verdict word (each chapter writes its claims table
    as data next to its executed notebook: ``<chapter>.claims.csv``)."""
    from pflkit.verdicts import WORDS

    tallies = {rel: r["claims"] for rel, r in sorted(report.items()) if r.get("claims")}
    if not tallies:
        return []
    words = [w for w in WORDS if any(t.get(w) for t in tallies.values())]
    lines = [
        "## Claims by verdict",
        "",
        "Each chapter's claims table, counted by its verdict words (mechanism checks included); *open* counts",
        "the claims left inconclusive or underpowered. The rows themselves are in `<chapter>.claims.csv` beside",
        "each executed chapter.",
        "",
        "| chapter | claims | " + " | ".join(HEADS.get(w, w) for w in words) + " | open |",
        "|---|---|" + "---|" * len(words) + "---|",
    ]
    for rel, t in tallies.items():
        cells = " | ".join(str(t.get(w, 0)) for w in words)
        lines.append(f"| {Path(rel).stem} | {t['claims']} | {cells} | {t['open']} ({100 * t['open_share']:.0f} %) |")
    total = {w: sum(t.get(w, 0) for t in tallies.values()) for w in [*words, "claims", "open"]}
    share = 100 * total["open"] / total["claims"] if total["claims"] else 0.0
    cells = " | ".join(str(total[w]) for w in words)
    lines += [f"| all | {total['claims']} | {cells} | {total['open']} ({share:.0f} %) |", ""]
    return lines


def build_html(profile: str) -> Path:
    stage = ROOT / "_build" / build_name(profile) / "stage"
    missing = [nb.relative_to(ROOT) for nb in chapters() if not (stage / nb.relative_to(ROOT)).exists()]
    if missing:
        sys.exit(f"error: not executed at profile {profile}: {', '.join(map(str, missing))}")
    out = ROOT / "_build" / build_name(profile)
    cmd = ["jupyter-book", "build", str(stage), "--path-output", str(out), "-n", "-W", "--keep-going"]
    exe = Path(sys.executable).parent / "jupyter-book"
    cmd[0] = str(exe) if exe.exists() else "jupyter-book"
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    html = out / "_build" / "html"
    if profile == "book":
        dest = ROOT / "_build" / "html"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(html, dest)
        html = dest
    print(f"book built: {html / 'index.html'}")
    return html


def describe(err: Exception) -> str:
    """One line: papermill's error names the cell and the exception; others their first line."""
    if hasattr(err, "ename"):  # PapermillExecutionError
        return f"cell {err.exec_count}: {err.ename}: {err.evalue}"
    lines = [ln for ln in str(err).splitlines() if ln.strip()]
    return lines[0] if lines else repr(err)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=("smoke", "book", "paper"), default="book")
    ap.add_argument("--no-execute", action="store_true", help="use the executed copies already staged")
    ap.add_argument("--no-build", action="store_true", help="execute only")
    ap.add_argument("--force", action="store_true", help="re-execute even if up to date")
    ap.add_argument("--only", nargs="*", help="execute only these chapters (file stems)")
    ap.add_argument("--fill", action="store_true", help="at book: compute the runs the committed store lacks (hours)")
    ap.add_argument("--jobs", type=int, default=1, help="chapters executed side by side, one core each (default 1)")
    ap.add_argument("--no-stage", action="store_true", help=argparse.SUPPRESS)  # a side-by-side chapter's process
    args = ap.parse_args()
    if args.jobs < 1:
        sys.exit(f"error: --jobs must be >= 1, got {args.jobs}")
    if args.profile == "paper" and not args.no_execute and not args.no_stage:  # before hours of work: one line, exit 2
        from pflkit.paper import preflight

        if (why := preflight([nb.stem for nb in chapters() if not args.only or nb.stem in args.only])) is not None:
            print(f"error: {why}", file=sys.stderr)
            sys.exit(2)
    t0 = time.perf_counter()
    if not args.no_execute:
        try:
            if args.jobs > 1:
                execute_side_by_side(args.profile, args.jobs, args.force, args.only, args.fill)
            else:
                execute(args.profile, force=args.force, only=args.only, fill=args.fill)
        except Exception as err:  # papermill's PapermillExecutionError carries the cell's traceback
            sys.exit(f"error: chapter execution failed: {describe(err)}")
    if args.no_stage:
        return
    stage_sources(args.profile)
    if not args.no_build:
        build_html(args.profile)
    print(f"done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
