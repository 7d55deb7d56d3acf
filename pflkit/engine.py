"""The round loop shared by every method.

``run(cfg)`` builds the federation (:mod:`pflkit.federation`: dataset tensors on the device,
partition; then one client object per client), then for every round: samples clients, passes the server's message to
each and its reply back (counting bytes both ways), lets the server aggregate, evaluates
every client's personalised model on its validation and test splits, and checkpoints.
Randomness is derived from ``(seed, round, client)``, so a run resumed from a checkpoint
continues exactly as the uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np
import torch

from . import __version__
from .compute import compute_path
from .errors import PflkitError, TrainingDiverged
from .federated import Message, derive_seed, evaluate, nbytes
from .federation import (  # noqa: F401  (the engine's users import these from it too)
    Federation,
    RunConfig,
    _stratified,
    dataset,
    foreign_public,
    hold_out_public,
    pick_device,
    subsample,
)
from .models import build_model


def macro_f1(true: np.ndarray, pred: np.ndarray) -> float:
    """scikit-learn's ``f1_score(true, pred, average="macro", zero_division=0)``, bit for bit (per label
    of either array 2·tp / (true + predicted), their ``nanmean``) without its input checks, which cost
    ~10 ms a call: most of an evaluation of many small clients."""
    labels, idx = np.unique(np.concatenate([true, pred]), return_inverse=True)
    t, p, k = idx[: len(true)], idx[len(true) :], len(labels)
    tp = np.bincount(t[t == p], minlength=k)
    return float(np.nanmean(2.0 * tp / (1.0 * np.bincount(t, minlength=k) + np.bincount(p, minlength=k))))


def summarize(results: list[dict]) -> dict:
    """Client-level evaluation results -> the book's metrics.

    ``mean_acc`` (= macro accuracy): plain mean of per-client accuracies.
    ``pooled_acc`` (= micro accuracy): Σ correct / Σ samples over clients.
    ``macro_f1`` / ``micro_f1``: per-client macro-F1 (over the labels the client sees),
    averaged plainly / weighted by the client's sample count.
    """
    results = [r for r in results if r["n"] > 0]
    n = np.array([r["n"] for r in results], dtype=float)
    acc = np.array([r["correct"] / r["n"] for r in results])
    f1 = np.array([macro_f1(r["true"], r["pred"]) for r in results])
    return {
        "mean_acc": float(acc.mean()),
        "pooled_acc": float(sum(r["correct"] for r in results) / n.sum()),
        "macro_f1": float(f1.mean()),
        "micro_f1": float((f1 * n).sum() / n.sum()),
        "loss": float((np.array([r["loss"] for r in results]) * n).sum() / n.sum()),
        "per_client_acc": acc.tolist(),
    }


def evaluate_clients(server, clients, client_ids, eval_seed: int) -> dict:
    """Evaluate every listed client's personalised model on its val and test splits (after
    ``eval_finetune_epochs`` epochs of local fine-tuning of a copy, if configured).  ``clients``:
    the client objects, or the transport that reaches them (:class:`LocalClients`)."""
    pool = clients if hasattr(clients, "evaluate") else LocalClients(clients)  # a list, or a transport
    messages = {cid: server.eval_message(cid) for cid in client_ids}
    results = pool.evaluate({cid: (msg, derive_seed(eval_seed, cid)) for cid, msg in messages.items()})
    per_split = {split: [results[cid][split] for cid in client_ids] for split in ("val", "test")}
    out = {}
    if any(r["n"] for r in per_split["val"]):  # val_fraction = 0 leaves no validation data
        out = {f"val_{k}": v for k, v in summarize(per_split["val"]).items() if k != "per_client_acc"}
    out.update(summarize(per_split["test"]))
    out["eval_bytes_down"] = sum(nbytes(m) for m in messages.values())
    return out


# ----------------------------------------------------------------------------- reaching the clients


@contextlib.contextmanager
def own_randomness(client, seed: int, generator_seed: int | None = None):
    """A client's call runs in its own random-number bubble: torch's global generator is seeded
    from ``seed`` and restored afterwards (dropout and any other global draws of one client do not
    shift another's, nor the server's), and the client's own generator is reseeded when
    ``generator_seed`` is given.  The same numbers whichever process runs the client."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if generator_seed is not None:
            client.generator.manual_seed(generator_seed)
        yield


