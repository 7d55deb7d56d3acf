"""Command line: ``python -m pflkit {methods,datasets,fetch,partition,run,sweep,compare,replay}``.

Bad input ends with exit code 2 and one line on stderr (no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import PflkitError
from .partitions import NATURAL, PROTOCOLS


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        raise PflkitError(message)


def _add_protocol_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True)
    p.add_argument("--clients", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--classes-per-client", type=int, default=2, metavar="K")
    p.add_argument("--shares", type=float, nargs=2, default=(0.4, 0.6), metavar=("LOW", "HIGH"))
    p.add_argument("--alpha", type=float, default=0.5, metavar="A")
    p.add_argument(
        "--label-clusters",
        type=int,
        default=3,
        metavar="G",
        help="groups of classes (label-clusters) or of label maps (concept)",
    )
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--download", action="store_true", help="download missing data with torchvision")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m pflkit", description="pflkit: personalized federated learning kit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser("methods", help="list the methods")
    sub.add_parser("datasets", help="list the datasets and whether they are available offline")
    f = sub.add_parser("fetch", help="make a dataset available (Debian package, then download)")
    f.add_argument("dataset")
    pc = sub.add_parser("paper-check", help="can the paper profile run here? (its datasets, a GPU); one line if not")
    pc.add_argument("chapters", nargs="*", help="chapters to check (default: every chapter)")
    pk = sub.add_parser(
        "paper-cost", help="the paper profile per chapter: datasets, runs, steps, GPU-hours (estimated)"
    )
    pk.add_argument("chapters", nargs="*", help="chapters (default: every chapter)")

    p = sub.add_parser("partition", help="partition a dataset among clients and write JSON")
    _add_protocol_options(p)
    p.add_argument("--protocol", required=True, choices=(*PROTOCOLS, NATURAL))
    p.add_argument("--novel-clients", type=int, default=0)
    p.add_argument(
        "--novel-alpha", type=_floats, default=None, help="α of the novel clients; comma-separated for groups"
    )
    p.add_argument("--out", required=True)
    p.add_argument("--report", default=None, metavar="PNG", help="also draw the client x class heatmap")

    r = sub.add_parser("run", help="train a method and write the result JSON")
    r.add_argument("method")
    _add_run_options(r)
    r.add_argument(
        "--checkpoint", default=None, help="checkpoint file, written after every evaluated round and resumed from"
    )
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--out", default=None)
    r.add_argument(
        "--engine", choices=("inprocess", "flower"), default="inprocess",
        help="inprocess (default) or flower: Flower's simulation runtime, one virtual node per client",
    )  # fmt: skip
    r.add_argument(
        "--superlink", default=None, metavar="HOST:PORT",
        help="with --engine flower: submit to this running Flower SuperLink, whose SuperNodes hold one "
        "client each (--node-config partition-id=CID); the ServerApp writes the result to --out, a path "
        "on the SuperLink's machine",
    )  # fmt: skip

    sw = sub.add_parser("sweep", help="run methods over seeds into a result store; print mean ± 95 % CI")
    sw.add_argument("method", help="method or comma-separated methods")
    _add_run_options(sw)
    _add_sweep_options(sw)
    sw.add_argument("--out", default=None, metavar="CSV", help="write the per-run table")

    c = sub.add_parser("compare", help="paired difference A − B over seeds and the verdict word")
    c.add_argument("a", metavar="A")
    c.add_argument("b", metavar="B")
    _add_run_options(c)
    _add_sweep_options(c)
    c.add_argument("--metric", default="mean_acc", help="mean_acc (default), pooled_acc, macro_f1, micro_f1")
    c.add_argument("--margin", type=float, default=None, help="claim 'no difference' within ±M points")

    rp = sub.add_parser("replay", help="re-run the first rounds of a sample of stored runs and compare")
    rp.add_argument("stores", nargs="*", help="store folders (default: every chapter's under results/)")
    rp.add_argument("--sample", type=int, default=4, help="runs per store (default 4)")
    rp.add_argument("--rounds", type=int, default=2, help="rounds replayed per run (default 2)")
    rp.add_argument("--seed", type=int, default=None, help="sample seed (default: from the git commit)")
    rp.add_argument("--budget", type=float, default=REPLAY_BUDGET_S,
                    help=f"recorded training seconds replayed per store, at most (default {REPLAY_BUDGET_S:g})")  # fmt: skip
    rp.add_argument("--record", action="store_true", help="record the prefix of every stored run lacking one")
    return parser


# the replay check's time, bounded: a store's sample replays at most this many recorded training
# seconds (on the machine kind that made its runs; elsewhere only their cheap prefixes replay)
REPLAY_BUDGET_S = 20.0
TRAINING_DEFAULTS = {"batch_size": 50, "lr": 0.01, "momentum": 0.9, "weight_decay": 0.0, "grad_clip": 0.0}


def _add_run_options(r: argparse.ArgumentParser) -> None:
    _add_protocol_options(r)
    r.add_argument(
        "--partition", default="pathological", choices=(*PROTOCOLS, NATURAL, "groups", "concept"),
        help="partition protocol; natural: one client per user (femnist, celeba); "
        "groups: Dirichlet(--alpha) label mixes in 4 latent image-transform groups",
    )  # fmt: skip
    r.add_argument("--train-images", type=int, default=None, help="a stratified subset of the training images")
    r.add_argument("--test-images", type=int, default=None, help="a stratified subset of the test images")
    r.add_argument("--public-images", type=int, default=0,
                   help="hold out this many training images as a public unlabeled set (KT-pFL)")  # fmt: skip
    r.add_argument("--public-source", default="",
                   help="take the public set from this dataset instead (e.g. digits), resized to the images")  # fmt: skip
    r.add_argument("--rounds", type=int, default=None)
    r.add_argument("--profile", choices=("smoke", "book", "paper"), default=None)
    r.add_argument("--model", default="lenet")
    r.add_argument("--width", default=None, help="LeNet width: S, M, L or a filter count")
    r.add_argument("--sample-rate", type=float, default=None, help="default: the method's, else 1 (every client)")
    r.add_argument("--local-epochs", type=int, default=None)
    r.add_argument("--local-steps", type=int, default=None)
    # None: the method's own training setting (Method.training, e.g. pFedHN's authors'), else TRAINING_DEFAULTS
    r.add_argument("--batch-size", type=int, default=None, help="default: the method's, else 50")
    r.add_argument("--lr", type=float, default=None, help="default: the method's, else 0.01")
    r.add_argument("--momentum", type=float, default=None, help="default: the method's, else 0.9")
    r.add_argument("--weight-decay", type=float, default=None, help="default: the method's, else 0")
    r.add_argument(
        "--grad-clip",
        type=float,
        default=None,
        help="clip each local step's gradient norm (0: off); default: the method's, else 0",
    )
    r.add_argument("--eval-every", type=int, default=1)
    r.add_argument(
        "--eval-finetune-epochs",
        type=int,
        default=0,
        metavar="E",
        help="evaluate each client after E epochs of local fine-tuning (of a copy of its model)",
    )
    r.add_argument("--device", default="auto")


def _add_sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seeds", type=_ints, required=True, help="comma-separated seeds, e.g. 0,1,2")
    p.add_argument("--store", required=True, help="result store folder (created if missing)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (part of the run's key)")
    p.add_argument("--no-progress", action="store_true")


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None


def _floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _method_options(method, extra: list[str]) -> dict:
    """Parse ``--name value`` pairs declared by the method."""
    p = _Parser(prog=f"python -m pflkit run {method.name}", add_help=False)
    for name, (default, help_) in method.options.items():
        typ = _parse_bool if isinstance(default, bool) else type(default) if default is not None else str
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=typ, default=default, help=help_)
    ns, rest = p.parse_known_args(extra)
    if rest:
        raise PflkitError(
            f"unrecognized arguments for {method.name}: {' '.join(rest)}"
            f" (its options: {', '.join('--' + k.replace('_', '-') for k in method.options) or 'none'})"
        )
    return vars(ns)


def cmd_methods(_args) -> None:
    from .methods import METHODS

    for name in sorted(METHODS):
        m = METHODS[name]
        opts = ", ".join(f"--{k.replace('_', '-')} ({d})" for k, (d, _) in m.options.items())
        print(f"{name:12s} {m.summary}" + (f"  [{opts}]" if opts else ""))


def cmd_datasets(_args) -> None:
    from .data import DESCRIPTIONS, available_offline, dataset_names

    for name in dataset_names():
        state = "available offline" if available_offline(name) else "not on this machine (download with --download)"
        print(f"{name:16s} {state:48s} {DESCRIPTIONS[name]}")


def cmd_fetch(args) -> None:
    from .data import fetch_fashion_mnist, load_dataset

    if args.dataset == "fashion-mnist":
        print(f"fashion-mnist: {fetch_fashion_mnist()}")
    else:
        ds = load_dataset(args.dataset, download=True)
        print(f"{ds.name}: {len(ds.y_train)} train / {len(ds.y_test)} test samples available")


def cmd_paper_check(args) -> None:
    from .paper import CHAPTERS, datasets, preflight

    chapters = args.chapters or list(CHAPTERS)
    if (why := preflight(chapters)) is not None:
        raise PflkitError(why)
    for chapter in chapters:
        print(f"{chapter}: {', '.join(datasets(chapter))}")


def cmd_paper_cost(args) -> None:
    from .paper import CHAPTERS, cost_table, step_seconds

    seconds, gpu = step_seconds()
    print(cost_table(args.chapters or list(CHAPTERS)).fillna("—").to_string(index=False))
    print(f"GPU-hours: training steps at {1000 * seconds:.1f} ms a step (median measured on {gpu}, "
          "benchmarks/gpu_check.py); evaluation and data loading come on top")  # fmt: skip


def cmd_partition(args) -> None:
    from .data import load_dataset
    from .partitions import partition_dataset

    ds = load_dataset(args.dataset, download=args.download)
    part = partition_dataset(
        ds, args.protocol, args.clients or 20, args.seed,
        classes_per_client=args.classes_per_client, shares=tuple(args.shares), alpha=args.alpha,
        label_clusters=args.label_clusters, novel_clients=args.novel_clients, novel_alpha=args.novel_alpha,
        val_fraction=args.val_fraction,
    )  # fmt: skip
    part.save(args.out)
    if args.report:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from .plots import partition_report

        fig, ax = plt.subplots(figsize=(6, 0.25 * part.n_clients + 2))
        partition_report(part, ds, ax=ax)
        fig.tight_layout()
        fig.savefig(args.report, dpi=100)
    sizes = [len(c.train) for c in part.clients]
    print(
        f"{args.protocol}: {part.n_clients} clients on {ds.name}, train sizes {min(sizes)}..{max(sizes)}, "
        f"unassigned {part.unassigned} -> {args.out}"
    )


def _config(args, method: str, options: dict):
    from .engine import RunConfig
    from .methods import get_method
    from .profiles import run_defaults

    prof = run_defaults(args.profile)
    own = get_method(method).training  # the method's setting for what the user left out
    train = {
        k: getattr(args, k) if getattr(args, k) is not None else own.get(k, d) for k, d in TRAINING_DEFAULTS.items()
    }
    local_steps = args.local_steps if args.local_steps is not None or args.local_epochs else own.get("local_steps")
    clients = args.clients or prof["clients"]
    sample_rate = args.sample_rate
    if sample_rate is None:
        sample_rate = min(1.0, own["clients_per_round"] / clients) if "clients_per_round" in own else 1.0
    return RunConfig(
        method=method, dataset=args.dataset, partition=args.partition,
        clients=clients, rounds=args.rounds or prof["rounds"], seed=args.seed,
        classes_per_client=args.classes_per_client, shares=tuple(args.shares), alpha=args.alpha,
        label_clusters=args.label_clusters, val_fraction=args.val_fraction, train_images=args.train_images,
        test_images=args.test_images, public_images=args.public_images, public_source=args.public_source,
        model=args.model, width=args.width, sample_rate=sample_rate,
        local_epochs=args.local_epochs or prof["local_epochs"], local_steps=local_steps, **train,
        eval_every=args.eval_every, eval_finetune_epochs=args.eval_finetune_epochs, device=args.device,
        checkpoint=getattr(args, "checkpoint", None), options=options,
    )  # fmt: skip


def _arms(args, names: list[str], extra: list[str]) -> dict:
    """One config per method; each method takes the options it declares among ``extra``
    (an option no listed method declares is an error)."""
    from .engine import dataset
    from .methods import get_method

    methods = [get_method(n) for n in names]
    if len(set(names)) != len(names):
        raise PflkitError(f"a method is listed twice: {','.join(names)}")
    known = {k for m in methods for k in m.options}
    given = {a.split("=")[0][2:].replace("-", "_") for a in extra if a.startswith("--")}
    if given - known or (extra and not extra[0].startswith("--")):
        raise PflkitError(f"unrecognized arguments: {' '.join(extra)} (not an option of {', '.join(names)})")
    arms = {}
    for m in methods:
        mine = []
        for i, a in enumerate(extra):  # --name value pairs this method declares
            if a.startswith("--") and a.split("=")[0][2:].replace("-", "_") in m.options:
                mine += [a] if "=" in a else [a, *extra[i + 1 : i + 2]]
        arms[m.name] = _config(args, m.name, _method_options(m, mine))
    dataset(args.dataset, download=args.download)  # missing data: one line before any worker starts
    return arms


def cmd_sweep(args, extra: list[str]) -> None:
    from .sweeps import sweep

    arms = _arms(args, [n for n in args.method.split(",") if n], extra)
    res = sweep(arms, args.seeds, args.store, workers=args.workers, threads=args.threads,
                progress=not args.no_progress)  # fmt: skip
    summary = res.summary("mean_acc")
    for arm, row in summary.iterrows():
        ci = "" if row.seeds < 2 else f" ± {row.ci95:.2f}"
        flag = {True: "yes", False: "no", None: "not measured"}[row.still_improving]
        print(f"{arm:12s} mean_acc {row.mean_acc:.2f}{ci} % (95 % CI, {row.seeds} seeds)  still improving: {flag}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        res.finals().to_csv(args.out, index=False)
    print(f"computed {res.computed}, reused {res.reused}")


def cmd_compare(args, extra: list[str]) -> None:
    from .sweeps import FINAL_METRICS, sweep

    if args.metric not in FINAL_METRICS:
        raise PflkitError(f"unknown metric {args.metric!r}; one of {', '.join(FINAL_METRICS)}")
    if args.a == args.b:
        raise PflkitError("compare needs two different methods")
    arms = _arms(args, [args.a, args.b], extra)
    res = sweep(arms, args.seeds, args.store, workers=args.workers, threads=args.threads,
                progress=not args.no_progress)  # fmt: skip
    v = res.compare(args.a, args.b, args.metric, args.margin)
    claim = f"{args.a} and {args.b} do not differ" if args.margin is not None else f"{args.a} beats {args.b}"
    print(f"{claim}: {args.metric} {args.a} − {args.b}: {v}")
    print(f"computed {res.computed}, reused {res.reused}")


def cmd_run(args, extra: list[str]) -> None:
    from .engine import Federation, run
    from .methods import get_method

    cfg = _config(args, args.method, _method_options(get_method(args.method), extra))
    if args.superlink and args.engine != "flower":
        raise PflkitError("--superlink goes with --engine flower")
    if args.engine == "flower":
        from .flower import run_deployed, run_flower

        Federation.from_config(cfg, download=args.download)  # the data are there before the nodes start
        if args.superlink:
            out = str(Path(args.out or f"{cfg.method}-flower.json").resolve())
            result = run_deployed(cfg, args.superlink, out)
            if result is None:
                print(f"the run finished; its result is at {out} on the SuperLink's machine")
                return
        else:
            result = run_flower(cfg)
    else:
        result = run(cfg, Federation.from_config(cfg, download=args.download), progress=not args.no_progress)
    f = result["final"]
    print(
        f"{cfg.method} on {cfg.dataset}/{cfg.partition}, {cfg.clients} clients, {cfg.rounds} rounds: "
        f"mean_acc {f['mean_acc']:.4f} pooled_acc {f['pooled_acc']:.4f} "
        f"(best-by-val {result['best_by_val']['mean_acc']:.4f} @ {result['best_by_val']['round']}), "
        f"up {result['comm']['bytes_up'] / 1e6:.2f} MB down {result['comm']['bytes_down'] / 1e6:.2f} MB, "
        f"{result['provenance']['wall_time_s']:.1f} s on {result['provenance']['device']}"
    )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))


def cmd_replay(args) -> None:
    from .profiles import COMMITTED
    from .replay import record_prefixes, stores

    paths = [Path(p) for p in args.stores] or stores(COMMITTED)
    for p in paths:
        if not p.is_dir():
            raise PflkitError(f"no store folder {p}")
    if not paths:
        print(f"no stored runs under {COMMITTED}")
        return
    if args.record:
        print(f"{sum(record_prefixes(p) for p in paths)} prefixes recorded")
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    from .store import cores

    stale = []
    # the stores replay side by side, one per core (each run replays at its own recorded thread count)
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    with ProcessPoolExecutor(max(1, min(cores(), len(paths))), mp_context=ctx) as pool:
        jobs = [(p, args.sample, args.seed, args.rounds, args.budget) for p in paths]
        for lines, found in pool.map(_replay_store, jobs):
            print("\n".join(lines), flush=True)
            stale += found
    if stale:
        raise PflkitError("\n".join(stale))


def _replay_store(job) -> tuple[list[str], list[str]]:
    """One store's replay check in a worker: its log lines and its stale runs."""
    from .replay import check

    path, k, seed, rounds, budget_s = job
    lines: list[str] = []
    return lines, check(path, k, seed, rounds, log=lines.append, budget_s=budget_s)


