"""Guard the published claims: the `book` claims files against their golden copies, and every verdict
word a page prints beside a claim against that claim's row.

    python tools/claims_check.py                 # after `tools/build_book.py --profile book --no-build`
    python tools/claims_check.py --update        # a deliberate, reviewed change: copy the claims to tests/golden/
    python tools/claims_check.py --readme        # then write the README's glance table from them

* **Golden files.** ``tests/golden/<chapter>.claims.csv`` is the claims file of the committed `book`
  store.  A chapter executed at `book` from that store (nothing computed) must write the same claims:
  the same verdict word, flags, seeds and interval (as printed, and within half a unit of its last
  printed digit), no claim missing, none added.  Each difference is named, one line a claim.
* **One word per claim.** Wherever an executed page prints a verdict word beside a claim's interval
  (a sentence, a findings box), the word must be that claim's row's: a bare verdict that cannot know
  *underpowered* printing *inconclusive* beside the row's interval is the error this catches.

Exit status 0 when every check holds, 1 with one line per difference, 2 on bad input.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "_build" / "book" / "stage" / "book"
GOLDEN = ROOT / "tests" / "golden"
TOLERANCE = 0.005  # the claims files keep means and intervals unrounded; a CPU's last bits may differ
COMPARED = ("verdict", "size", "carried", "plan", "flags", "seeds", "ours")

sys.path.insert(0, str(ROOT))
from pflkit.verdicts import WORDS  # noqa: E402


def read_claims(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, dtype={"flags": str, "ours": str, "verdict": str})


def golden_differences(claims: pd.DataFrame, golden: pd.DataFrame, chapter: str) -> list[str]:
    """One line per claim whose verdict, flags, seeds or interval differ from the golden file's, or
    that one of the two files lacks."""
    out = []
    ours, gold = claims.set_index("claim"), golden.set_index("claim")
    for name in gold.index.difference(ours.index, sort=False):
        out.append(f"{chapter}: claim missing: {name!r}")
    for name in ours.index.difference(gold.index, sort=False):
        out.append(f"{chapter}: claim not in the golden file: {name!r}")
    for name in ours.index.intersection(gold.index, sort=False):
        a, b = ours.loc[name], gold.loc[name]
        if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
            out.append(f"{chapter}: claim named twice: {name!r}")
            continue
        diffs = [
            f"{k} {b.get(k, '')!r} -> {a.get(k, '')!r}" for k in COMPARED if str(a.get(k, "")) != str(b.get(k, ""))
        ]
        for k in ("mean", "lo", "hi"):
            x, y = pd.to_numeric(a.get(k), errors="coerce"), pd.to_numeric(b.get(k), errors="coerce")
            if (x == x or y == y) and not abs(x - y) <= TOLERANCE:
                diffs.append(f"{k} {y:.4g} -> {x:.4g}")
        if diffs:
            out.append(f"{chapter}: {name!r}: " + "; ".join(diffs))
    return out


WORD = re.compile("|".join(sorted((re.escape(w) for w in WORDS), key=len, reverse=True)))


def page_text(notebook: Path) -> str:
    """What an executed chapter shows as prose: its Markdown and plain-text outputs, tables left out (a
    table's cells put a row's word after its interval, next to the next row's)."""
    import nbformat

    parts = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = data.get("text/markdown") or (out.get("text") if out.get("output_type") == "stream" else None)
            text = text or ("" if "text/html" in data else data.get("text/plain", ""))
            if isinstance(text, list):
                text = "".join(text)
            parts += [line for line in str(text).splitlines() if not line.lstrip().startswith("|")]
    return "\n".join(parts)


def interval_forms(row) -> list[str]:
    """How a claim's interval is printed: as its row says it (``ours``) and as a bare verdict does."""
    forms = []
    ours = str(row["ours"])
    if "[" in ours and "]" in ours:
        forms.append(ours[: ours.index("]") + 1])  # "+0.7 [-1.6, +3.0]", "-0.1 (−r) [-0.6, +0.3]"
    try:
        lo, hi, n = float(row["lo"]), float(row["hi"]), int(row["seeds"])
    except (TypeError, ValueError):
        return forms
    if lo == lo and hi == hi:
        forms.append(f"95 % CI [{lo:+.1f}, {hi:+.1f}], {n} seeds")
    return [f for f in forms if f]


def printed_differences(text: str, claims: pd.DataFrame, chapter: str, window: int = 160) -> list[str]:
    """One line per place where ``text`` prints a verdict word beside a claim's interval that is not
    the word of any claim printed with that interval."""
    words_of: dict[str, set[str]] = {}
    for _, row in claims.iterrows():
        for form in interval_forms(row):
            words_of.setdefault(form, set()).add(str(row["verdict"]))
    out = []
    for form, words in words_of.items():
        for m in re.finditer(re.escape(form), text):
            before = text[max(0, m.start() - window) : m.start()]
            before = before.split("\n")[-1]  # the same line: a sentence or a bullet
            found = WORD.findall(before)
            if found and found[-1] not in words:
                out.append(f"{chapter}: printed {found[-1]!r} beside {form!r}, where its row says "
                           f"{' or '.join(sorted(words))!r}: …{before[-80:]}")  # fmt: skip
    return out


README = ROOT / "README.md"
MARKERS = ("<!-- glance -->", "<!-- /glance -->")
TITLES = {"pfedhn": "pFedHN", "pfedmb": "pFedMB", "fesem": "FeSEM", "fedmn": "FedMN", "ktpfl": "KT-pFL"}


def readme_glance(golden: Path = GOLDEN) -> str:
    """The README's glance table: what the runs are and the seeds its rows rest on (the landing page's
    sentence), then each paper's lead claims, from the golden claims files."""
    from pflkit.pages import glance, markdown_table, runs_sentence

    parts, data = [], []
    for stem, title in TITLES.items():
        f = golden / f"{stem}.claims.csv"
        if f.exists():
            data.append(read_claims(f))
            g = glance(data[-1])
            g.insert(0, "Paper", f"[{title}](book/{stem}.ipynb)")
            parts.append(g)
    if not parts:
        return "(no golden claims yet)"
    return (
        runs_sentence(pd.concat(data, ignore_index=True)) + "\n\n" + markdown_table(pd.concat(parts, ignore_index=True))
    )


def with_glance(text: str, table: str) -> str:
    """``text`` (the README) with ``table`` between its glance markers."""
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    return text[:start] + "\n" + table + "\n" + text[end:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stage", type=Path, default=STAGE, help="the executed chapters and their claims files")
    ap.add_argument("--golden", type=Path, default=GOLDEN)
    ap.add_argument("--update", action="store_true", help="copy the staged claims files to the golden folder")
    ap.add_argument("--readme", action="store_true", help="write the README's glance table from the golden files")
    args = ap.parse_args()
    if args.readme:
        README.write_text(with_glance(README.read_text(), readme_glance(args.golden)))
        print("README: glance table written from the golden claims")
        return
    files = sorted(args.stage.glob("*.claims.csv"))
    if not files:
        print(f"error: no claims files in {args.stage}: execute the chapters at book first", file=sys.stderr)
        sys.exit(2)
    if args.update:
        args.golden.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy(f, args.golden / f.name)
        print(f"golden claims updated: {', '.join(f.name for f in files)}")
        return
    problems = []
    for golden in sorted(args.golden.glob("*.claims.csv")):
        chapter = golden.name.removesuffix(".claims.csv")
        staged = args.stage / golden.name
        if not staged.exists():
            problems.append(f"{chapter}: no claims file in {args.stage} (did the chapter execute at book?)")
            continue
        claims = read_claims(staged)
        problems += golden_differences(claims, read_claims(golden), chapter)
        notebook = args.stage / f"{chapter}.ipynb"
        if notebook.exists():
            problems += printed_differences(page_text(notebook), claims, chapter)
    print(
        "\n".join(problems)
        if problems
        else f"claims check: {len(files)} chapters as their golden files, one word a claim"
    )
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