class LocalClients:
    """The clients as objects in this process: the in-process engine's way of reaching them.

    The round loop (:func:`run`) talks to clients only through these four calls, each taking
    ``{cid: (message, seeds)}`` for the clients it concerns and returning ``{cid: reply}``; another
    transport (Flower, :mod:`pflkit.flower`) carries the same messages over the network."""

    def __init__(self, clients):
        self.clients = clients

    def __len__(self) -> int:
        return len(self.clients)

    def setup(self) -> dict[int, Message]:
        """Before round 1: the setup messages of the clients that have one."""
        return {c.cid: m for c in self.clients if (m := c.setup_message()) is not None}

    def request(self, calls: dict, rnd: int) -> dict[int, Message]:
        """First step of a two-step round; ``calls``: {cid: (message, (seed, generator seed))}."""
        return self._each(calls, lambda client, msg: client.request(msg, rnd))

    def train(self, calls: dict, rnd: int) -> dict[int, Message]:
        """The round's training; ``calls``: {cid: (message, (seed, generator seed or None))}."""
        return self._each(calls, lambda client, msg: client.train_round(msg, rnd))

    def _each(self, calls: dict, step) -> dict[int, Message]:
        out = {}
        for cid, (msg, (seed, gen_seed)) in calls.items():
            with own_randomness(self.clients[cid], seed, gen_seed):
                out[cid] = step(self.clients[cid], msg)
        return out

    def save(self, path: Path, rnd: int) -> list[dict] | None:
        """At a checkpoint: the clients' states, for the server's checkpoint file (clients in this
        process); a transport whose clients keep their own saves them there and returns ``None``."""
        return [c.state_dict() for c in self.clients]

    def load(self, states: list[dict] | None, path: Path, rnd: int) -> None:
        """On resuming: the clients' states as :meth:`save` left them."""
        for c, s in zip(self.clients, states):
            c.load_state_dict(s)

    def evaluate(self, calls: dict) -> dict[int, dict]:
        """{cid: (eval message, seed)} → {cid: {"val": counts, "test": counts}} (see ``evaluate``)."""
        out = {}
        for cid, (msg, seed) in calls.items():
            client = self.clients[cid]
            with own_randomness(client, seed, seed):
                model = client.eval_model(msg)
                if client.cfg.eval_finetune_epochs:
                    model = client.fine_tuned(model, client.cfg.eval_finetune_epochs)
                out[cid] = {split: evaluate(model, *client.data.split(split)) for split in ("val", "test")}
        return out


# ----------------------------------------------------------------------------- the run


def _git(*args) -> str:
    here = Path(__file__).resolve().parent
    try:
        return subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _source_commit() -> str:
    """HEAD, with ``-dirty`` when the kit's sources differ from it ("unknown" outside git)."""
    head = _git("rev-parse", "HEAD")
    if not head:
        return "unknown"
    return head + ("-dirty" if _git("status", "--porcelain", "--", "pflkit") else "")


# read once, when the kit is imported: a long-lived process (a notebook kernel, a sweep worker)
# runs the code it imported, whatever HEAD is by the time a run starts
SOURCE_COMMIT = _source_commit()


def git_commit() -> str:
    """The commit of the sources this process runs (see :data:`SOURCE_COMMIT`)."""
    return SOURCE_COMMIT


def build(cfg: RunConfig, fed: Federation | None = None):
    """Federation, method, server and clients for a config (nothing trained yet)."""
    from .methods import get_method

    method = get_method(cfg.method)
    opts = method.resolve_options(cfg.options)
    fed = fed or Federation.from_config(cfg)
    torch.manual_seed(cfg.seed)
    template = build_model(cfg.model, fed.ds.input_shape, fed.ds.n_classes, cfg.width).to(fed.device)
    server = method.server(method.clone(template), cfg, opts, len(fed.clients))
    server.n_public, server.x_public = len(fed.x_public), fed.x_public

    def client_model(cid: int):
        arch = method.client_arch(cid, len(fed.clients), opts) if method.client_arch else None
        if arch:  # heterogeneous architectures: this client's own model, built from its own seed
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(derive_seed(cfg.seed, 5, cid))
                return build_model(arch, fed.ds.input_shape, fed.ds.n_classes).to(fed.device)
        width = method.client_width(cid, len(fed.clients), opts) if method.client_width else None
        if width is None:
            return method.clone(template)
        return build_model(cfg.model, fed.ds.input_shape, fed.ds.n_classes, width).to(fed.device)

    clients = [method.client(i, data, client_model(i), cfg, opts) for i, data in enumerate(fed.clients)]
    return fed, method, server, clients


