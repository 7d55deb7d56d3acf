"""Every kit method on Flower (issue 15): the same round loop, with the clients in Flower
ClientApps and the server in a ServerApp.

The in-process engine reaches its clients through four calls (:class:`pflkit.engine.LocalClients`:
setup, request, train, evaluate).  :class:`FlowerClients` makes the same four calls through a
Flower ``Grid``: each becomes one Flower message per client, of type

    query.whoami   which client (partition) a node holds          (once, to route the others)
    query.setup    the client's setup message, if it has one      (once, before round 1)
    train.request  the first step of a two-step round             (FedMN, KT-pFL)
    train          the round's training
    evaluate       the counts the server's metrics are made of
    query.save     at a checkpoint: the node saves its client on its own disk
    query.load     on resuming: the node loads it back

On the node, :data:`client_app` builds the client a message is for (:func:`pflkit.engine.build`, so
it starts from the same initialisation as in-process), loads what the node's last message left in
its Flower context (:meth:`~pflkit.federated.Client.node_state`), and answers with
:class:`~pflkit.engine.LocalClients`, the in-process code itself: a deployed SuperNode answers every
message in a new process.  A kit message (a dict of tensors) travels as one ``torch.save`` blob in
a ``ConfigRecord``; the ledger counts the tensors' bytes, as in-process, not Flower's framing.  The
server side is the kit's server object, unchanged: it sees only what the messages carry.

Simulation (one machine, Ray): :func:`run_flower`, one Ray actor (a cluster of one CPU slot) serving
every node in turn, with the server's torch thread count.  Deployment (a SuperLink and SuperNodes):
:func:`run_deployed`; :func:`local_federation` starts one on this machine's loopback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import os
import re
import signal
import socket
import time
from pathlib import Path

import numpy as np
import torch

from .engine import Federation, LocalClients, RunConfig, build, run
from .errors import PflkitError
from .federation import config_of

try:
    from flwr.app import ConfigRecord, Context, Message, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
except ImportError:  # pragma: no cover - the extra is not installed
    ClientApp = ServerApp = None

KEY = "pflkit"  # the one record of every message


# ----------------------------------------------------------------------------- on the wire


def pack(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def unpack(blob: bytes):
    return torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)


def content(cfg_json: str, cid: int, payload=None) -> RecordDict:
    """A kit message.  It carries the sender's torch thread count: float sums depend on it, so a
    node computes with the server's (Ray's own default for an actor is not guaranteed to match)."""
    record = {"config": cfg_json, "cid": int(cid), "threads": torch.get_num_threads(), "payload": pack(payload)}
    return RecordDict({KEY: ConfigRecord(record)})


def read(message: Message) -> tuple[str, int, object]:
    rec = message.content[KEY]
    return rec["config"], int(rec["cid"]), unpack(rec["payload"])


def config_from_json(cfg_json: str) -> RunConfig:
    d = json.loads(cfg_json)
    return dataclasses.replace(config_of({"config": d}), checkpoint=d.get("checkpoint"))  # config_of drops it


def _plain(counts: dict) -> dict:
    """``evaluate``'s counts with tensors for arrays (what ``weights_only`` loading accepts)."""
    return {k: torch.as_tensor(v) if isinstance(v, np.ndarray) else v for k, v in counts.items()}


def _numpy(counts: dict) -> dict:
    return {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in counts.items()}


# ----------------------------------------------------------------------------- the node


_FED: dict[str, object] = {}  # the run's data as this process loaded it (one run at a time)
STATE = "pflkit.client"  # the node's record in its Flower context: its client's state


def node_client(message: Message, context: Context) -> tuple[LocalClients, int, object]:
    """The client a message is for, as its node last left it.

    A deployed SuperNode answers every message in a new ClientApp process, so a node keeps its
    client only in its Flower ``context.state`` (:meth:`~pflkit.federated.Client.node_state`):
    the client is built afresh (the same initialisation as in-process) and that state loaded.  The
    simulation does the same, so it checks what a deployment relies on.  The data are loaded once
    per process."""
    cfg_json, cid, payload = read(message)
    threads = int(message.content[KEY]["threads"])
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    mine = context.node_config.get("partition-id")
    if mine is not None and int(mine) != cid:
        raise PflkitError(f"node holding client {mine} was sent client {cid}'s message")
    if cfg_json not in _FED:
        _FED.clear()
        _FED[cfg_json] = Federation.from_config(config_from_json(cfg_json))
    _, _, _, clients = build(config_from_json(cfg_json), _FED[cfg_json])
    kept = context.state.get(STATE)
    if kept is not None and kept["config"] == cfg_json:  # a node's context outlives one kit run
        clients[cid].load_node_state(unpack(kept["state"]))
    return LocalClients(clients), cid, payload


