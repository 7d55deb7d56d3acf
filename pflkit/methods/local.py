"""Local: every client trains alone on its own data; nothing is communicated."""

from __future__ import annotations

from ..federated import Client, Server
from . import Method, register


class LocalClient(Client):
    def train_round(self, message, rnd):
        return {}, self.sgd()  # E epochs on the client's own model; the reply is empty, the loss beside it


register(Method("local", Server, LocalClient, "No collaboration: each client trains its own model"))
