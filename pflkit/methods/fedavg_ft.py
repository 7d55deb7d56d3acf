"""FedAvg + local fine-tuning: FedAvg training; each client is evaluated with the global model
after ``ft_epochs`` epochs of SGD on its own training data (the fine-tuned copy is discarded)."""

from __future__ import annotations

from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class FedAvgFTClient(FedAvgClient):
    def eval_model(self, message):
        tuned = self.scratch_model()
        tuned.load_state_dict(message["weights"])
        self.sgd(tuned, epochs=self.opt["ft_epochs"])
        return tuned


register(
    Method(
        "fedavg-ft",
        FedAvgServer,
        FedAvgFTClient,
        "FedAvg, then local fine-tuning before evaluation",
        options={"ft_epochs": (1, "epochs of local fine-tuning before evaluation")},
    )
)
