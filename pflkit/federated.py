"""Clients, servers and the messages between them.

A method is a :class:`Server` subclass and a :class:`Client` subclass.  The engine
(:mod:`pflkit.engine`) runs the rounds; in every round it asks the server for the message
to each sampled client, hands it to the client, and gives the clients' replies back to the
server.  The server never touches a client object or its data: all it learns is in the
messages, whose bytes the engine counts (:func:`nbytes`).

Messages are plain ``dict``s of tensors (or of dicts of tensors).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .errors import TrainingDiverged

Message = dict


def derive_seed(*parts: int) -> int:
    """A 63-bit seed from integers (seed, round, client, ...)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(2, np.uint64)[0] >> 1)


# ----------------------------------------------------------------------------- messages


def nbytes(msg) -> int:
    """Bytes a message takes on the wire (tensor payloads; keys and framing ignored)."""
    if isinstance(msg, torch.Tensor):
        return msg.numel() * msg.element_size()
    if isinstance(msg, Mapping):
        return sum(nbytes(v) for v in msg.values())
    if isinstance(msg, (list, tuple)):
        return sum(nbytes(v) for v in msg)
    return 0


def snapshot(model: nn.Module, prefix: str = "") -> dict[str, torch.Tensor]:
    """A detached copy of the model's state (only keys starting with ``prefix``)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items() if k.startswith(prefix)}


def weighted_average(states: list[dict[str, torch.Tensor]], weights) -> dict[str, torch.Tensor]:
    """Σ_i w_i · state_i / Σ_i w_i, key by key (integer buffers are averaged then rounded)."""
    w = torch.as_tensor([float(x) for x in weights], dtype=torch.float64)
    w = w / w.sum()
    out = {}
    for k, ref in states[0].items():
        acc = sum(wi.item() * s[k].double() for wi, s in zip(w, states))
        out[k] = acc.round().to(ref.dtype) if not ref.is_floating_point() else acc.to(ref.dtype)
    return out


def flatten(state: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """All floating-point tensors of a state dict as one vector."""
    return torch.cat([v.reshape(-1).float() for v in state.values() if v.is_floating_point()])


def proximal_term(reference: list[torch.Tensor], weight: float):
    """``penalty(model) = weight/2 · ‖params(model) − reference‖²`` (FedProx, Ditto, pFedMe)."""
    reference = [r.detach() for r in reference]

    def penalty(model: nn.Module) -> torch.Tensor:
        return weight / 2 * sum(((p - r) ** 2).sum() for p, r in zip(model.parameters(), reference))

    return penalty


# ----------------------------------------------------------------------------- client data


class ClientData:
    """A client's train / val / test samples, as index tensors into device-resident data."""

    def __init__(self, fed, split):
        dev = fed.device
        self.x_train, self.y_train = fed.x_train, fed.y_train
        self.x_test, self.y_test = fed.x_test, fed.y_test
        self.train_idx = torch.as_tensor(split.train, dtype=torch.long, device=dev)
        self.val_idx = torch.as_tensor(split.val, dtype=torch.long, device=dev)
        self.test_idx = torch.as_tensor(split.test, dtype=torch.long, device=dev)
        self.x_public = fed.x_public  # the public unlabeled images (RunConfig.public_images; may be empty)

    @property
    def n_train(self) -> int:
        return len(self.train_idx)

    def batches(
        self, batch_size: int, generator: torch.Generator, epochs: int = 1, steps: int | None = None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Shuffled minibatches of the training split: ``steps`` batches if given, else ``epochs``
        passes.  The last batch of an epoch may be smaller."""
        n = self.n_train
        total = steps if steps is not None else epochs * ((n + batch_size - 1) // batch_size)
        done = 0
        while done < total and n > 0:
            perm = self.train_idx[torch.randperm(n, generator=generator).to(self.train_idx.device)]
            for s in range(0, n, batch_size):
                idx = perm[s : s + batch_size]
                yield self.x_train[idx], self.y_train[idx]
                done += 1
                if done >= total:
                    return

    def split(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """All samples of ``train``, ``val`` or ``test``."""
        idx = getattr(self, f"{name}_idx")
        if name == "test":
            return self.x_test[idx], self.y_test[idx]
        return self.x_train[idx], self.y_train[idx]


# ----------------------------------------------------------------------------- evaluation


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """Logits of ``model`` on ``x`` (in eval mode, chunked)."""
    was_training = model.training
    model.eval()
    out = torch.cat([model(x[s : s + chunk]) for s in range(0, len(x), chunk)]) if len(x) else None
    model.train(was_training)
    return out


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict:
    """Correct count, sample count, mean loss and predicted labels of ``model`` on (x, y)."""
    if len(y) == 0:
        return {"correct": 0, "n": 0, "loss": float("nan"), "pred": np.zeros(0, int), "true": np.zeros(0, int)}
    logits = predict(model, x)
    pred = logits.argmax(1)
    return {
        "correct": int((pred == y).sum()),
        "n": len(y),
        "loss": float(F.cross_entropy(logits, y)),
        "pred": pred.cpu().numpy(),
        "true": y.cpu().numpy(),
    }


# ----------------------------------------------------------------------------- client & server


class Client:
    """One client: its data, its models, and what it does with a server message.

    Subclasses implement :meth:`train_round` (receive, train, reply) and, when the model
    they are judged by is not ``self.model``, :meth:`eval_model`.  The modules a client must
    remember between rounds are named in ``persistent`` (saved in checkpoints).
    """

    def __init__(self, cid: int, data: ClientData, model: nn.Module, cfg, opts: dict):
        self.cid = cid
        self.data = data
        self.model = model  # the client's own (working or personal) model
        self.cfg = cfg
        self.opt = opts
        self.generator = torch.Generator()  # reseeded by the engine every round

    # protocol ---------------------------------------------------------------------------
    def setup_message(self) -> Message | None:
        """What this client sends once, before the first round (e.g. a label histogram or an
        initial local model); ``None``: nothing.  The engine counts its bytes up."""
        return None

    def request(self, message: Message, rnd: int) -> Message:
        """A two-step round (when the server has a :meth:`Server.pre_message`): what this client
        asks for, given that first message (FedMN: the blocks its routing decision activates)."""
        raise NotImplementedError

    def train_round(self, message: Message, rnd: int) -> tuple[Message, float]:
        """One round's local work on the server's ``message``: the reply the protocol transmits (its
        bytes counted up) and, beside it, the round's training loss, which only the simulation reads
        (the loss trace and the divergence check); it never travels to the server."""
        raise NotImplementedError

    def eval_model(self, message: Message) -> nn.Module:
        """The model this client is evaluated with, given the server's evaluation message."""
        return self.model

    # checkpoints ------------------------------------------------------------------------
    persistent: tuple[str, ...] = ("model",)  # the modules a client keeps between rounds

    def state_dict(self) -> dict:
        return {name: getattr(self, name).state_dict() for name in self.persistent}

    def load_state_dict(self, state: dict) -> None:
        for name in self.persistent:
            getattr(self, name).load_state_dict(state[name])

    # a node of a deployed federation (pflkit.flower) may answer every message in a new process
    round_state: tuple[str, ...] = ()  # attributes a two-step round keeps from the request to the training

    def node_state(self) -> dict:
        """All this client carries from one message to the next: its checkpoint state, its
        generator (the training of a two-step round draws on from the request) and ``round_state``."""
        state = {"persistent": self.state_dict(), "generator": self.generator.get_state()}
        return state | {name: getattr(self, name) for name in self.round_state if hasattr(self, name)}

    def load_node_state(self, state: dict) -> None:
        self.load_state_dict(state["persistent"])
        self.generator.set_state(state["generator"])
        for name in self.round_state:
            if name in state:
                setattr(self, name, state[name])

    # shared mechanics -------------------------------------------------------------------
    def scratch_model(self) -> nn.Module:
        """A spare copy of the client's architecture, made once and reused (e.g. for the
        fine-tuned or adapted model a client is evaluated with); load weights into it."""
        if getattr(self, "_scratch", None) is None:
            self._scratch = clone_model(self.model)
        return self._scratch

    def fine_tuned(self, model: nn.Module, epochs: int) -> nn.Module:
        """A copy of ``model`` after ``epochs`` epochs of local SGD on this client's training split
        (evaluation after local fine-tuning); ``model`` itself is left untouched.  The copy is made
        once and reused while the architecture stays the same."""
        tuned = getattr(self, "_tuned", None)
        if tuned is None or _shapes(tuned) != _shapes(model):
            tuned = self._tuned = clone_model(model)
        tuned.load_state_dict(model.state_dict())
        self.sgd(tuned, epochs=epochs)
        return tuned

    def n_samples(self) -> torch.Tensor:
        """The training-set size, as sent to servers that weight by it."""
        return torch.tensor(self.data.n_train)

    def batches(self, epochs: int | None = None, steps: int | None = None):
        """Minibatches for one local update: ``local_steps`` if configured, else ``local_epochs``."""
        if epochs is None and steps is None:
            epochs, steps = self.cfg.local_epochs, self.cfg.local_steps
        return self.data.batches(self.cfg.batch_size, self.generator, epochs if epochs is not None else 1, steps)

    def optimizer(self, params, lr: float | None = None, momentum: float | None = None) -> torch.optim.Optimizer:
        cfg = self.cfg
        lr = cfg.lr if lr is None else lr
        momentum = cfg.momentum if momentum is None else momentum
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=cfg.weight_decay)

    def sgd(
        self, model: nn.Module | None = None, *, params=None, penalty=None, lr=None, epochs=None, steps=None,
        momentum=None,
    ):  # fmt: skip
        """Local SGD on the cross-entropy (+ ``penalty(model)``); returns the mean batch loss.

        ``params`` restricts which parameters move (default: all of ``model``); ``lr`` and
        ``momentum`` default to the run's.
        """
        model = self.model if model is None else model
        model.train()
        opt = self.optimizer(model.parameters() if params is None else params, lr, momentum)
        total, n = torch.zeros((), device=self.data.train_idx.device), 0
        for x, y in self.batches(epochs, steps):
            loss = F.cross_entropy(model(x), y)
            if penalty is not None:
                loss = loss + penalty(model)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if self.cfg.grad_clip:
                nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], self.cfg.grad_clip)
            opt.step()
            total += loss.detach()
            n += 1
        return self.check_finite(total / max(n, 1))

    def check_finite(self, loss: torch.Tensor) -> float:
        value = float(loss)
        if not np.isfinite(value):
            raise TrainingDiverged(
                f"loss became {value} on client {self.cid} (method {self.cfg.method}, lr {self.cfg.lr}); "
                "lower the learning rate"
            )
        return value


