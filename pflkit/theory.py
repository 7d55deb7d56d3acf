"""The linear-hypernetwork analysis of pFedHN (Shamsian et al., 2021, Section 4.1, Proposition 1).

A linear hypernetwork maps client embedding v_i to theta_i = W v_i (W is d x k). For linear-regression
clients with X_i^T X_i = I_d, Proposition 1 (proof in Appendix A) shows that minimising
sum_i ||X_i W v_i - y_i||^2 over (W, V) is the same as minimising sum_i ||W v_i - theta_bar_i||^2, where
theta_bar_i = X_i^T y_i is client i's local least-squares solution. With W^T W = I this becomes
min_W sum_i ||W W^T theta_bar_i - theta_bar_i||^2: PCA on {theta_bar_i} *without centring* (there is no
bias term, so no mean is removed), i.e. W spans the top-k left singular vectors of [theta_bar_1 ... theta_bar_n]
and W v_i is the projection of theta_bar_i onto that span. Section 4.1 reads this as denoising:
theta_bar_i = theta*_i + isotropic noise, and projecting onto a low-dimensional subspace removes most of it.

All matrices of per-client vectors are stored one client per column (d x n), as V is k x n in the paper.
"""

import numpy as np
import torch
from scipy.linalg import subspace_angles


def make_regression_clients(n_clients, d, k_true, n_samples, noise, seed, *, scales=None, mean=None):
    """Synthetic clients for Proposition 1: true theta*_i = B c_i lie in a k_true-dim subspace span(B).

    Each design X_i (n_samples x d) has orthonormal columns (Q of a Gaussian's QR), so X_i^T X_i = I_d,
    and y_i = X_i theta*_i + N(0, noise^2). Coefficients are c_i ~ mean + N(0, diag(scales^2)); the default
    scales 1, 1/2, ..., 1/k_true give distinct principal directions. Returns (X list, y list, theta* (d x n),
    B (d x k_true, orthonormal)).
    """
    if n_samples < d:
        raise ValueError(f"need n_samples >= d for X_i^T X_i = I_d, got {n_samples} < {d}")
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((d, k_true)))[0]
    scales = 1.0 / np.arange(1, k_true + 1) if scales is None else np.asarray(scales, float)
    mean = np.zeros(k_true) if mean is None else np.asarray(mean, float)
    coeffs = mean[:, None] + scales[:, None] * rng.standard_normal((k_true, n_clients))
    theta_star = basis @ coeffs
    X = [np.linalg.qr(rng.standard_normal((n_samples, d)))[0] for _ in range(n_clients)]
    y = [x @ theta_star[:, i] + noise * rng.standard_normal(n_samples) for i, x in enumerate(X)]
    return X, y, theta_star, basis


def local_solutions(X, y):
    """Local ERM solutions theta_bar_i = (X_i^T X_i)^{-1} X_i^T y_i = X_i^T y_i (Appendix A), as a d x n matrix."""
    return np.stack([x.T @ yi for x, yi in zip(X, y, strict=True)], axis=1)


def pca_subspace(thetas, k):
    """Orthonormal d x k basis of the top-k principal subspace of the columns of `thetas` (d x n).

    Uncentred, as in Proposition 1: the minimiser of sum_i ||W W^T theta_i - theta_i||^2 over W^T W = I is
    the top-k left singular vectors of the raw matrix (no mean subtracted).
    """
    return np.linalg.svd(np.asarray(thetas, float), full_matrices=False)[0][:, :k]


def fit_linear_hypernetwork(X, y, k, steps=500, lr=0.05, seed=0):
    """Fit theta_i = W v_i by Adam on the federated objective sum_i ||X_i W v_i - y_i||^2 (no closed form).

    Returns W (d x k), V (k x n) as numpy arrays and the per-step loss curve.
    """
    gen = torch.Generator().manual_seed(seed)
    Xt = torch.as_tensor(np.stack(X), dtype=torch.float64)  # n x m x d
    yt = torch.as_tensor(np.stack(y), dtype=torch.float64)  # n x m
    n, _, d = Xt.shape
    W = (0.1 * torch.randn(d, k, generator=gen, dtype=torch.float64)).requires_grad_()
    V = (0.1 * torch.randn(k, n, generator=gen, dtype=torch.float64)).requires_grad_()
    opt = torch.optim.Adam([W, V], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    losses, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: intra-op threads only add overhead (and stall on a busy machine)
    try:
        for _ in range(steps):
            opt.zero_grad()
            pred = torch.einsum("nmd,dn->nm", Xt, W @ V)  # client i predicts X_i (W v_i)
            loss = ((pred - yt) ** 2).sum()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    return W.detach().numpy(), V.detach().numpy(), losses


def principal_angles(A, B):
    """Principal angles (radians, descending) between the column spans of A and B (scipy's subspace_angles)."""
    return subspace_angles(np.asarray(A, float), np.asarray(B, float))