def node_file(context: Context, checkpoint: str, cid: int, rnd: int) -> Path:
    """Where a node keeps its client's state at a checkpoint: its ``state-dir`` (``--node-config
    'partition-id=CID state-dir="DIR"'``), else beside the server's checkpoint (one machine)."""
    folder = context.node_config.get("state-dir") or f"{checkpoint}.nodes"
    return Path(str(folder)) / f"{Path(checkpoint).name}-client{cid}-round{rnd}.pt"


def _round_of(f: Path) -> int:
    return int(f.stem.rsplit("-round", 1)[1])


def keep(message: Message, pool: LocalClients, cid: int, context: Context) -> None:
    """Store the node's client in its context, for its next message."""
    cfg_json = message.content[KEY]["config"]
    context.state[STATE] = ConfigRecord({"config": cfg_json, "state": pack(pool.clients[cid].node_state())})


if ClientApp is not None:
    client_app = ClientApp()

    def _reply(message: Message, cid: int, payload) -> Message:
        cfg_json = message.content[KEY]["config"]
        return Message(content(cfg_json, cid, payload), reply_to=message)

    @client_app.query("whoami")
    def _whoami(message: Message, context: Context) -> Message:
        return _reply(message, int(context.node_config["partition-id"]), None)

    @client_app.query("setup")
    def _setup(message: Message, context: Context) -> Message:
        pool, cid, _ = node_client(message, context)
        reply = pool.clients[cid].setup_message()
        keep(message, pool, cid, context)
        return _reply(message, cid, reply)

    @client_app.train("request")
    def _request(message: Message, context: Context) -> Message:
        pool, cid, (msg, seeds, rnd) = node_client(message, context)
        reply = pool.request({cid: (msg, seeds)}, rnd)[cid]
        keep(message, pool, cid, context)
        return _reply(message, cid, reply)

    @client_app.train()
    def _train(message: Message, context: Context) -> Message:
        pool, cid, (msg, seeds, rnd) = node_client(message, context)
        reply = pool.train({cid: (msg, seeds)}, rnd)[cid]
        keep(message, pool, cid, context)
        return _reply(message, cid, reply)

    @client_app.query("save")
    def _save(message: Message, context: Context) -> Message:
        """A checkpoint: the node writes its client's state to its own disk (the server never sees it)."""
        pool, cid, (path, rnd) = node_client(message, context)
        f = node_file(context, path, cid, rnd)
        f.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {"config": message.content[KEY]["config"], "state": pool.clients[cid].node_state()}, f.with_suffix(".tmp")
        )
        os.replace(f.with_suffix(".tmp"), f)
        for old in sorted(f.parent.glob(f"{f.name.rsplit('-round', 1)[0]}-round*.pt"), key=_round_of)[:-2]:
            old.unlink()  # the last two: the server's checkpoint is written after every node saved
        return _reply(message, cid, None)

    @client_app.query("load")
    def _load(message: Message, context: Context) -> Message:
        """Resuming: the client's state as the node saved it at the checkpoint's round."""
        pool, cid, (path, rnd) = node_client(message, context)
        f = node_file(context, path, cid, rnd)
        saved = torch.load(f, weights_only=True) if f.exists() else None
        if saved is None or saved["config"] != message.content[KEY]["config"]:
            raise PflkitError(f"the node of client {cid} has no state of this run at round {rnd} ({f})")
        pool.clients[cid].load_node_state(saved["state"])
        keep(message, pool, cid, context)
        return _reply(message, cid, None)

    @client_app.evaluate()
    def _evaluate(message: Message, context: Context) -> Message:
        pool, cid, call = node_client(message, context)
        counts = pool.evaluate({cid: call})[cid]
        keep(message, pool, cid, context)  # evaluating may change a client (e.g. load the server's model)
        return _reply(message, cid, {split: _plain(c) for split, c in counts.items()})


# ----------------------------------------------------------------------------- the server


NODE_WAIT_S = 15.0  # seconds a ServerApp waits for its nodes to register (PFLKIT_FLOWER_NODE_WAIT overrides)
PULL_S = 0.2  # seconds between a ServerApp's pulls of its replies (Flower's send_and_receive waits 3 on a deployment)


def exchange(grid, messages: list) -> list:
    """``grid.send_and_receive(messages)`` (no timeout: every reply, or wait), pulling the replies every
    :data:`PULL_S` seconds: a round of messages a deployed node answers in a second then takes a second,
    not a multiple of Flower's 3-second wait."""
    waiting = set(grid.push_messages(messages))
    replies = []
    while waiting:
        pulled = list(grid.pull_messages(waiting))
        replies += pulled
        waiting -= {reply.metadata.reply_to_message_id for reply in pulled}
        if waiting:
            time.sleep(PULL_S)
    return replies


