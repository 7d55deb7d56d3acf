"""FedPer (Arivazhagan et al., 2019): base layers are federated with FedAvg, the
personalisation layers (here: the linear classifier ``head``) never leave the client."""

from __future__ import annotations

from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class FedPerServer(FedAvgServer):
    shared_prefix = "body."


class FedPerClient(FedAvgClient):
    shared_prefix = "body."


register(
    Method("fedper", FedPerServer, FedPerClient, "Shared body, personal classifier head", "Arivazhagan et al. 2019")
)
