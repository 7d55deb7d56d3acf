"""Proposition 1 of pFedHN (Section 4.1): a linear hypernetwork trained federatedly does uncentred PCA."""

import numpy as np
import pytest

from pflkit.theory import (
    fit_linear_hypernetwork,
    local_solutions,
    make_regression_clients,
    pca_subspace,
    principal_angles,
)

N, D, M = 30, 20, 20  # clients, parameter dimension, samples per client
TOL = 1e-2  # radians


def mean_sq_err(A, B):
    return float(np.mean(np.sum((A - B) ** 2, axis=0)))


@pytest.fixture(scope="module")
def problem():
    X, y, theta_star, basis = make_regression_clients(N, D, 3, M, noise=0.1, seed=0)
    W, V, losses = fit_linear_hypernetwork(X, y, k=3, seed=0)
    return X, y, theta_star, basis, W, V, losses


def test_designs_have_orthonormal_columns(problem):
    X, y, *_ = problem
    assert len(X) == len(y) == N
    for x in X:
        assert x.shape == (M, D)
        np.testing.assert_allclose(x.T @ x, np.eye(D), atol=1e-12)
    ls = np.stack([np.linalg.lstsq(x, yi, rcond=None)[0] for x, yi in zip(X, y)], axis=1)
    np.testing.assert_allclose(local_solutions(X, y), ls, atol=1e-10)


def test_trained_span_is_pca_of_local_solutions(problem):
    X, y, _, _, W, V, losses = problem
    assert W.shape == (D, 3) and V.shape == (3, N)
    assert losses[-1] < 0.2 * losses[0]
    P = pca_subspace(local_solutions(X, y), 3)
    np.testing.assert_allclose(P.T @ P, np.eye(3), atol=1e-12)
    assert principal_angles(W, P).max() < TOL
    # W v_i is the projection of theta_bar_i onto the principal subspace
    theta_bar = local_solutions(X, y)
    np.testing.assert_allclose(W @ V, P @ P.T @ theta_bar, atol=1e-3)


def test_projection_denoises_local_solutions():
    X, y, theta_star, basis = make_regression_clients(N, D, 3, M, noise=0.3, seed=1)
    W, V, _ = fit_linear_hypernetwork(X, y, k=3, seed=1)
    local_err = mean_sq_err(local_solutions(X, y), theta_star)  # about d * noise^2
    assert local_err == pytest.approx(D * 0.3**2, rel=0.3)
    assert mean_sq_err(W @ V, theta_star) < 0.5 * local_err


@pytest.mark.parametrize("k, mean", [(2, None), (1, [0.0, 0.0, 2.0])])
def test_rank_deficient_hypernetwork_finds_top_k_pca_not_true_span(k, mean):
    X, y, _, basis = make_regression_clients(N, D, 3, M, noise=0.1, seed=2, mean=mean)
    W, _, _ = fit_linear_hypernetwork(X, y, k=k, seed=2)
    theta_bar = local_solutions(X, y)
    assert principal_angles(W, pca_subspace(theta_bar, k)).max() < TOL
    Q = np.linalg.qr(W)[0]
    missed = np.sum((basis - Q @ Q.T @ basis) ** 2)  # part of the true span left out: 3 - k orthonormal directions
    assert missed > 3 - k - 0.1
    if mean is not None:  # uncentred, as the proposition says: centred PCA picks a different direction
        centred = theta_bar - theta_bar.mean(axis=1, keepdims=True)
        assert principal_angles(W, pca_subspace(centred, k)).max() > 1.0
