"""The result store: one JSON file per finished run, keyed by its canonical config.

A run's key holds everything that determines its numbers (the config with its method options
resolved, the torch thread count); files are written atomically by the process that ran them, so
a killed sweep loses only the runs still going (they resume from their checkpoints, kept in the
store's ``checkpoints/`` until the run ends).  Stored runs are read with the divergence rule
(:func:`pflkit.engine.exploded`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from .engine import LATER_FIELDS, RunConfig, cpu_model, dataset, exploded, git_commit, loss_bound
from .errors import NotInStore, PflkitError
from .methods import get_method
from .profiles import COMMITTED, COMMITTED_CHAPTERS, ROOT, build_name, current, fresh, repo_relative, store_only


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def canonical(cfg: RunConfig, threads: int) -> dict:
    """The fields that determine a run's numbers: the config with its method options resolved
    (so an option left out and the same option at its default are one run), without where it
    checkpoints or which device it picked, plus the torch thread count."""
    d = cfg.to_dict()
    d.pop("checkpoint")
    d.pop("device")
    method = get_method(cfg.method)
    d["options"] = method.resolve_options(cfg.options)
    for name, default in method.later_options.items():  # options added after stored runs existed
        if d["options"].get(name) == default:
            d["options"].pop(name)
    for name, default in LATER_FIELDS.items():
        if d[name] == default:
            d.pop(name)
    d["threads"] = int(threads)
    return d


def run_key(cfg: RunConfig, threads: int) -> str:
    """File-name key of a run: ``<method>-s<seed>-<hash of the canonical config>``."""
    blob = json.dumps(canonical(cfg, threads), sort_keys=True)
    return f"{cfg.method}-s{cfg.seed}-{hashlib.sha1(blob.encode()).hexdigest()[:16]}"


_CODE: list[str] = []


def code_version() -> str:
    """A hash of the kit's source files as this process imported them (computed at import):
    runs of other code are not reused by default."""
    if not _CODE:
        h = hashlib.sha1()
        here = Path(__file__).resolve().parent
        for f in sorted(here.rglob("*.py")):
            h.update(str(f.relative_to(here)).encode() + b"\0" + f.read_bytes())
        _CODE.append(h.hexdigest()[:12])
    return _CODE[0]


code_version()  # now, at import: a long-lived process runs the sources it imported


def bound_of(record: dict) -> float:
    """The divergence bound of a stored run (:func:`pflkit.engine.loss_bound`): recorded with it, or
    from its dataset's classes for runs stored before the bound was."""
    if "loss_bound" in record:
        return record["loss_bound"]
    return loss_bound(dataset(record["config"]["dataset"]).n_classes)


def _write_atomically(f: Path, record: dict) -> None:
    """``record`` as JSON at ``f``, atomically: a kill never leaves half a record."""
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, f)


