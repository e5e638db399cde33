"""Copy-task throughput: Adam grids and SGLD chains (run-steps per second), in one process.

Adam (L = 32, V = 4, 16 values of P log-spaced over 100..1000, 8 seeds, 2 initialisations, a
fixed number of steps):
  jaxattn         ``jaxattn.copyhead.train`` (the engine): the whole grid, one compile, the loss from the
                  token co-occurrence counts (compile excluded: the grid is timed warm);
  torch           the same runs one at a time in a plain PyTorch CPU loop with autograd and
                  ``torch.optim.Adam`` on the per-sequence network ``f = (A X) W^T``, the way public
                  code is written; timed on one run per P (16 of the 256) and reported per run-step;
  torch, counts   the same loop on the co-occurrence formulation of jaxattn, to separate the
                  algorithmic gain from the gain of vmapping and compiling.
SGLD (L = 32, V = 4, P = 700): 256 chains vmapped in one compiled program (the chain axis sharded
over the XLA host devices) against one chain at a time (the same compiled kernel, a ``lax`` loop
over the chain's steps, called per chain, chains one after another) and a plain PyTorch loop of
one chain.

Run:  python benchmarks/copy_throughput.py           (about 3 minutes on 2 cores)
      python benchmarks/copy_throughput.py --quick   (a smoke test of the script)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import time

import jaxattn

jaxattn.use_cpu_cores()  # before JAX starts its backends: one host device per core

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import copyhead as cp  # noqa: E402
from jaxattn.copyhead import task  # noqa: E402

L, V = 32, 4


def jax_adam(Ps, n_seeds, n_steps):
    cfg = cp.CopyConfig(L=L, V=V, n_steps=n_steps, n_test=100)
    kw = dict(P=Ps, seed=list(range(n_seeds)), init=["random", "copy"])
    cp.train(cfg, **kw)  # compile
    t = time.perf_counter()
    ds = cp.train(cfg, **kw)
    dt = time.perf_counter() - t
    return ds["U"].size * n_steps / dt, ds


def _torch_data(P, seed):
    X = task.one_hot(task.tokens(cp.data.data_key(seed), P, L, V), V)
    return np.asarray(X)


def torch_adam(Ps, n_steps, counts: bool):
    import torch

    # one thread: a single small run gains nothing from more, and on a shared machine torch's
    # spinning worker threads slow it down by more than 10x (measured: 263 vs 18 steps/s)
    torch.set_num_threads(1)
    total_steps, total_t = 0, 0.0
    S = torch.roll(torch.eye(L), -1, dims=1)
    for P in Ps:
        X = torch.tensor(_torch_data(P, 0))
        Y = torch.roll(X, 1, dims=1)
        if counts:
            Xf = X.reshape(P, L * V)
            K = (Xf.T @ Xf).reshape(L, V, L, V).permute(0, 2, 1, 3).reshape(L * L, V * V)
        G = (0.1 * torch.randn(L, L)).requires_grad_()
        W = (torch.randn(V, V) / math.sqrt(V)).requires_grad_()
        opt = torch.optim.Adam([G, W], lr=0.05)
        t = time.perf_counter()
        for n in range(n_steps):
            for g in opt.param_groups:
                g["lr"] = 0.05 * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * n / n_steps)))
            opt.zero_grad()
            A = torch.softmax(G, dim=1)
            if counts:
                M = torch.stack([A.T @ A, A.T @ S]).reshape(2, L * L) @ K
                C, B = M.reshape(2, V, V)
                data = ((W @ C) * W).sum() - 2 * (W * B.T).sum() + P * L
            else:
                f = torch.einsum("lm,pmv,wv->plw", A, X, W)
                data = ((f - Y) ** 2).sum()
            U = data / (2 * L) + (W**2).sum() / 2 + (G**2).sum() / 2
            U.backward()
            opt.step()
        total_t += time.perf_counter() - t
        total_steps += n_steps
    return total_steps / total_t


def sgld_rates(P, n_chains, n_steps, one_chain=True):
    """``(vmapped, single)`` chain-steps per second; ``single`` is ``None`` without ``one_chain``
    (it runs ``n_chains / 32`` chains one after another: long for a large ``n_chains``)."""
    cfg = cp.CopyConfig(L=L, V=V, n_test=100)
    sc = cp.SGLDConfig(n_chains=n_chains, n_steps=n_steps, burn_in=0, thin=n_steps)
    cp.sample(cfg, sc, P=[P], start=["uniform"])  # compile
    t = time.perf_counter()
    cp.sample(cfg, sc, P=[P], start=["uniform"])
    vmapped = n_chains * n_steps / (time.perf_counter() - t)
    if not one_chain:
        return vmapped, None
    one = cp.SGLDConfig(n_chains=1, n_steps=n_steps, burn_in=0, thin=n_steps)
    cp.sample(cfg, one, P=[P], start=["uniform"])  # compile
    n_one = max(2, n_chains // 32)
    t = time.perf_counter()
    for c in range(n_one):  # chain c of the vmapped run, alone (its own call; one compile for all)
        cp.sample(cfg, one, P=[P], start=["uniform"], chain=[c])
    single = n_one * n_steps / (time.perf_counter() - t)
    return vmapped, single


def noise_only_rate(n_chains, n_steps):
    """The bound SGLD cannot beat: each chain only draws its Langevin noise (``L^2 + V^2`` normals
    a step, the same generator, key schedule and chain sharding as ``copy.sample``)."""
    from jaxattn.core.devices import shard_streams

    keys = shard_streams(jax.random.split(jax.random.key(0), n_chains))
    n = L * L + V * V

    @jax.jit
    def run(keys):
        def chain(key):
            def body(i, acc):
                return acc + jax.random.normal(jax.random.fold_in(key, i), (n,))
            return jax.lax.fori_loop(0, n_steps, body, jnp.zeros(n))
        return jax.vmap(chain)(keys)

    jax.block_until_ready(run(keys))
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(run(keys))
        best = min(best, time.perf_counter() - t)
    return n_chains * n_steps / best


def torch_sgld(P, n_steps):
    import torch

    torch.set_num_threads(1)
    X = torch.tensor(_torch_data(P, 0))
    Y = torch.roll(X, 1, dims=1)
    G = torch.zeros(L, L, requires_grad=True)
    W = torch.zeros(V, V, requires_grad=True)
    eps = cp.SGLDConfig().step_sizes(cp.CopyConfig(L=L, V=V).arch, [P])
    eG, eW = float(eps.G[0]), float(eps.W[0])
    t = time.perf_counter()
    for _ in range(n_steps):
        A = torch.softmax(G, dim=1)
        f = torch.einsum("lm,pmv,wv->plw", A, X, W)
        U = ((f - Y) ** 2).sum() / (2 * L) + (W**2).sum() / 2 + (G**2).sum() / 2
        gG, gW = torch.autograd.grad(U, [G, W])
        with torch.no_grad():
            G -= eG * gG - math.sqrt(2 * eG) * torch.randn_like(G)
            W -= eW * gW - math.sqrt(2 * eW) * torch.randn_like(W)
    return n_steps / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    n_P, n_seeds, adam_steps, torch_steps = (4, 2, 50, 20) if a.quick else (16, 8, 500, 200)
    chains, sgld_steps = (16, 50) if a.quick else (256, 1000)
    Ps = np.unique(np.geomspace(100, 1000, n_P).astype(int)).tolist()
    rows = []
    r_jax, ds = jax_adam(Ps, n_seeds, adam_steps)
    has_torch = importlib.util.find_spec("torch") is not None  # the baseline is optional (the bench extra)
    grid = f"{len(Ps)} P x {n_seeds} seeds x 2 inits = {ds['U'].size} runs"
    rows.append(("Adam", "jaxattn, grid vmapped (counts)", grid, r_jax, 1.0))
    if has_torch:
        r_torch = torch_adam(Ps, torch_steps, counts=False)
        r_torch_c = torch_adam(Ps, torch_steps, counts=True)
        rows.append(("Adam", "torch, one run at a time (per-sequence)", "same runs", r_torch, r_jax / r_torch))
        rows.append(("Adam", "torch, one run at a time (counts)", "same runs", r_torch_c, r_jax / r_torch_c))
    else:
        print("torch is not installed (pip install -e '.[bench]'): its rows are left out")
    v, s = sgld_rates(700, chains, sgld_steps)
    rn = noise_only_rate(chains, sgld_steps)
    rows.append(("SGLD", f"jaxattn, {chains} chains vmapped", "P = 700", v, 1.0))
    rows.append(("SGLD", "jaxattn, one chain at a time", "P = 700", s, v / s))
    if has_torch:
        rt = torch_sgld(700, max(20, sgld_steps // 10))
        rows.append(("SGLD", "torch, one chain (per-sequence)", "P = 700", rt, v / rt))
    rows.append(("SGLD", f"bound: {chains} chains drawing only their noise", "-", rn, v / rn))
    print(f"\nCopy task, L = {L}, V = {V}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, {len(jax.devices())} XLA host devices\n")
    print("| method | implementation | grid | run-steps / s | jaxattn speed-up |")
    print("|---|---|---|---:|---:|")
    for m, impl, g, r, x in rows:
        cell = f"jaxattn at {x:.0%} of it" if impl.startswith("bound") else f"{x:.1f}x"
        print(f"| {m} | {impl} | {g} | {r:,.0f} | {cell} |")
    print(json.dumps({impl: round(r, 1) for _, impl, _, r, _ in rows}))


if __name__ == "__main__":
    main()