class FlowerClients:
    """The transport the round loop uses on a ServerApp: the four calls of
    :class:`~pflkit.engine.LocalClients`, each sent as Flower messages to the nodes that hold the
    clients."""

    def __init__(self, grid: Grid, cfg: RunConfig, n_clients: int):
        self.grid, self.cfg_json, self.n = grid, json.dumps(cfg.to_dict(), sort_keys=True), n_clients
        nodes = list(grid.get_node_ids())
        deadline = time.monotonic() + float(os.environ.get("PFLKIT_FLOWER_NODE_WAIT", NODE_WAIT_S))
        while len(nodes) < n_clients and time.monotonic() < deadline:  # nodes may still be registering
            time.sleep(0.5)
            nodes = list(grid.get_node_ids())
        if len(nodes) < n_clients:
            raise PflkitError(f"{n_clients} clients need as many Flower nodes; {len(nodes)} are connected")
        whoami = self._send("query.whoami", {nid: None for nid in nodes}, route=False)
        self.node_of = {cid: nid for nid, (cid, _) in whoami.items()}
        missing = sorted(set(range(n_clients)) - set(self.node_of))
        if missing:
            raise PflkitError(f"no Flower node holds client(s) {missing}")

    def __len__(self) -> int:
        return self.n

    def _send(self, kind: str, calls: dict, route: bool = True) -> dict:
        """One message per entry of ``calls`` ({cid: payload}, or {node: payload} when not
        ``route``); the replies as {cid: payload} (or {node: (cid, payload)})."""
        messages = [
            Message(content(self.cfg_json, key if route else -1, payload),
                    dst_node_id=self.node_of[key] if route else key, message_type=kind)
            for key, payload in calls.items()
        ]  # fmt: skip
        out = {}
        for reply in exchange(self.grid, messages):
            if reply.has_error():
                raise PflkitError(f"a Flower node failed on {kind}: {reply.error.reason}")
            _, cid, payload = read(reply)
            out[reply.metadata.src_node_id if not route else cid] = (cid, payload) if not route else payload
        if len(out) != len(messages):
            raise PflkitError(f"{len(messages) - len(out)} Flower node(s) did not answer {kind}")
        return out

    def setup(self) -> dict:
        replies = self._send("query.setup", {cid: None for cid in range(self.n)})
        return {cid: m for cid, m in sorted(replies.items()) if m is not None}

    def request(self, calls: dict, rnd: int) -> dict:
        return self._send("train.request", {cid: (m, seeds, rnd) for cid, (m, seeds) in calls.items()})

    def train(self, calls: dict, rnd: int) -> dict:
        replies = self._send("train", {cid: (m, seeds, rnd) for cid, (m, seeds) in calls.items()})
        return {cid: replies[cid] for cid in calls}  # the order the server asked in

    def save(self, path, rnd: int) -> None:
        """A checkpoint: every node saves its client on its own disk; the server's file holds none."""
        self._send("query.save", {cid: (str(path), rnd) for cid in range(self.n)})

    def load(self, states, path, rnd: int) -> None:
        self._send("query.load", {cid: (str(path), rnd) for cid in range(self.n)})

    def evaluate(self, calls: dict) -> dict:
        replies = self._send("evaluate", calls)
        return {cid: {split: _numpy(c) for split, c in replies[cid].items()} for cid in calls}


# ----------------------------------------------------------------------------- a deployment

APP_DIR = Path(__file__).resolve().parent / "flower_app"  # the Flower App `flwr run` ships (its pyproject.toml)