class Store:
    """A folder of finished runs, one JSON file each (``<key>.json``).

    ``reuse="same-code"`` (default) reuses a stored run only if it was computed by the kit's
    current sources (:func:`code_version`); ``reuse="any"`` reuses whatever is stored.
    ``read_only``: a sweep that needs a run the store lacks raises :class:`NotInStore` instead
    of computing it (``make book`` renders the committed store this way).
    """

    def __init__(self, path, reuse: str = "same-code", read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        if self.path.exists() and not self.path.is_dir():
            raise PflkitError(f"store {self.path} is a file; give a folder (it is created if missing)")
        if reuse not in ("same-code", "any"):
            raise PflkitError(f"reuse must be 'same-code' or 'any', got {reuse!r}")
        self.reuse = reuse

    def usable(self, record: dict) -> bool:
        return self.reuse == "any" or record["provenance"].get("code") == code_version()

    def file(self, key: str) -> Path:
        return self.path / f"{key}.json"

    def checkpoint(self, key: str) -> Path:
        return self.path / "checkpoints" / f"{key}.pt"

    def get(self, key: str) -> dict | None:
        f = self.file(key)
        if not f.exists():
            return None
        try:
            record = json.loads(f.read_text())
            record["final"], record["history"]  # noqa: B018
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
            raise PflkitError(
                f"store file {f} is corrupt (truncated or not a run record); delete it and run again to recompute it"
            ) from None
        if not record.get("diverged") and (why := exploded(record.get("round_loss", ()), bound_of(record))):
            record["diverged"] = why  # stored before the rule read more than NaN: a diverged run all the same
        return record

    def put(self, key: str, record: dict) -> None:
        _write_atomically(self.file(key), record)

    def keys(self) -> list[str]:
        return sorted(p.stem for p in self.path.glob("*.json")) if self.path.is_dir() else []

    def derived(self, name: str, spec: dict, compute: Callable[[], dict]) -> dict:
        """A result that is not one run (e.g. FeSEM's §5.2 scan of K over short runs), kept as
        ``derived/<name>-<hash of spec>.json``: ``compute()`` runs only when the store lacks it,
        and a read-only store raises :class:`NotInStore` instead; a stored result made by other kit
        sources is reused only where runs would be (``reuse``).  ``spec`` (JSON-able) holds everything
        that determines the result; the record keeps ``compute()``'s value and CPU time.  Such results
        are not runs: the replay check and :func:`cpu_hours` do not see them."""
        blob = json.dumps(spec, sort_keys=True)
        key = f"{name}-{hashlib.sha1(blob.encode()).hexdigest()[:16]}"
        f = self.path / "derived" / f"{key}.json"
        if f.exists():
            try:
                record = json.loads(f.read_text())
                record["value"], record["provenance"]  # noqa: B018
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
                raise PflkitError(f"store file {f} is corrupt; delete it and run again to recompute it") from None
            if self.usable(record):  # the store's reuse policy, as for runs
                return record["value"]
        if self.read_only:
            _log_usage(self, {}, {}, missing={key: None})
            raise NotInStore(
                f"not computed yet: {name} is not in the store {repo_relative(self.path)} "
                "(`make book FILL=1` computes it)"
            )
        cpu, wall = time.process_time(), time.perf_counter()
        value = compute()
        record = {"key": key, "spec": spec, "value": value, "cpu_s": time.process_time() - cpu,
                  "wall_s": time.perf_counter() - wall,
                  "provenance": {"code": code_version(), "git_commit": git_commit(), "cpu": cpu_model()}}  # fmt: skip
        _write_atomically(f, record)
        return value

    def __len__(self) -> int:
        return len(self.keys())


def _log_usage(store: Store, records: dict, todo: dict, missing: dict | None = None) -> None:
    """With ``PFLBOOK_USAGE_LOG`` set (the book's build sets it per chapter), append which runs
    came from the store (and the commits that made them), how many were computed and how many
    a read-only store lacked (``missing``)."""
    log = os.environ.get("PFLBOOK_USAGE_LOG")
    if not log:
        return
    made = {
        r["key"]: r["provenance"].get("git_commit", "unknown")[:7] for r in records.values() if r["key"] not in todo
    }
    entry = {
        "store": str(store.path),
        "reused": sorted(made),
        "commits": sorted(set(made.values())),
        "computed": sorted(todo),
        "missing": sorted(missing or {}),
    }
    with open(log, "a") as f:
        f.write(json.dumps(entry) + "\n")


def store_for(chapter: str, profile: str | None = None):
    """The result store of a chapter at a profile (a :class:`Store`).

    * ``$PFLBOOK_STORE_ROOT/<profile>/<chapter>`` when that variable is set (``make nbval``
      points its re-execution at an empty folder, so that it recomputes);
    * at ``book``, for the chapters in :data:`COMMITTED_CHAPTERS`: the committed ``results/<chapter>/``, whose runs are reused whatever kit
      sources made them (``make test``'s replay check re-runs a sample of them), unless
      ``PFLBOOK_FRESH=1``; read-only (nothing is computed) when :func:`store_only`;
    * otherwise ``_build/store/<profile>/<chapter>``, reused only by the same kit sources.
    """
    profile = profile or current()
    if root := os.environ.get("PFLBOOK_STORE_ROOT"):
        return Store(Path(root) / build_name(profile) / chapter)
    if profile == "book" and chapter in COMMITTED_CHAPTERS and not fresh():
        return Store(COMMITTED / chapter, reuse="any", read_only=store_only())
    return Store(ROOT / "_build" / "store" / build_name(profile) / chapter)