def handshake(server, clients) -> int:
    """Before round 1: every client that has something to say once (its ``setup_message``)
    sends it, and the server receives them together.  Returns the bytes sent up."""
    pool = clients if hasattr(clients, "evaluate") else LocalClients(clients)  # a list, or a transport
    uploads = pool.setup()
    if uploads:
        server.setup(uploads)
    return sum(nbytes(m) for m in uploads.values())


def run(
    cfg: RunConfig, fed: Federation | None = None, progress: bool = False, on_round=None, on_setup=None,
    stop_after: int | None = None, transport=None,
) -> dict:  # fmt: skip
    """Train ``cfg.method`` for ``cfg.rounds`` rounds; returns the result record (JSON-able).

    ``on_round(rnd, row, server, clients)`` is called after every evaluated round (for the
    book's figures: α heatmaps, embeddings, cluster assignments...); ``on_setup(server,
    clients)`` once before round 1, after the setup handshake (not when resuming from a
    checkpoint), e.g. to record FeSEM's initial clustering.  ``stop_after``: train only the
    first rounds of the run ``cfg`` describes (the replay check; nothing else changes, so a
    schedule that depends on ``cfg.rounds`` is the full run's).  ``transport(clients)``: how the
    round loop reaches the clients (default :class:`LocalClients`, in this process; Flower:
    :func:`pflkit.flower.run_flower`).
    """
    if cfg.rounds < 1 or cfg.clients < 1 or not 0 < cfg.sample_rate <= 1 or cfg.eval_finetune_epochs < 0:
        raise PflkitError("rounds and clients must be >= 1, sample_rate in (0, 1] and eval_finetune_epochs >= 0")
    t0, cpu0 = time.perf_counter(), time.process_time()
    fed, method, server, clients = build(cfg, fed)
    bound = loss_bound(fed.ds.n_classes)
    train_ids = [i for i in range(len(clients)) if i not in set(fed.partition.novel)]
    history: list[dict] = []
    trace: list[float] = []  # every round's mean training loss: the replay check's fingerprint of a run
    ledger = {"bytes_up": 0, "bytes_down": 0, "eval_bytes_down": 0}
    pool = LocalClients(clients) if transport is None else transport(clients)
    ledger["bytes_up"] += handshake(server, pool)
    timing = {"setup_s": time.perf_counter() - t0, "train_s": 0.0, "eval_s": 0.0, "checkpoint_s": 0.0}
    start = 0
    ckpt = Path(cfg.checkpoint) if cfg.checkpoint else None
    if ckpt is not None and ckpt.exists():
        start, history, ledger, trace = load_checkpoint(ckpt, cfg, server, pool)
    if on_setup is not None and start == 0:
        on_setup(server, clients)

    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(range(start, cfg.rounds), desc=cfg.method, initial=start, total=cfg.rounds)
    else:
        bar = range(start, cfg.rounds)
    for rnd in bar:
        if stop_after is not None and rnd >= stop_after:
            break
        t_round = time.perf_counter()
        torch.manual_seed(derive_seed(cfg.seed, rnd, 1))
        m = max(1, int(round(cfg.sample_rate * len(train_ids))))
        pick = np.random.default_rng(derive_seed(cfg.seed, rnd, 2)).choice(len(train_ids), m, replace=False)
        selected = sorted(train_ids[i] for i in pick)
        # each client's draws this round: torch's global generator (its own bubble) and its generator
        seeds = {cid: derive_seed(cfg.seed, rnd, 1, cid) for cid in selected}
        gen_seeds = {cid: derive_seed(cfg.seed, rnd, 3, cid) for cid in selected}
        # a two-step round (FedMN asks for its active blocks; KT-pFL uploads soft predictions): every
        # client answers the server's first message before any gets its second
        pre = {cid: msg for cid in selected if (msg := server.pre_message(cid, rnd)) is not None}
        if pre:
            ledger["bytes_down"] += sum(nbytes(msg) for msg in pre.values())
            calls = {cid: (msg, (derive_seed(seeds[cid], 0), gen_seeds[cid])) for cid, msg in pre.items()}
            for cid, request in pool.request(calls, rnd).items():
                ledger["bytes_up"] += nbytes(request)
                server.receive_request(cid, request, rnd)
        messages = {cid: server.message_for(cid, rnd) for cid in selected}
        ledger["bytes_down"] += sum(nbytes(msg) for msg in messages.values())
        calls = {cid: (msg, (seeds[cid], None if cid in pre else gen_seeds[cid])) for cid, msg in messages.items()}
        replies = pool.train(calls, rnd)  # {cid: (upload, its training loss)}: the loss stays beside what travels
        uploads = {cid: upload for cid, (upload, _) in replies.items()}
        losses = [loss for _, loss in replies.values()]
        ledger["bytes_up"] += sum(nbytes(reply) for reply in uploads.values())
        server.aggregate(uploads, rnd)
        t_eval = time.perf_counter()
        timing["train_s"] += t_eval - t_round
        trace.append(float(np.nanmean(losses)) if losses else float("nan"))
        if (why := exploded(trace[-1:], bound, start=rnd + 1)) is not None:
            raise TrainingDiverged(f"{why} (method {cfg.method}, lr {cfg.lr}); lower the learning rate")

        evaluated = (rnd + 1) % cfg.eval_every == 0 or rnd + 1 == cfg.rounds
        if evaluated:
            row = {"round": rnd + 1, "train_loss": trace[-1]}
            metrics = evaluate_clients(server, pool, train_ids, derive_seed(cfg.seed, rnd, 4))
            ledger["eval_bytes_down"] += metrics.pop("eval_bytes_down")
            row.update(metrics)
            row.update(ledger)
            row["wall_s"] = time.perf_counter() - t0
            history.append(row)
            if progress:
                bar.set_postfix(acc=f"{row['mean_acc']:.3f}")
            if on_round is not None:
                on_round(rnd + 1, row, server, clients)
        t_ckpt = time.perf_counter()
        timing["eval_s"] += t_ckpt - t_eval
        # checkpoints follow evaluations (a resumed run repeats < eval_every rounds), but not the last
        # round: a run killed before its record was stored redoes its last stretch, probes included
        if ckpt is not None and evaluated and rnd + 1 < cfg.rounds:
            save_checkpoint(ckpt, cfg, rnd + 1, history, ledger, server, pool, trace)
            timing["checkpoint_s"] += time.perf_counter() - t_ckpt

    if not history:  # stopped (stop_after) before the first evaluation
        return {"config": cfg.to_dict(), "history": [], "round_loss": trace}
    return make_result(
        cfg, fed, method, history, ledger, time.perf_counter() - t0, timing, trace, time.process_time() - cpu0
    )


