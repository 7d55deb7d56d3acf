"""FedAvg + local fine-tuning: FedAvg training; each client is evaluated with the global model
after ``ft_epochs`` epochs of SGD on its own training data (the fine-tuned copy is discarded).

The same as ``fedavg`` with the engine's ``eval_finetune_epochs = ft_epochs``, which applies
this evaluation protocol to any method (both use :meth:`~pflkit.federated.Client.fine_tuned`)."""

from __future__ import annotations

from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class FedAvgFTClient(FedAvgClient):
    def eval_model(self, message):
        return self.fine_tuned(super().eval_model(message), self.opt["ft_epochs"])


register(
    Method(
        "fedavg-ft",
        FedAvgServer,
        FedAvgFTClient,
        "FedAvg, then local fine-tuning before evaluation",
        options={"ft_epochs": (1, "epochs of local fine-tuning before evaluation")},
    )
)
