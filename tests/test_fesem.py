"""FeSEM: its E- and M-steps, the reduction to FedAvg, the k-means initialisation, and the
recovery of known client groups."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from pflkit.engine import Federation, build, derive_seed, run
from pflkit.errors import NotInStore, PflkitError
from pflkit.experiments import Store, choose_k
from pflkit.federated import snapshot
from pflkit.grouped import grouped_federation
from pflkit.methods.fesem import assignment_margins, e_step, kmeans, m_step, points
from tests.conftest import killed_and_resumed, strip, tiny_config
from tests.test_methods import assert_states_equal, final_server_state


def states(*rows):
    return [{"w": torch.tensor(r, dtype=torch.float32)} for r in rows]


# ----------------------------------------------------------------------------- E- and M-steps


def test_e_step_assigns_each_client_to_nearest_centre():
    w = states([0.0, 0.0], [0.2, 0.1], [5.0, 5.0], [4.0, 6.0], [0.0, 9.0])
    c = states([0.0, 0.0], [5.0, 5.0], [0.0, 10.0])
    assert e_step(points(w, ["w"]), points(c, ["w"])).tolist() == [0, 0, 1, 1, 2]  # eq. 8


def test_margins_are_second_nearest_over_nearest_distance():
    w = states([0.0, 0.0], [1.0, 0.0], [3.0, 0.0])
    c = states([0.0, 1.0], [4.0, 0.0])
    np.testing.assert_allclose(assignment_margins(points(w, ["w"]), points(c, ["w"])), [4.0, 3 / 2**0.5, 10**0.5])
    assert np.isinf(assignment_margins(points(w, ["w"]), points(c[:1], ["w"]))).all()  # one centre: nothing to move to


def test_m_step_means_plain_and_size_weighted_and_empty_cluster_kept():
    w = states([0.0, 0.0], [2.0, 4.0], [5.0, 5.0])
    old = states([9.0, 9.0], [9.0, 9.0], [7.0, 7.0])
    plain = m_step(w, [0, 0, 1], old)  # eq. 9: unweighted mean of the cluster's models
    assert plain[0]["w"].tolist() == [1.0, 2.0] and plain[1]["w"].tolist() == [5.0, 5.0]
    assert plain[2] is old[2]  # no clients: the centre stays
    weighted = m_step(w, [0, 0, 1], old, weights=[3, 1, 7])
    assert weighted[0]["w"].tolist() == [0.5, 1.0]


def test_kmeans_finds_well_separated_clusters_in_many_dimensions():
    rng = np.random.default_rng(0)
    truth = np.repeat([0, 1, 2], 5)
    centres = rng.normal(0, 1, (3, 5000))
    x = torch.from_numpy(centres[truth] + rng.normal(0, 0.05, (15, 5000)))
    assert adjusted_rand_score(truth, kmeans(x, 3, seed=0)) == 1.0


# ----------------------------------------------------------------------------- reductions


def fesem_k1(**opts):
    return {"centers": 1, "lam": 0.0, "size_weighted": True} | opts


def test_k1_lambda0_round_equals_fedavg_round(tiny_fed):
    """Same start, same batches: one FeSEM round (K = 1, λ = 0, size-weighted M-step) is
    exactly one FedAvg round.  (The paper's unweighted eq. 9 is FedAvg with equal weights.)"""
    cfg_f, cfg_s = tiny_config(method="fedavg"), tiny_config(method="fesem", options=fesem_k1())
    _, _, fedavg, avg_clients = build(cfg_f, tiny_fed(cfg_f))
    _, _, fesem, sem_clients = build(cfg_s, tiny_fed(cfg_s))
    fesem.setup({c.cid: c.setup_message() for c in sem_clients})  # centre: mean of initial local models
    fedavg.w = {k: v.clone() for k, v in fesem.centers[0].items()}
    for server, clients in ((fedavg, avg_clients), (fesem, sem_clients)):
        uploads = {}
        for c in clients:
            c.generator.manual_seed(derive_seed(0, 0, 3, c.cid))
            uploads[c.cid] = c.train_round(server.message_for(c.cid, 0), 0)[0]
        server.aggregate(uploads, 0)
    assert_states_equal(fedavg.w, fesem.centers[0])


def test_k1_lambda0_untrained_init_runs_as_fedavg(tiny_fed):
    """With initial local models left untrained the k-means centre is the common
    initialisation, so the whole run is FedAvg's (weights and metrics)."""
    a = final_server_state(tiny_config(method="fedavg"), tiny_fed(tiny_config()))
    cfg = tiny_config(method="fesem", options=fesem_k1(init_steps=0))
    got = {}
    res = run(cfg, tiny_fed(cfg), on_round=lambda r, row, server, c: got.update(w=server.centers[0]))
    assert_states_equal(a, got["w"])
    ref = run(tiny_config(method="fedavg"), tiny_fed(tiny_config()))
    assert [h["mean_acc"] for h in res["history"]] == [h["mean_acc"] for h in ref["history"]]


# ----------------------------------------------------------------------------- known groups


@pytest.mark.parametrize("distance", ["all", "last"])
def test_recovers_the_latent_groups_of_a_grouped_federation(digits, distance):
    """12 clients in 4 image-transform groups with Dirichlet(0.5) label mixes: the clusters
    match the true groups (adjusted Rand index; chance is 0), and stay so over the rounds."""
    g = grouped_federation(digits, n_clients=12, seed=0)
    cfg = tiny_config(method="fesem", clients=12, rounds=3, options={"centers": 4, "distance": distance})
    ari = []
    run(cfg, Federation(g.ds, g.partition, torch.device("cpu")), on_round=lambda r, row, s, c: ari.append(
        adjusted_rand_score(g.groups, s.assignment)))  # fmt: skip
    assert min(ari) > 0.8, ari


def test_fixed_random_clusters_ignore_the_groups(digits):
    g = grouped_federation(digits, n_clients=12, seed=0)
    cfg = tiny_config(method="fesem", clients=12, rounds=1, options={"centers": 4, "em": "fixed-random"})
    _, _, server, _ = build(cfg, Federation(g.ds, g.partition, torch.device("cpu")))
    assert abs(adjusted_rand_score(g.groups, server.assignment)) < 0.3


# ----------------------------------------------------------------------------- protocol


def test_setup_upload_is_counted_and_initialises_clusters(tiny_fed):
    cfg = tiny_config(method="fesem", rounds=2, options={"centers": 2})
    fed, _, server, _ = build(cfg, tiny_fed(cfg))
    model_bytes = sum(p.numel() * 4 for p in server.model.parameters())
    seen, initial, centres = [], [], []

    def on_setup(s, c):  # eq. 9's first clustering: k-means of the uploaded initial local models
        initial.append((s.assignment.copy(), kmeans(points(s.local, s.keys), 2, cfg.seed)))
        centres.append(points(s.centers, s.keys))

    def on_round(r, row, s, c):  # E-step (eq. 8): each client joins the centre nearest its new model
        seen.append((s.assignment.copy(), e_step(points(s.local, s.keys), centres[-1])))
        centres.append(points(s.centers, s.keys))

    res = run(cfg, fed, on_round=on_round, on_setup=on_setup)
    # setup: every client's initial local model and n; then per round: the model and n up
    assert res["comm"]["bytes_up"] == 4 * (model_bytes + 8) + 2 * 4 * (model_bytes + 8)
    assert res["comm"]["bytes_down"] == 2 * 4 * model_bytes
    ((got, want),) = initial
    assert got.tolist() == want.tolist()
    assert len(seen) == 2 and all(a.tolist() == nearest.tolist() for a, nearest in seen)


def test_fixed_random_mode_never_reclusters_and_sends_no_setup(tiny_fed):
    cfg = tiny_config(method="fesem", rounds=3, options={"centers": 2, "em": "fixed-random"})
    fed, _, server, _ = build(cfg, tiny_fed(cfg))
    first = server.assignment.copy()
    seen = []
    res = run(cfg, fed, on_round=lambda r, row, s, c: seen.append(s.assignment.copy()))
    assert all(np.array_equal(a, first) for a in seen)
    model_bytes = sum(p.numel() * 4 for p in server.model.parameters())
    assert res["comm"]["bytes_up"] == 3 * 4 * (model_bytes + 8)


def test_fixed_random_head_start_trains_initial_models_but_keeps_the_random_clusters(tiny_fed):
    """head_start: the fixed random clusters of em=fixed-random, but with the paper's initial
    local models uploaded before round 1 and each cluster's first centre their mean (eq. 9)."""
    opts = {"centers": 2, "em": "fixed-random"}
    cfg = tiny_config(method="fesem", rounds=2, options=opts | {"head_start": True})
    fed, _, server, _ = build(cfg, tiny_fed(cfg))
    random_clusters = server.assignment.copy()
    _, _, plain, _ = build(tiny_config(method="fesem", rounds=2, options=opts), fed)
    assert np.array_equal(random_clusters, plain.assignment)  # the same fixed random clusters
    at_setup, seen = {}, []

    def on_setup(s, clients):
        at_setup.update(assignment=s.assignment.copy(), local=list(s.local), centers=list(s.centers))

    res = run(cfg, fed, on_setup=on_setup, on_round=lambda r, row, s, c: seen.append(s.assignment.copy()))
    assert np.array_equal(at_setup["assignment"], random_clusters)
    assert all(np.array_equal(a, random_clusters) for a in seen)  # never re-clustered
    expected = m_step(at_setup["local"], random_clusters, [None, None])
    for k in range(2):
        if (random_clusters == k).any():
            assert_states_equal(expected[k], at_setup["centers"][k])
    trained = points(at_setup["local"], ["head.weight"])
    assert (trained - points([snapshot(server.model)], ["head.weight"])).abs().max() > 0  # the head start ran
    model_bytes = sum(p.numel() * 4 for p in server.model.parameters())
    assert res["comm"]["bytes_up"] == 4 * (model_bytes + 8) + 2 * 4 * (model_bytes + 8)  # setup upload counted


def test_on_setup_sees_the_k_means_clustering_before_round_1(tiny_fed):
    cfg = tiny_config(method="fesem", rounds=1, options={"centers": 2})
    got = {}
    run(cfg, tiny_fed(cfg), on_setup=lambda s, c: got.update(a=s.assignment.copy(), x=points(s.local, s.keys)))
    assert np.array_equal(got["a"], kmeans(got["x"], 2, cfg.seed))


def drift(tiny_fed, **opts):
    """How far client 0's parameters move from the centre in one local update, per part."""
    cfg = tiny_config(method="fesem", rounds=1, options={"centers": 1} | opts)
    _, _, server, clients = build(cfg, tiny_fed(cfg))
    msg = server.message_for(0, 0)
    clients[0].generator.manual_seed(1)
    new = clients[0].train_round(msg, 0)[0]["weights"]
    return {part: sum(float((new[k] - v).norm()) for k, v in msg["weights"].items() if k.startswith(part))
            for part in ("body.", "head.")}  # fmt: skip


def test_penalty_pulls_towards_the_centre_on_the_distance_s_parameters(tiny_fed):
    free = drift(tiny_fed, lam=0.0)
    last = drift(tiny_fed, lam=40.0, distance="last")  # λ/m = 10 on the last layer only (eq. 7)
    whole = drift(tiny_fed, lam=40.0, distance="all")
    assert last["head."] < 0.25 * free["head."] and last["body."] > 0.8 * free["body."]
    assert whole["head."] < 0.25 * free["head."] and whole["body."] < 0.25 * free["body."]


def test_resume_after_kill_equals_uninterrupted(tiny_fed, tmp_path):
    cfg = tiny_config(method="fesem", rounds=3, sample_rate=0.5, options={"centers": 2})
    full = run(cfg, tiny_fed(cfg))
    resumed = killed_and_resumed(cfg, tiny_fed, tmp_path / "c")
    assert strip(resumed) == strip(full)


@pytest.mark.parametrize("opts,match", [({"centers": 9}, "between 1"), ({"distance": "l1"}, "distance"),
                                        ({"em": "hard"}, "em must"), ({"local_start": "mean"}, "local_start")])  # fmt: skip
def test_bad_options_are_one_clear_error(tiny_fed, opts, match):
    cfg = tiny_config(method="fesem", options=opts)
    with pytest.raises(PflkitError, match=match):
        build(cfg, tiny_fed(cfg))


def test_choose_k_scores_every_k(tiny_fed):
    cfg = tiny_config(method="fesem", clients=6, classes_per_client=2)
    scores = choose_k(cfg, tiny_fed(cfg), ks=(1, 2), sample=4, rounds=1)
    assert set(scores) == {1, 2}
    assert all(0 <= s["val_mean_acc"] <= 1 and s["intra_distance"] >= 0 for s in scores.values())


def test_choose_k_through_a_store_computes_once_and_gives_the_same_scan(tiny_fed, tmp_path):
    cfg = tiny_config(method="fesem", clients=6, classes_per_client=2)
    direct = choose_k(cfg, tiny_fed(cfg), ks=(1, 2), sample=4, rounds=1)
    store = Store(tmp_path)
    assert choose_k(cfg, tiny_fed(cfg), ks=(1, 2), sample=4, rounds=1, store=store) == direct
    assert len(list((tmp_path / "derived").glob("choose_k-*.json"))) == 1
    read_only = Store(tmp_path, read_only=True)  # read back, nothing computed
    assert choose_k(cfg, tiny_fed(cfg), ks=(1, 2), sample=4, rounds=1, store=read_only) == direct
    with pytest.raises(NotInStore):
        choose_k(cfg, tiny_fed(cfg), ks=(1, 2), sample=4, rounds=2, store=read_only)


def test_cli_runs_fesem(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run(
        [sys.executable, "-m", "pflkit", "run", "fesem", "--centers", "2", "--distance", "last",
         "--dataset", "digits", "--partition", "dirichlet", "--clients", "4", "--rounds", "2", "--model", "mlp",
         "--local-steps", "3", "--no-progress", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["options"]["centers"] == 2


def test_micro_and_macro_metrics_as_the_fesem_paper_defines_them():
    """§6: "micro" weights the clients' metrics by their data size, "macro" averages them."""
    from pflkit.engine import summarize

    def client(true, pred):
        true, pred = np.array(true), np.array(pred)
        return {"correct": int((true == pred).sum()), "n": len(true), "loss": 0.0, "true": true, "pred": pred}

    s = summarize([
        client([0], [0]),  # acc 1, F1 1
        client([0, 0, 1, 1], [1, 1, 1, 1]),  # acc 1/2; F1: class 0 → 0, class 1 → 2/3; macro 1/3
        client([2, 2, 2, 2, 2], [2, 2, 2, 2, 0]),  # acc 4/5; F1: class 2 → 8/9, class 0 → 0; macro 4/9
    ])  # fmt: skip
    assert s["mean_acc"] == pytest.approx((1 + 1 / 2 + 4 / 5) / 3)  # macro accuracy
    assert s["pooled_acc"] == pytest.approx((1 * 1 + 4 * 1 / 2 + 5 * 4 / 5) / 10)  # micro = Σ correct / Σ n
    assert s["macro_f1"] == pytest.approx((1 + 1 / 3 + 4 / 9) / 3)
    assert s["micro_f1"] == pytest.approx((1 * 1 + 4 * 1 / 3 + 5 * 4 / 9) / 10)


def test_e_step_moves_a_client_to_the_centre_its_new_model_is_nearest(tiny_fed):
    """Hand-made models: client 1 sits in cluster 0 but uploads a model nearest centre 1."""
    cfg = tiny_config(method="fesem", clients=3, options={"centers": 2, "distance": "last"})
    _, _, server, _ = build(cfg, tiny_fed(cfg))

    def model_with_head(value):
        return {
            k: (torch.full_like(v, value) if k.startswith("head.") else v.clone()) for k, v in server.centers[0].items()
        }

    server.centers = [model_with_head(0.0), model_with_head(1.0)]
    server.assignment = np.array([0, 0, 1])
    uploads = {i: {"weights": model_with_head(v), "n": torch.tensor(10)} for i, v in enumerate([0.1, 0.9, 0.8])}
    server.aggregate(uploads, 0)
    assert server.assignment.tolist() == [0, 1, 1]  # eq. 8 reassigned client 1
    torch.testing.assert_close(server.centers[1]["head.bias"], torch.full_like(server.centers[1]["head.bias"], 0.85))


def test_paper_reading_of_the_penalty_divides_by_alpha_i(tiny_fed, monkeypatch):
    import pflkit.methods.fesem as fesem

    seen = []
    original = fesem.distance_penalty
    monkeypatch.setattr(fesem, "distance_penalty", lambda ref, keys, w: seen.append(w) or original(ref, keys, w))
    for weight in (fesem.KIT_WEIGHT, fesem.PAPER_WEIGHT):
        cfg = tiny_config(
            method="fesem", clients=4, rounds=1, options={"centers": 2, "lam": 0.4, "penalty_weight": weight}
        )
        _, _, server, clients = build(cfg, tiny_fed(cfg))
        server.n = [10.0, 30.0, 30.0, 30.0]
        msg = server.message_for(0, 0)
        clients[0].train_round(msg, 0)
        assert ("alpha_i" in msg) == (weight == fesem.PAPER_WEIGHT)
    assert seen[0] == pytest.approx(0.4 / 4)  # λ/m
    assert seen[1] == pytest.approx(0.4 / (4 * 0.1))  # λ/(m α_i), α_0 = 10/100


def test_authors_micro_acc_is_the_best_centre_on_all_clients_pooled(tiny_fed):
    from pflkit.federated import evaluate
    from pflkit.methods.fesem import authors_micro_acc

    cfg = tiny_config(method="fesem", rounds=2, options={"centers": 2})
    captured = {}
    run(cfg, tiny_fed(cfg), on_round=lambda r, row, s, c: captured.update(server=s, clients=c))
    server, clients = captured["server"], captured["clients"]
    out = authors_micro_acc(server, clients)
    model = clients[0].scratch_model()
    by_hand = []
    for centre in server.centers:
        model.load_state_dict(centre)
        x = torch.cat([c.data.split("test")[0] for c in clients])
        y = torch.cat([c.data.split("test")[1] for c in clients])
        by_hand.append(evaluate(model, x, y)["correct"] / len(y))
    assert out["per_centre"] == pytest.approx(by_hand) and out["max"] == max(by_hand)


def test_choose_k_finds_two_groups_with_conflicting_labels(digits):
    """A known answer: two groups of clients whose labels disagree (group B sees y + 5 mod 10 on
    the same kind of images). One model cannot serve both; two centres can, so K = 2 must score
    clearly above K = 1 on validation."""
    import dataclasses

    from pflkit.engine import Federation
    from pflkit.partitions import partition_dataset

    part = partition_dataset(digits, "iid", 6, 0)
    y_train, y_test = digits.y_train.clone(), digits.y_test.clone()
    for c in part.clients[3:]:  # group B
        for idx, y in ((np.concatenate([c.train, c.val]), y_train), (c.test, y_test)):
            t = torch.as_tensor(idx, dtype=torch.long)
            y[t] = (y[t] + 5) % 10
    ds = dataclasses.replace(digits, y_train=y_train, y_test=y_test)
    fed = Federation(ds, part, torch.device("cpu"))
    cfg = tiny_config(method="fesem", clients=6, options={"init_steps": 30})
    scores = choose_k(cfg, fed, ks=(1, 2), sample=6, rounds=3)
    assert scores[2]["val_mean_acc"] > scores[1]["val_mean_acc"] + 0.2, scores


def test_own_start_continues_each_clients_model_and_centre_start_restarts_it(tiny_fed):
    """local_start=own: round t starts from the client's W_i of round t−1 (after setup: its initial
    local model), not from its centre; the default restarts from the centre (Alg. 2)."""
    seen = {}
    for start in ("centre", "own"):
        cfg = tiny_config(method="fesem", rounds=2, options={"centers": 2, "init_steps": 3, "local_start": start})
        _, _, server, clients = build(cfg, tiny_fed(cfg))
        c = clients[0]
        server.setup({i: cl.setup_message() for i, cl in enumerate(clients)})
        initial = snapshot(c.model)
        msg = server.message_for(0, 1)
        first = c.train_round(msg, 1)[0]["weights"]
        c.model.load_state_dict(msg["weights"])  # what evaluating the client does to its model
        seen[start] = (initial, msg["weights"], first, c)
    initial, centre, _, c = seen["own"]
    assert_states_equal(c.own.state_dict(), seen["own"][2])  # W_i kept apart from the evaluated model
    own_again = c.train_round({"weights": centre}, 2)[0]["weights"]
    ref = seen["centre"][3]
    centre_again = ref.train_round({"weights": centre}, 2)[0]["weights"]
    assert not all(torch.equal(own_again[k], centre_again[k]) for k in own_again)  # different starting points
    assert "own" in c.persistent and "own" not in ref.persistent


def test_own_start_resumes_after_kill_equals_uninterrupted(tiny_fed, tmp_path):
    cfg = tiny_config(method="fesem", rounds=3, sample_rate=0.5, options={"centers": 2, "local_start": "own"})
    full = run(cfg, tiny_fed(cfg))
    assert strip(killed_and_resumed(cfg, tiny_fed, tmp_path / "c")) == strip(full)
    centre = run(tiny_config(method="fesem", rounds=3, sample_rate=0.5, options={"centers": 2}), tiny_fed(cfg))
    assert strip(centre) != strip(full)
