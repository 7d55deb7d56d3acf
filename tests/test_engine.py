import numpy as np
import pytest
import torch

from pflkit.engine import build, run, summarize
from pflkit.errors import PflkitError, TrainingDiverged
from pflkit.federated import nbytes, weighted_average
from tests.conftest import killed_and_resumed, strip, tiny_config


def test_same_seed_same_numbers(tiny_fed):
    cfg = tiny_config(method="fedavg")
    a, b = run(cfg, tiny_fed(cfg)), run(cfg, tiny_fed(cfg))
    assert strip(a) == strip(b)
    c = run(tiny_config(method="fedavg", seed=1), tiny_fed(tiny_config(seed=1)))
    assert strip(a) != strip(c)


@pytest.mark.parametrize("method", ["fedavg", "ditto", "pfedme"])
def test_resume_after_kill_equals_uninterrupted(tiny_fed, tmp_path, method):
    cfg = tiny_config(method=method, rounds=4, sample_rate=0.5)
    full = run(cfg, tiny_fed(cfg))

    # killed after round 2's evaluation: round 1's checkpoint is on disk, round 2's is not
    resumed = killed_and_resumed(cfg, tiny_fed, tmp_path / "ck.pt")
    assert strip(resumed) == strip(full)
    assert resumed["comm"] == full["comm"]


def test_checkpoint_of_other_config_refused(tiny_fed, tmp_path):
    ckpt = str(tmp_path / "ck.pt")
    cfg = tiny_config(rounds=2, checkpoint=ckpt)
    run(cfg, tiny_fed(cfg))  # checkpointed after round 1 (the last round is not checkpointed)
    other = tiny_config(rounds=2, checkpoint=ckpt, lr=0.1)
    with pytest.raises(PflkitError, match="different configuration"):
        run(other, tiny_fed(other))


def test_ledger_counts_model_bytes(tiny_fed):
    cfg = tiny_config(method="fedavg", rounds=2)
    res = run(cfg, tiny_fed(cfg))
    _, _, server, _ = build(cfg, tiny_fed(cfg))
    model_bytes = sum(p.numel() * 4 for p in server.model.parameters())
    assert res["comm"]["bytes_down"] == 2 * 4 * model_bytes
    assert res["comm"]["bytes_up"] == 2 * 4 * (model_bytes + 8)  # weights + the sample count (int64)


def test_local_sends_nothing(tiny_fed):
    cfg = tiny_config(method="local")
    res = run(cfg, tiny_fed(cfg))
    assert res["comm"]["bytes_up"] == res["comm"]["bytes_down"] == 0


def test_client_sampling_rate(tiny_fed):
    seen = []
    cfg = tiny_config(method="fedavg", clients=8, rounds=3, sample_rate=0.25, classes_per_client=2)
    fed = tiny_fed(cfg)
    _, _, server, _ = build(cfg, fed)
    orig = type(server).aggregate

    def spy(self, uploads, rnd):
        seen.append(sorted(uploads))
        return orig(self, uploads, rnd)

    type(server).aggregate = spy
    try:
        run(cfg, fed)
    finally:
        type(server).aggregate = orig
    assert [len(s) for s in seen] == [2, 2, 2]
    assert all(isinstance(c, int) for s in seen for c in s)


def test_nan_loss_is_one_clear_error(tiny_fed):
    cfg = tiny_config(method="fedavg", lr=1e12, rounds=2)
    with pytest.raises(TrainingDiverged, match="lower the learning rate"):
        run(cfg, tiny_fed(cfg))


def test_metrics_hand_computed():
    # client A: 3 of 4 correct; client B: 1 of 1 correct
    a = {"correct": 3, "n": 4, "loss": 1.0, "true": np.array([0, 0, 1, 1]), "pred": np.array([0, 0, 1, 0])}
    b = {"correct": 1, "n": 1, "loss": 0.0, "true": np.array([2]), "pred": np.array([2])}
    s = summarize([a, b])
    assert s["mean_acc"] == pytest.approx((0.75 + 1.0) / 2)  # macro: plain mean over clients
    assert s["pooled_acc"] == pytest.approx(4 / 5)  # micro: Σ correct / Σ samples
    f1_a = (0.8 + 2 / 3) / 2  # class 0: P=2/3, R=1 -> F1 .8; class 1: P=1, R=.5 -> F1 2/3
    assert s["macro_f1"] == pytest.approx((f1_a + 1.0) / 2)
    assert s["micro_f1"] == pytest.approx((4 * f1_a + 1.0) / 5)
    assert s["loss"] == pytest.approx(4 / 5)


def test_weighted_average_and_nbytes():
    s1 = {"w": torch.ones(3), "b": torch.zeros(2, dtype=torch.int64)}
    s2 = {"w": torch.zeros(3), "b": torch.full((2,), 4, dtype=torch.int64)}
    avg = weighted_average([s1, s2], [3, 1])
    assert torch.allclose(avg["w"], torch.full((3,), 0.75))
    assert avg["b"].dtype == torch.int64 and avg["b"].tolist() == [1, 1]
    assert nbytes({"a": s1, "n": torch.tensor(5)}) == 3 * 4 + 2 * 8 + 8


def test_results_have_provenance_and_both_accuracies(tiny_fed):
    cfg = tiny_config(method="fedavg", rounds=2)
    res = run(cfg, tiny_fed(cfg))
    assert {"mean_acc", "pooled_acc", "per_client_acc"} <= set(res["final"])
    assert {"git_commit", "device", "wall_time_s", "pflkit", "seed"} <= set(res["provenance"])
    assert 1 <= res["best_by_val"]["round"] <= 2
    assert all(0 <= a <= 1 for a in res["final"]["per_client_acc"])


def test_macro_f1_is_scikit_learns_bit_for_bit():
    from sklearn.metrics import f1_score

    from pflkit.engine import macro_f1

    rng = np.random.default_rng(0)
    for _ in range(500):
        n, k = int(rng.integers(1, 200)), int(rng.integers(1, 120))
        true = rng.integers(0, k, n)
        pred = np.where(rng.random(n) < rng.random(), true, rng.integers(0, k, n))  # right some of the time
        assert macro_f1(true, pred) == f1_score(true, pred, average="macro", zero_division=0)
    assert macro_f1(np.array([3]), np.array([7])) == 0.0  # labels in either array count, as there
