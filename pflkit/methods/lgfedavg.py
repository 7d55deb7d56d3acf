"""LG-FedAvg (Liang et al., 2020): local representations, global classifier.  Each client
keeps its feature extractor ``body``; only the classifier ``head`` is averaged by the server."""

from __future__ import annotations

from . import Method, register
from .fedavg import FedAvgClient, FedAvgServer


class LGServer(FedAvgServer):
    shared_prefix = "head."


class LGClient(FedAvgClient):
    shared_prefix = "head."


register(
    Method("lg-fedavg", LGServer, LGClient, "Local feature extractor, global classifier head", "Liang et al. 2020")
)