def method_help(parser: argparse.ArgumentParser, argv: list[str]) -> bool:
    """``run METHOD --help`` (also sweep, compare): the command's help, then METHOD's options
    and its training defaults.  False when argv asks for something else."""
    from .methods import METHODS

    if len(argv) < 2 or argv[0] not in ("run", "sweep", "compare") or not {"-h", "--help"} & set(argv):
        return False
    names = [n for a in argv[1:] if not a.startswith("-") for n in a.split(",") if n in METHODS]
    if not names:
        return False
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[argv[0]]
    sub.print_help()
    for name in dict.fromkeys(names):
        m = METHODS[name]
        print(f"\noptions of {name} ({m.summary}; {m.paper}):")
        for k, (default, help_) in m.options.items():
            print(f"  --{k.replace('_', '-'):22s} {help_} (default: {default})")
        if m.training:
            print(
                f"  training defaults of {name} when not given: "
                + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in m.training.items())
            )
    return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser()
        if method_help(parser, argv):
            return 0
        args, extra = parser.parse_known_args(argv)
        if args.command in ("run", "sweep", "compare"):
            {"run": cmd_run, "sweep": cmd_sweep, "compare": cmd_compare}[args.command](args, extra)
        else:
            if extra:
                raise PflkitError(f"unrecognized arguments: {' '.join(extra)}")
            commands = {
                "methods": cmd_methods,
                "datasets": cmd_datasets,
                "fetch": cmd_fetch,
                "paper-check": cmd_paper_check,
                "paper-cost": cmd_paper_cost,
                "partition": cmd_partition,
                "replay": cmd_replay,
            }
            commands[args.command](args)
    except PflkitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0
