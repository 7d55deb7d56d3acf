"""A SuperNode that dies mid-round on a real Flower deployment (loopback), and the run resumed.

A SuperLink and two SuperNodes on 127.0.0.1 (:func:`pflkit.flower.local_federation`) run FedAvg
with a checkpoint; once both nodes have saved their clients at round 2, node 1's process group is
killed.  Measured: how long until the run stops, and with which error; then a new federation (the
nodes started again, the same disk) resumes from the checkpoint, and the result is compared with an
uninterrupted in-process run.  Too slow for the test suite (minutes: a deployed node starts a
process per message); the simulation's resume is tested in tests/test_flower.py.

    python benchmarks/flower_node_failure.py [--out benchmarks/results/flower_node_failure.jsonl]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from pflkit import flower
from pflkit.engine import RunConfig, run
from pflkit.errors import PflkitError


def kill_node_when_saved(node_file: Path, cid: int, t0: float, when: dict) -> None:
    while not node_file.exists():
        time.sleep(0.5)
    time.sleep(3)  # into the next round
    for pid in subprocess.run(["pgrep", "-f", f"partition-id={cid}"], capture_output=True, text=True).stdout.split():
        try:
            os.killpg(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    when["killed_s"] = time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="append the result as one JSON line")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp())
    cfg = RunConfig(
        method="fedavg", dataset="digits", partition="pathological", clients=2, classes_per_client=5, rounds=6,
        local_steps=8, batch_size=32, lr=0.05, momentum=0.9, model="mlp", device="cpu", eval_every=1,
        checkpoint=str(tmp / "ck.pt"),
    )  # fmt: skip
    row: dict = {
        "time": datetime.datetime.now().isoformat(timespec="seconds"),
        "method": cfg.method,
        "rounds": cfg.rounds,
    }
    t0 = time.monotonic()
    with flower.local_federation(2, tmp / "first") as link:
        saved = tmp / "ck.pt.nodes" / "ck.pt-client1-round2.pt"
        threading.Thread(target=kill_node_when_saved, args=(saved, 1, t0, row), daemon=True).start()
        try:
            flower.run_deployed(cfg, link, str(tmp / "out.json"), threads=1, timeout=900)
            row["error"] = None
        except PflkitError as err:
            row["error"] = str(err)
        row["stopped_s"] = time.monotonic() - t0
    t1 = time.monotonic()
    with flower.local_federation(2, tmp / "again") as link:  # the nodes started again, on the same disk
        resumed = flower.run_deployed(cfg, link, str(tmp / "out.json"), threads=1, timeout=900)
    row["resumed_s"] = time.monotonic() - t1
    want = run(dataclasses.replace(cfg, checkpoint=None))
    strip = lambda r: [{k: v for k, v in h.items() if k != "wall_s"} for h in r["history"]]  # noqa: E731
    row["resumed_equals_uninterrupted"] = strip(resumed) == strip(want) and resumed["comm"] == want["comm"]
    print(json.dumps(row))
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(json.dumps(row) + "\n")
    sys.exit(0 if row["resumed_equals_uninterrupted"] and row["error"] else 1)


if __name__ == "__main__":
    main()