# A run diverged when a round's mean training loss leaves DIVERGE_FACTOR × ln(classes), the loss of a
# model that predicts every class alike (about what an initialised network scores). Chosen from the
# committed store (1,243 runs): every round of 1,239 of them stays below 2.9 × ln(10); the other four
# reach 8.3 × (twice), 161 × and 150,000 × (then recover on the CPU that made them). 5 sits in that gap.
DIVERGE_FACTOR = 5.0


def loss_bound(n_classes: int) -> float:
    """The largest mean training loss of a round that has not diverged (:data:`DIVERGE_FACTOR`)."""
    return DIVERGE_FACTOR * math.log(max(n_classes, 2))


def exploded(trace, bound: float, start: int = 1) -> str | None:
    """Why a run's training losses (``trace``: one per round from round ``start``) show divergence
    — a loss that is infinite or above ``bound`` — or None.  NaN is a round that reported no loss
    (a client's NaN loss stops the run where it arises: ``Client.check_finite``)."""
    for rnd, loss in enumerate(trace, start=start):
        if loss is None or math.isnan(loss):
            continue
        if math.isinf(loss) or loss > bound:
            return (
                f"round {rnd}'s training loss {loss:.4g} left the bound {bound:.3g} ({DIVERGE_FACTOR:g} × ln classes)"
            )
    return None


def cpu_model() -> str:
    """The CPU's model name with its family, model, stepping and widest vector instructions (the
    replay check demands identical numbers only on the same CPU). The name alone is not enough: a
    virtual machine may report only "AMD EPYC" for generations whose kernels round differently
    (measured: a run stored on one "AMD EPYC" replayed 1.6e-5 apart in its first loss on another)."""
    try:
        ident = cpu_identity(Path("/proc/cpuinfo").read_text())
    except OSError:
        ident = None
    return ident or platform.processor() or platform.machine()


