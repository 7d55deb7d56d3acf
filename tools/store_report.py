"""What the committed result store holds, per chapter: runs, CPU-hours that made them, size, commits.

    python tools/store_report.py            # every chapter under results/
    python tools/store_report.py pfedhn     # one chapter

CPU-hours are Σ the CPU time of the stored runs' processes (``cpu_time_s``; for runs stored before
it was recorded, wall time × torch threads).  A run resumed after a kill counts only its last
session, so the figure is a lower bound then.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "results"


def report(folder: Path) -> dict:
    files = sorted(folder.glob("*.json"))
    cpu_s, commits, methods = 0.0, Counter(), Counter()
    for f in files:
        r = json.loads(f.read_text())
        prov = r["provenance"]
        cpu = prov.get("cpu_time_s")
        cpu_s += cpu if cpu is not None else prov["wall_time_s"] * prov.get("threads", 1)
        commits[prov.get("git_commit", "unknown")[:7]] += 1
        methods[r["config"]["method"]] += 1
    return {
        "chapter": folder.name,
        "runs": len(files),
        "cpu_hours": round(cpu_s / 3600, 2),
        "MB": round(sum(f.stat().st_size for f in files) / 1e6, 2),
        "commits": dict(commits),
        "methods": dict(methods),
    }


def main(argv: list[str]) -> None:
    folders = [ROOT / a for a in argv] or sorted(p for p in ROOT.iterdir() if p.is_dir()) if ROOT.is_dir() else []
    for folder in folders:
        print(json.dumps(report(folder)))


if __name__ == "__main__":
    main(sys.argv[1:])
