"""The peer check: PFLlib's split read into the kit, PFLlib's 4-layer CNN, its runs beside ours."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pflkit.data import SPLIT_FILE, available_offline, load_dataset
from pflkit.errors import PflkitError
from pflkit.models import build_model, n_params
from pflkit.partitions import partition_dataset
from pflkit.peer import last_rounds, peer_table, pfllib_runs, split_of

ROOT = Path(__file__).resolve().parent.parent


def test_pfllib_cnn_has_the_parameters_of_pfllibs_fedavgcnn():
    # conv 1->32 (5x5), conv 32->64 (5x5), fc 1024->512, fc 512->10, every layer with its bias
    expected = (25 * 32 + 32) + (25 * 32 * 64 + 64) + (1024 * 512 + 512) + (512 * 10 + 10)
    model = build_model("pfllib-cnn", (1, 28, 28), 10)
    assert n_params(model) == expected == 582_026
    assert model.head.in_features == 512  # FedPer's head in PFLlib: the last linear layer


def _pfllib_folder(tmp: Path, pooled_x: np.ndarray, pooled_y: np.ndarray, clients: dict) -> Path:
    """A folder as PFLlib's generator writes it: ``{split}/{client}.npz`` holding ``data`` = {x, y},
    images as floats normalised to [-1, 1]."""
    for split in ("train", "test"):
        (tmp / split).mkdir(parents=True, exist_ok=True)
        for cid, parts in clients.items():
            idx = np.asarray(parts[split])
            x = (pooled_x[idx].astype(np.float32) / 255 - 0.5) / 0.5
            np.savez_compressed(tmp / split / f"{cid}.npz", data={"x": x[:, None], "y": pooled_y[idx]})
    return tmp


def test_split_of_finds_each_pfllib_image_in_the_pooled_set_once(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (12, 28, 28), dtype=np.uint8)
    y = rng.integers(0, 10, 12)
    x[7], y[7] = x[3], y[3]  # one image twice with one label: interchangeable, each used once
    clients = {0: {"train": [5, 3, 0], "test": [7]}, 1: {"train": [1, 2, 11, 7 - 4], "test": [4, 9]}}
    clients[1]["train"][3] = 6
    folder = _pfllib_folder(tmp_path, x, y, clients)
    split = split_of(folder, x, y)
    for part in ("train", "test"):
        got = split[part]
        assert (x[got] == np.concatenate([x[clients[c][part]] for c in (0, 1)])).all()  # PFLlib's order kept
        assert (y[got] == np.concatenate([y[clients[c][part]] for c in (0, 1)])).all()
    assert split["train_user"].tolist() == [0, 0, 0, 1, 1, 1, 1] and split["test_user"].tolist() == [0, 1, 1]
    used = np.concatenate([split["train"], split["test"]])
    assert len(set(used.tolist())) == len(used)  # the twin images got two indices


def test_split_of_refuses_an_image_that_is_not_in_the_pooled_set(tmp_path):
    x = np.zeros((3, 28, 28), dtype=np.uint8)
    x[1, 0, 0], x[2, 0, 0] = 1, 2
    y = np.array([0, 1, 2])
    folder = _pfllib_folder(tmp_path, x, y, {0: {"train": [0, 1], "test": [2]}})
    with pytest.raises(PflkitError, match="not in Fashion-MNIST"):
        split_of(folder, x, np.array([0, 1, 3]))  # image 2 carries another label in the pool
    with pytest.raises(PflkitError, match="no PFLlib split"):
        split_of(tmp_path / "nowhere", x, y)


def test_peer_table_reads_the_last_rounds_and_judges_agreement(tmp_path):
    logs = {
        "dir-FedAvg-10": (["global models"], "Averaged", [0.1] + [0.5] * 5 + [0.8] * 5),
        "dir-pFedMe-10-_bt_1__lam_15": (["personalized model"], "Average", [0.1] + [0.9] * 10),  # its wording
        "dir-FedPer-10": (["global models", "personalized models"], "Averaged", [0.3] * 11),  # Ditto's way: both
        "dir-Ditto-10": (["global models"], "Averaged", [0.1] * 4),  # unfinished
        "pat-FedAvg-10": (["global models"], "Averaged", [0.0] * 11),  # another split
    }
    for name, (kinds, word, acc) in logs.items():
        (tmp_path / f"{name}.log").write_text("".join(
            f"Evaluate {kind}\nAveraged Train Loss: 0.5\n{word} Test Accuracy: {a + 0.4 * (kind == 'personalized models'):.4f}\n"
            for a in acc for kind in kinds))  # fmt: skip
    runs = pfllib_runs(tmp_path)
    assert (
        set(runs.algorithm) == {"FedAvg", "pFedMe", "FedPer"}
        and runs[runs.algorithm == "pFedMe"].hyperparameters.iloc[0] == "-bt 1 -lam 15"
    )
    assert list(runs[runs.algorithm == "FedPer"].accuracy.round(6).unique()) == [70.0]  # the personalised ones
    assert runs["round"].max() == 10 and last_rounds(runs[runs.algorithm == "FedAvg"].accuracy) == pytest.approx(80)
    rows = []
    for arm, level in {"FedAvg": 79.0, "pFedMe": 70.0, "Ditto": 50.0}.items():  # within 2, 20 below, no PFLlib run
        for seed in range(3):
            rows += [{"arm": arm, "method": arm.lower(), "seed": seed, "round": r, "pooled_acc": level + seed - 1}
                     for r in range(1, 11)]  # fmt: skip
    table = peer_table(runs, pd.DataFrame(rows)).set_index("algorithm")
    assert table.loc["FedAvg", "pfllib"] == pytest.approx(80) and table.loc["FedAvg", "kit"] == pytest.approx(79)
    assert table.loc["FedAvg", "difference"] == pytest.approx(1) and table.loc["FedAvg", "agree"]
    assert not table.loc["pFedMe", "agree"] and table.loc["pFedMe", "lo"] < 70 < table.loc["pFedMe", "hi"]
    assert table.loc["Ditto", "agree"] is None and table.loc["Ditto", "seeds"] == 3


def test_the_tool_ends_with_one_line_and_exit_2_on_a_folder_without_pfllib(tmp_path):
    for what in ("split", "runs"):
        out = subprocess.run([sys.executable, str(ROOT / "tools" / "pfllib_peer.py"), what, str(tmp_path)],
                             capture_output=True, text=True)  # fmt: skip
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.skipif(not available_offline("fashion-mnist-pfllib"), reason="Fashion-MNIST is not on this machine")
def test_pfllibs_split_rebuilt_from_the_committed_indices():
    split = np.load(SPLIT_FILE)
    assert len(np.unique(np.concatenate([split["train"], split["test"]]))) == 70_000  # every image, once
    ds = load_dataset("fashion-mnist-pfllib")
    part = partition_dataset(ds, "natural", 20, 0, val_fraction=0.0)
    assert [len(c.train) for c in part.clients] == np.bincount(split["train_user"]).tolist()
    assert [len(c.test) for c in part.clients] == np.bincount(split["test_user"]).tolist()
    assert all(len(c.val) == 0 for c in part.clients) and part.unassigned == 0
    # PFLlib's first client: 82 images (labels 0, 1, 6, 8, 9), 61 to train and 21 to test (its 75 / 25 split)
    assert len(part.clients[0].train) == 61 and len(part.clients[0].test) == 21
    assert ds.normalize(ds.x_train[:100]).min() == -1 and ds.normalize(ds.x_train[:100]).max() == 1  # PFLlib's [-1, 1]


def test_a_disagreeing_algorithm_whose_pfllib_curve_is_fedavgs_is_said_to_be():
    from pflkit.chapters.basics import peer_display, peer_explanations, peer_sentences

    rounds = range(11)
    runs = pd.DataFrame(
        [{"algorithm": "FedAvg", "hyperparameters": "", "round": r, "accuracy": 10.0 + 5 * r} for r in rounds]
        + [{"algorithm": "pFedMe", "hyperparameters": "-bt 1", "round": r, "accuracy": 11.0 + 5 * r} for r in rounds]
    )  # fmt: skip
    history = pd.DataFrame([{"arm": a, "method": m, "seed": 0, "round": r, "pooled_acc": v + 5 * r}
                            for a, m, v in (("FedAvg", "fedavg", 10.0), ("pFedMe", "pfedme", 40.0))
                            for r in range(1, 11)])  # fmt: skip
    table = peer_table(runs, history)
    lines = peer_sentences(table, 2.0, notes={}, pfllib=runs)
    assert "they agree" in lines[0] and "FedAvg global model" not in lines[0]
    assert "they disagree" in lines[1] and "within 1.0 points of PFLlib's FedAvg global model" in lines[1]
    assert "(our FedAvg: " in lines[1]  # our run of it beside
    assert list(peer_explanations(table)) == ["FedAvg"]  # only an agreeing method explains a weak baseline
    local = pd.concat(
        [runs.replace({"FedAvg": "Local"}), runs.replace({"pFedMe": "FedAMP"}).query("algorithm == 'FedAMP'")]
    )
    fedamp = peer_sentences(peer_table(local, history.replace({"pFedMe": "FedAMP", "pfedme": "fedamp"})), 2.0,
                            notes={}, pfllib=local)  # fmt: skip
    assert any("within 1.0 points of PFLlib's Local models" in line for line in fedamp)
    assert peer_display(table).loc["pFedMe", "agree"] == "no"
