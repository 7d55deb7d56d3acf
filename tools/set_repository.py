"""Set the book's public repository: the one setting behind its repository, issue and launch buttons.

    python tools/set_repository.py https://github.com/OWNER/REPO [--branch main]
    python tools/set_repository.py ""        # unset: the build hides those buttons

Writes ``repository.url`` (and ``branch``) in ``_config.yml`` and the same URL into each chapter's
Colab cell (the first code cell, tagged ``colab-install``), which installs the kit from it when a
chapter is opened on Google Colab.  ``tests/test_book_setup.py`` checks that the two agree.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAG = "colab-install"


def colab_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if TAG in c.get("metadata", {}).get("tags", [])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url", help='https://github.com/OWNER/REPO, or "" to unset')
    ap.add_argument("--branch", default=None)
    args = ap.parse_args()
    if args.url and not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", args.url):
        print(f"error: expected https://github.com/OWNER/REPO, got {args.url!r}", file=sys.stderr)
        return 2
    cfg = ROOT / "_config.yml"
    text = re.sub(r"(?m)^(repository:\n  url: ).*$", lambda m: m.group(1) + json.dumps(args.url), cfg.read_text())
    if args.branch:
        text = re.sub(r"(?m)^(  branch: ).*$", lambda m: m.group(1) + args.branch, text)
    cfg.write_text(text)
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        for cell in colab_cells(nb):
            src = re.sub(r'(?m)^REPOSITORY = ".*"$', f"REPOSITORY = {json.dumps(args.url)}", "".join(cell["source"]))
            cell["source"] = src.splitlines(keepends=True)
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    print(f"repository: {args.url or '(unset: buttons hidden)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
