"""Fill the committed `book` stores of several chapters side by side: one chapter per core.

    python tools/fill_store.py fesem pfedmb fedmn ktpfl     # e.g. in the background; resumable

Each chapter is executed at `book` with papermill in a process pinned to one core, so its sweeps
run one worker of one torch thread (the same runs, the same keys as a two-worker sweep: a run's
identity holds its thread count, not the number of workers).  Two chapters then fill at once
instead of one chapter whose two-worker sweeps leave a core idle while their last run finishes;
when a chapter ends, its core takes the next chapter of the list.  Finished runs land in
``results/<chapter>/`` as they finish (commit them as they come); a killed fill resumes unfinished
runs from their checkpoints.  The executed notebooks and logs go to ``_build/fill/``.
Exit status: 0 when every chapter ran to its end, else 1 (the log of a failed chapter is named).
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# glibc's malloc returns freed memory to the system and asks for it again (brk, munmap): on pFedHN's
# hypernetwork runs that kept both cores in the kernel and made them 3x slower. Keeping it costs a
# little memory and changes no number.
MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(2**30), "MALLOC_TRIM_THRESHOLD_": str(2**40), "MALLOC_TOP_PAD_": str(2**28)}
OUT = ROOT / "_build" / "fill"


def fill(chapter: str, cores: queue.Queue) -> tuple[str, int, float]:
    core = cores.get()
    try:
        log = OUT / f"{chapter}.log"
        env = {**os.environ, "PFLBOOK_PROFILE": "book", "PFLBOOK_STORE_ONLY": "0", "PFLBOOK_FRESH": "0",
               "PFLBOOK_PROGRESS": "0", "OMP_NUM_THREADS": "1", **MALLOC}  # fmt: skip
        cmd = [sys.executable, "-m", "papermill", str(ROOT / "book" / f"{chapter}.ipynb"),
               str(OUT / f"{chapter}.ipynb"), "--cwd", str(ROOT / "book"), "--log-output"]  # fmt: skip
        t0 = time.perf_counter()
        print(f"{chapter}: started on core {core}, log {log.relative_to(ROOT)}", flush=True)
        with open(log, "w") as f:
            rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: os.sched_setaffinity(0, {core})).returncode  # fmt: skip
        return chapter, rc, time.perf_counter() - t0
    finally:
        cores.put(core)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapters", nargs="+", help="chapter file stems, filled in this order")
    args = ap.parse_args()
    missing = [c for c in args.chapters if not (ROOT / "book" / f"{c}.ipynb").exists()]
    if missing:
        print(f"error: no chapter book/{missing[0]}.ipynb", file=sys.stderr)
        sys.exit(2)
    OUT.mkdir(parents=True, exist_ok=True)
    cores: queue.Queue = queue.Queue()
    for core in sorted(os.sched_getaffinity(0)):
        cores.put(core)
    failed = []
    with ThreadPoolExecutor(cores.qsize()) as pool:
        jobs = [pool.submit(fill, c, cores) for c in args.chapters]
        for job in as_completed(jobs):
            chapter, rc, wall = job.result()
            print(f"{chapter}: {'done' if rc == 0 else f'FAILED (exit {rc})'} after {wall / 3600:.2f} h", flush=True)
            if rc:
                failed.append(f"{chapter} (see {(OUT / f'{chapter}.log').relative_to(ROOT)})")
    if failed:
        sys.exit(f"error: {', '.join(failed)}")


if __name__ == "__main__":
    main()