class Server:
    """The server side of a method: it sees only the messages clients send."""

    def __init__(self, model: nn.Module, cfg, opts: dict, n_clients: int):
        self.model = model  # the server's copy of the architecture (initial weights)
        self.cfg = cfg
        self.opt = opts
        self.n_clients = n_clients

    # the public unlabeled set every party may use (RunConfig.public_images), set by the engine
    n_public = 0
    x_public = None

    def setup(self, uploads: dict[int, Message]) -> None:
        """Receive the clients' :meth:`Client.setup_message` replies (all clients, once)."""

    def pre_message(self, cid: int, rnd: int) -> Message | None:
        """A first message of a two-step round (``None``: a one-step round, the default).  The
        client answers it with :meth:`Client.request`.  Every client of the round answers before
        :meth:`message_for` is asked for any of them, so the second message may depend on all the
        requests (KT-pFL's personalised soft predictions); the engine counts the bytes of both."""
        return None

    def receive_request(self, cid: int, request: Message, rnd: int) -> None:
        """The reply of client ``cid`` to :meth:`pre_message`."""

    def message_for(self, cid: int, rnd: int) -> Message:
        """What the server sends to client ``cid`` at the start of round ``rnd``."""
        return {}

    def eval_message(self, cid: int) -> Message:
        """What a client needs from the server to build the model it is evaluated with."""
        return self.message_for(cid, -1)

    def aggregate(self, uploads: dict[int, Message], rnd: int) -> None:
        """Update the server state from the replies of this round's clients."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def clone_model(model: nn.Module) -> nn.Module:
    return copy.deepcopy(model)


def reinitialised(model: nn.Module, seed: int) -> nn.Module:
    """A copy of ``model`` with every layer re-drawn by its PyTorch default initialisation
    (``reset_parameters``) from ``seed``; the global random state is left alone.  For methods
    that need several independently initialised models (IFCA's clusters, pFedMB's branches)."""
    fresh = clone_model(model)
    device = next(fresh.parameters()).device
    fresh.cpu()  # draw on the CPU generator, so the result does not depend on the device
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for module in fresh.modules():
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()
    return fresh.to(device)


def distinct_states(model: nn.Module, k: int, seed: int) -> list[dict[str, torch.Tensor]]:
    """k initial states of one architecture: the model's own, then k − 1 re-drawn from (seed, j)
    (:func:`reinitialised`), for methods with several models that must start apart (IFCA's
    clusters, FedEM's components): equal models would get equal updates and never separate."""
    return [snapshot(model)] + [snapshot(reinitialised(model, derive_seed(seed, j))) for j in range(1, k)]


def _shapes(model: nn.Module) -> dict:
    return {k: v.shape for k, v in model.state_dict().items()}