if ServerApp is not None:
    server_app = ServerApp()  # a deployment's ServerApp: the run its run config names (run_deployed)

    @server_app.main()
    def _deployed(grid: Grid, context: Context) -> None:
        rc = context.run_config
        cfg = config_from_json(bytes.fromhex(str(rc["config"])).decode())
        torch.set_num_threads(int(rc["threads"]))  # the nodes compute with it too (see content)
        result = run(cfg, transport=lambda clients: FlowerClients(grid, cfg, len(clients)))
        out = Path(str(rc["out"]))
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, out)  # whole or absent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def local_federation(n_clients: int, log_dir: str | Path):
    """A Flower federation on this machine's loopback: one SuperLink and ``n_clients``
    SuperNodes (node i holds client i), each its own process, listening on 127.0.0.1 only, all
    ended when the block ends (also on error).  Yields the SuperLink's address for
    :func:`run_deployed`; the processes' logs go to ``log_dir``."""
    import subprocess
    import sys
    import time

    bin_dir = Path(sys.executable).parent  # the SuperLink and SuperNodes start Flower's tools from PATH
    env = os.environ | {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "FLWR_HOME": str(log_dir)}
    link = f"127.0.0.1:{_free_port()}"
    commands = [["flower-superlink", "--insecure", "--host", "127.0.0.1", "--port", link.rsplit(":", 1)[1],
                 "--disable-runtime-dependency-installation"]]  # fmt: skip
    commands += [
        ["flower-supernode", "--insecure", "--superlink", link, "--host", "127.0.0.1", "--port", str(_free_port()),
         "--node-config", f"partition-id={cid}"]
        for cid in range(n_clients)
    ]  # fmt: skip
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    procs = []
    try:
        for i, cmd in enumerate(commands):
            log = open(Path(log_dir) / f"{'superlink' if i == 0 else f'supernode-{i - 1}'}.log", "w")  # noqa: SIM115
            procs.append(subprocess.Popen([str(bin_dir / cmd[0]), *cmd[1:]], env=env, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip
            log.close()
            if i == 0:
                _wait_for(link, procs[0], 60)
        time.sleep(2)  # the nodes register with the SuperLink
        yield link
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)  # the process group: a node's ClientApp processes too
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def _wait_for(address: str, proc, seconds: float) -> None:
    import time

    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PflkitError(f"the Flower SuperLink exited at start (exit {proc.returncode}); see its log")
        with socket.socket() as sock:
            if sock.connect_ex((host, int(port))) == 0:
                return
        time.sleep(0.2)
    raise PflkitError(f"the Flower SuperLink did not listen on {address} within {seconds:.0f} s")


def run_deployed(cfg: RunConfig, superlink: str, out: str, threads: int | None = None, timeout: float | None = None):
    """Submit ``cfg`` to a running Flower federation and wait for it to finish.

    ``superlink``: the SuperLink's address (HOST:PORT, insecure: put TLS in front of a real
    one).  Its SuperNodes must hold one client each (``--node-config "partition-id=CID"``, CID =
    0 … clients − 1).  ``out``: where the ServerApp writes the result record: a path on the
    SuperLink's machine.  Returns the record when that path is readable here (the same machine),
    else ``None``.  ``threads``: the torch threads of the ServerApp and of every node (default:
    this process's)."""
    import subprocess
    import sys
    import tempfile

    threads = threads or torch.get_num_threads()
    flwr = Path(sys.executable).with_name("flwr")
    with tempfile.TemporaryDirectory() as home:  # a Flower home of this submission only
        (Path(home) / "config.toml").write_text(
            f'[superlink]\ndefault = "pflkit"\n\n[superlink.pflkit]\naddress = "{superlink}"\ninsecure = true\n'
        )
        run_config = (
            f'config="{json.dumps(cfg.to_dict(), sort_keys=True).encode().hex()}" out="{out}" threads={threads}'
        )
        cmd = [str(flwr), "run", str(APP_DIR), "pflkit", "--run-config", run_config, "--stream"]
        env = os.environ | {"FLWR_HOME": home}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or "Successfully started run" not in done.stdout:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise PflkitError(f"flwr run failed (exit {done.returncode}): {' / '.join(tail)}")
    if "ServerApp raised an exception" in done.stdout:  # flwr run exits 0 then; the stream says why
        errors = [ln for ln in done.stdout.splitlines() if re.match(r"[\w.]+(Error|Exception): ", ln)]
        raise PflkitError(f"the Flower run failed: {errors[-1] if errors else 'see the SuperLink log'}")
    path = Path(out)
    if not path.exists():
        return None
    return json.loads(path.read_text())


def run_flower(cfg: RunConfig | list[RunConfig], backend_config: dict | None = None, **run_kwargs):
    """``cfg`` on Flower's simulation runtime: one ServerApp running the kit's round loop, one
    virtual node per client.  Returns the same result record as :func:`pflkit.engine.run`; given a
    list of configs, runs them one after another in one simulation (one Ray start) and returns
    the list of records."""
    if ServerApp is None:
        raise PflkitError('Flower is not installed: pip install -e ".[flower]"')
    cfgs = cfg if isinstance(cfg, list) else [cfg]
    from flwr.simulation import run_simulation

    results: list[dict] = []
    server_app = ServerApp()

    @server_app.main()
    def _main(grid: Grid, context: Context) -> None:
        for c in cfgs:
            results.append(run(c, transport=lambda clients, c=c: FlowerClients(grid, c, len(clients)), **run_kwargs))

    # one Ray actor serves every node in turn (a Ray cluster of one CPU slot); it computes with
    # this process's torch threads, which every message carries (see content)
    backend = backend_config or {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 1}}
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # no GPU to hide: silences Ray's notice
    flwr_log = logging.getLogger("flwr")
    level, flwr_log.level = flwr_log.level, logging.ERROR  # run_simulation's own deprecation notice
    try:
        run_simulation(server_app, client_app, num_supernodes=max(c.clients for c in cfgs), backend_config=backend)
    finally:
        flwr_log.setLevel(level)
    if len(results) != len(cfgs):
        raise PflkitError("the Flower run ended without a result (see Flower's log above)")
    return results if isinstance(cfg, list) else results[0]
