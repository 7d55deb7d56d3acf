import json
import subprocess
import sys

import pytest

from pflkit.data import available_offline


def pflkit(*args, env=None):
    return subprocess.run([sys.executable, "-m", "pflkit", *args], capture_output=True, text=True, env=env, timeout=300)


def test_methods_and_datasets_lists():
    out = pflkit("methods").stdout
    for m in ["local", "fedavg", "fedavg-ft", "fedprox", "fedper", "lg-fedavg", "ditto", "pfedme", "perfedavg"]:
        assert m in out
    ds = pflkit("datasets").stdout
    assert "digits" in ds and "available offline" in ds and "cifar10" in ds


def test_partition_json(tmp_path):
    out = tmp_path / "p.json"
    r = pflkit("partition", "--dataset", "digits", "--protocol", "pathological", "--classes-per-client", "3",
               "--shares", "0.3", "0.7", "--clients", "5", "--seed", "1", "--out", str(out),
               "--report", str(tmp_path / "p.png"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    d = json.loads(out.read_text())
    assert {"dataset", "protocol", "seed", "n_train", "n_test", "unassigned", "clients"} <= set(d)
    assert len(d["clients"]) == 5 and set(d["clients"][0]) == {"train", "val", "test"}
    assert d["n_train"] == sum(len(c["train"]) + len(c["val"]) for c in d["clients"]) + d["unassigned"]


def test_run_json(tmp_path):
    out = tmp_path / "r.json"
    r = pflkit("run", "fedprox", "--dataset", "digits", "--partition", "dirichlet", "--alpha", "0.5",
               "--clients", "4", "--rounds", "2", "--seed", "3", "--model", "mlp", "--local-steps", "5",
               "--mu", "0.1", "--no-progress", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "mean_acc" in r.stdout and len(r.stdout.strip().splitlines()) == 1
    d = json.loads(out.read_text())
    assert {"config", "history", "final", "comm", "provenance"} <= set(d)
    assert d["config"]["options"] == {"mu": 0.1}
    assert 0 <= d["final"]["mean_acc"] <= 1 and 0 <= d["final"]["pooled_acc"] <= 1
    assert len(d["final"]["per_client_acc"]) == 4 and d["comm"]["bytes_up"] > 0


@pytest.mark.skipif(not available_offline("fashion-mnist"), reason="Fashion-MNIST is not on this machine")
def test_run_ktpfl_with_models_and_a_public_set(tmp_path):
    out = tmp_path / "k.json"
    r = pflkit("run", "ktpfl", "--dataset", "digits", "--partition", "dirichlet", "--clients", "4", "--rounds", "1",
               "--model", "mlp", "--local-steps", "2", "--public-images", "100", "--public-source", "fashion-mnist",
               "--models", "mlp,mlp3x32", "--public-batch", "50", "--no-progress", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["config"]["public_images"] == 100 and d["config"]["public_source"] == "fashion-mnist"
    assert d["options"]["models"] == "mlp,mlp3x32"
    assert d["comm"]["bytes_up"] == 4 * (50 * 10 * 4 + 8)  # soft predictions on 50 public images and n, per client


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "nope", "--dataset", "digits"], "unknown method"),
        (["run", "fedavg", "--dataset", "nope", "--rounds", "1"], "unknown dataset"),
        (["partition", "--dataset", "digits", "--protocol", "nope", "--out", "x.json"], "invalid choice"),
        (["partition", "--dataset", "digits", "--protocol", "iid", "--clients", "100000", "--out", "x.json"], "impossible partition"),
        (["run", "fedavg", "--dataset", "cifar10", "--rounds", "1"], "not found"),
        (["run", "fedavg", "--dataset", "digits", "--model", "mlp", "--clients", "3", "--rounds", "1", "--lr", "1e12", "--no-progress"], "lower the learning rate"),
        (["run", "fedprox", "--dataset", "digits", "--bogus", "1"], "unrecognized arguments"),
        (["run", "ktpfl", "--dataset", "digits", "--public-images", "50", "--public-source", "digits"], "is the run's dataset"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2(cli, args, needle):
    r = cli(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_a_real_process_says_bad_input_in_one_line_and_exits_2(tmp_path):
    """The same as a process: nothing else on stderr (no traceback, no warning at import)."""
    r = subprocess.run([sys.executable, "-m", "pflkit", "run", "nope", "--dataset", "digits"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=300)  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: unknown method 'nope'; known: ")


def test_method_options_parse_booleans_and_types():
    from pflkit.cli import _method_options
    from pflkit.errors import PflkitError
    from pflkit.federated import Client, Server
    from pflkit.methods import Method

    m = Method("x", Server, Client, "", options={"flag": (False, ""), "k": (3, ""), "lr": (0.1, "")})
    assert _method_options(m, ["--flag", "false", "--k", "5"]) == {"flag": False, "k": 5, "lr": 0.1}
    assert _method_options(m, ["--flag", "1"])["flag"] is True
    with pytest.raises(PflkitError):
        _method_options(m, ["--flag", "maybe"])