def cpu_identity(cpuinfo: str) -> str | None:
    """``cpu_model``'s string from the text of /proc/cpuinfo (its first processor), or None
    where it names no model."""
    info = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "cpu family", "model", "stepping", "flags") and key not in info:
            info[key] = value.strip()
        if not line.strip() and info:
            break  # the first processor is enough
    if "model name" not in info:
        return None
    flags = set(info.get("flags", "").split())
    isa = next((f for f in ("avx512f", "avx2", "avx") if f in flags), "no avx")
    ident = ", ".join(f"{k} {info[k]}" for k in ("cpu family", "model", "stepping") if k in info)
    return f"{info['model name']} ({ident}, {isa})"


def make_result(cfg, fed, method, history, ledger, wall, timing, trace=(), cpu=None) -> dict:
    last = history[-1]
    with_val = [h for h in history if "val_mean_acc" in h]
    best = max(with_val, key=lambda h: h["val_mean_acc"]) if with_val else last
    pick = ("mean_acc", "pooled_acc", "macro_f1", "micro_f1", "per_client_acc")
    return {
        "config": cfg.to_dict(),
        "options": method.resolve_options(cfg.options),
        "history": [{k: v for k, v in h.items() if k != "per_client_acc"} for h in history],
        "final": {k: last[k] for k in pick} | {"round": last["round"]},
        "best_by_val": {k: best[k] for k in pick} | {"round": best["round"]},
        "comm": {k: ledger[k] for k in ("bytes_up", "bytes_down", "eval_bytes_down")},
        "round_loss": list(trace),  # mean training loss of every round (NaN-free unless a round trained nobody)
        "loss_bound": loss_bound(fed.ds.n_classes),  # the divergence rule's bound (exploded)
        "timing": {k: round(v, 3) for k, v in timing.items()},  # this session's time (not resumed rounds)
        "partition": {
            "unassigned": fed.partition.unassigned,
            "train_sizes": [len(c.train) for c in fed.partition.clients],
            "novel": fed.partition.novel,
        },
        "provenance": {
            "pflkit": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "git_commit": git_commit(),
            "device": str(fed.device),
            "threads": torch.get_num_threads(),
            "cpu": cpu_model(),
            "compute": compute_path(),  # memory format and kernel choices (pflkit.compute)
            "wall_time_s": round(wall, 3),
            "cpu_time_s": None if cpu is None else round(cpu, 3),  # CPU seconds of this process (all its threads)
            "seed": cfg.seed,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    }


# ----------------------------------------------------------------------------- checkpoints


# fields added to RunConfig after checkpoints and stored runs existed: left out of their keys at
# these defaults, so that earlier files keep their meaning
LATER_FIELDS = {
    "grad_clip": 0.0,
    "label_clusters": 3,
    "eval_finetune_epochs": 0,
    "train_images": None,
    "test_images": None,
    "novel_clients": 0,
    "novel_alpha": None,
    "public_images": 0,
    "public_source": "",
}


def _ckpt_key(cfg: RunConfig) -> str:
    d = cfg.to_dict()
    d.pop("rounds")
    d.pop("checkpoint")
    for name, default in LATER_FIELDS.items():  # checkpoints written before a field existed stay valid
        if d[name] == default:
            d.pop(name)
    return json.dumps(d, sort_keys=True)


def save_checkpoint(path: Path, cfg, rnd, history, ledger, server, pool, trace=()) -> None:
    """The server's state and the run so far, with the clients' states where ``pool`` (the
    transport) returns them; clients that keep their own (Flower nodes) have saved theirs first."""
    state = {
        "config": _ckpt_key(cfg),
        "round": rnd,
        "history": json.dumps(history),
        "trace": json.dumps(list(trace)),
        "ledger": ledger,
        "server": server.state_dict(),
        "clients": pool.save(path, rnd),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic: a kill leaves the previous checkpoint intact


def load_checkpoint(path: Path, cfg, server, pool):
    try:
        state = torch.load(path, map_location=pick_device(cfg.device), weights_only=True)
        state["config"], state["round"], state["history"], state["ledger"]  # noqa: B018
    except Exception as err:  # truncated, half-written, or not a checkpoint at all
        raise PflkitError(
            f"checkpoint {path} is unreadable ({type(err).__name__}); delete it to start this run over"
        ) from None
    if state["config"] != _ckpt_key(cfg):
        raise PflkitError(
            f"checkpoint {path} was written by a different configuration; delete it or change --checkpoint"
        )
    server.load_state_dict(state["server"])
    pool.load(state["clients"], path, state["round"])
    trace = json.loads(state.get("trace", "[]"))
    trace = [float("nan")] * (state["round"] - len(trace)) + trace  # checkpoints older than the trace
    return state["round"], json.loads(state["history"]), dict(state["ledger"]), trace
