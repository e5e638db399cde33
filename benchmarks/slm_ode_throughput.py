"""Order-parameter ODEs of the single-location model: diffrax grid against scipy one point at a time.

Side by side, in one process, the same ODEs (``jaxattn.slm.ode``: drift plus SGD noise) on
the same bank of Monte Carlo draws (so the right-hand sides are the same function, to rounding):

  jaxattn   ``slm.integrate`` (the engine's ODE experiment, from given starts): the 32-point grid
            (4 starts x 8 values of eta) vmapped through one compiled diffrax solve per interval
            (Dopri5, PID step control); compile time reported apart; on one XLA host device and
            over one host device per core (``jaxattn.use_cpu_cores``, as
            ``benchmarks/slm_throughput.py`` does);
  scipy     ``scipy.integrate.solve_ivp(method="RK45")`` (the same Dormand-Prince 5(4) pair) one
            grid point at a time, with a plain NumPy right-hand side: activation, score gradient
            by hand, Cholesky of Q and its backward pass, all vectorised over the draws.

Before timing, the NumPy right-hand side is checked against ``slm_ode.rhs`` at random points
(relative difference ~1e-12 expected); after timing, the two solutions are compared.

Run:  python benchmarks/slm_ode_throughput.py            (the table of benchmarks/README.md)
      python benchmarks/slm_ode_throughput.py --quick    (a smoke test, a few seconds)
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jaxattn

jaxattn.use_cpu_cores()  # before JAX starts its backends: one host device per core

import jax  # noqa: E402
import jax.numpy as jnp
import numpy as np
import scipy
from scipy.integrate import solve_ivp

from jaxattn import slm
from jaxattn.slm import ode as slm_ode
from jaxattn.slm import priors
from jaxattn.slm.network import Arch
from jaxattn.slm.risk import make_bank

F, NU, H, L, D = 2, 4.0, 2, 4, 1000
RTOL, ATOL = 1e-5, 1e-7


# ----------------------------------------------------------------------------- NumPy RHS
def np_score_grad(chi, b, activation):
    """Per-draw attention weights' loss gradient ``g[n, h, l] = d(e/2)/d chi[n, h, l]``,
    ``e = (1 - w_0)^2 + sum_{l>0} w_l^2``, ``w_l = sum_h sigma[h, l]`` (heads summed)."""
    z = chi + b[None, :, None]
    if activation == "bayes_softmax":  # one softmax over heads and positions together
        m = z.max(axis=(1, 2), keepdims=True)
        e = np.exp(z - m)
        sigma = e / e.sum(axis=(1, 2), keepdims=True)
    elif activation == "softmax1":  # per head, with an extra logit-0 entry
        m = np.maximum(z.max(axis=2, keepdims=True), 0.0)
        e = np.exp(z - m)
        sigma = e / (np.exp(-m) + e.sum(axis=2, keepdims=True))
    else:
        raise ValueError(activation)
    w = sigma.sum(axis=1)  # (n, L)
    r = w.copy()
    r[:, 0] -= 1.0  # d(e/2)/dw_l = w_l - 1[l = 0]
    if activation == "bayes_softmax":  # d sigma_hl / d z_h'l' = sigma_hl (delta - sigma_h'l')
        return sigma * (r[:, None, :] - np.sum(r * w, axis=1)[:, None, None])
    # softmax1: the same within each head
    return sigma * (r[:, None, :] - np.einsum("nl,nhl->nh", r, sigma)[:, :, None])


def np_sums(C, M, b, z, theta, weight, activation):
    """The bank-weighted sums of one block of draws: ``dL/dM``, ``dL/dC``, ``dL/db`` and the
    ``E[g g^T]`` of the noise term."""
    chi = np.einsum("hk,nlk->nhl", C, z)  # (n, H, L)
    chi[:, :, 0] += theta @ M.T
    g = np_score_grad(chi, b, activation)
    gw = g * weight[:, None, None]
    gM = np.einsum("nh,nf->hf", gw[:, :, 0], theta)  # dL/dM = E[g[:, 0] theta^T]
    gC = np.einsum("nhl,nlk->hk", gw, z)  # dL/dC = E[sum_l g[:, l] z_l^T]
    return gM, gC, gw.sum(axis=(0, 2)), np.einsum("nhl,nkl->hk", gw, g)


def np_rhs(M, Q, b, eta, z, theta, weight, activation, chunk=None):
    """``(dM/dt, dQ/dt, db/dt)`` of ``slm_ode.rhs`` (all heads and positions real, noise on);
    ``chunk``: draws per block (a large bank read in blocks stays in cache)."""
    Hn = Q.shape[0]
    jitter = 1e-10 * (1.0 + np.max(np.abs(np.diag(Q))))
    C = np.linalg.cholesky(0.5 * (Q + Q.T) + jitter * np.eye(Hn))
    step = chunk or len(z)
    parts = [np_sums(C, M, b, z[i:i + step], theta[i:i + step], weight[i:i + step], activation)
             for i in range(0, len(z), step)]
    gM, gC, gb, noise = (sum(x) for x in zip(*parts))
    # Cholesky backward: dL/dQ = C^{-T} Phi(C^T dL/dC) C^{-1}, symmetrised
    P = np.tril(C.T @ gC)
    P[np.diag_indices(Hn)] *= 0.5
    Ci = np.linalg.inv(C)
    S = Ci.T @ P @ Ci
    gQ = 0.5 * (S + S.T)
    dM = -eta * (gM + 2.0 * gQ @ M)
    dQ = -eta * (gM @ M.T + M @ gM.T + 2.0 * (gQ @ Q + Q @ gQ)) + eta**2 * noise
    return dM, 0.5 * (dQ + dQ.T), -eta * gb


def pack(M, Q, b):
    return np.concatenate([M.ravel(), Q.ravel(), b.ravel()])


def unpack(y):
    return y[: H * F].reshape(H, F), y[H * F: H * F + H * H].reshape(H, H), y[H * F + H * H:]


def scipy_point(M0, Q0, b0, eta, bank_np, ts, activation, chunk=None):
    z, theta, weight = bank_np

    def f(t, y):
        return pack(*np_rhs(*unpack(y), eta, z, theta, weight, activation, chunk))

    sol = solve_ivp(f, (0.0, ts[-1]), pack(M0, Q0, b0), method="RK45", rtol=RTOL, atol=ATOL, t_eval=ts)
    return sol


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: small bank, short times, 2 scipy points")
    ap.add_argument("--activation", default="bayes_softmax", choices=["bayes_softmax", "softmax1"])
    ap.add_argument("--points", type=int, default=32)
    ap.add_argument("--n-bank", type=int, default=2000, help="Gaussian score draws (x F latents)")
    ap.add_argument("--scipy-points", type=int, default=None,
                    help="grid points integrated by scipy (default: all, or 4 if a first point "
                         "says all would take over 5 minutes)")
    ap.add_argument("--repeats", type=int, default=3, help="timed jaxattn repeats (best kept)")
    opt = ap.parse_args()
    if opt.quick:
        opt.n_bank, opt.scipy_points, opt.repeats = 200, 2, 1
    ts_list = [0.0, 0.5, 1.0] if opt.quick else [0.0, 1.0, 2.0, 5.0, 10.0]
    act, n = opt.activation, opt.points

    with jax.enable_x64(True):
        arch = Arch(act)
        prior = priors.astype(priors.onehot(F, NU), jnp.float64)
        bank = make_bank(prior, L, H, n=opt.n_bank, key=jax.random.key(1))
        bank_np = tuple(np.asarray(x) for x in bank)
        n_starts = 4  # the grid: n_starts starts x n / n_starts values of eta
        etas = np.linspace(0.2, 2.0, n // n_starts)
        y0 = slm_ode.random_initial_conditions(jax.random.key(2), H, F, D=D, n=n_starts)
        # point i: start i // len(etas), eta etas[i % len(etas)] (the engine's grid order, seed first)
        points = [(i // len(etas), float(etas[i % len(etas)])) for i in range(n)]
        args = slm_ode.ODEArgs(jnp.asarray([e for _, e in points]), jnp.ones(n), jnp.ones(n), jnp.ones((n, H), bool),
                               jnp.ones((n, L), bool))
        config = slm.SLMODEConfig(D=D, prior=priors.onehot(F, NU), activation=act, times=tuple(ts_list),
                                  n_bank=opt.n_bank, bank_method="mc", bank_seed=1, rtol=RTOL, atol=ATOL)

        # 1. the NumPy right-hand side equals slm_ode.rhs
        rng = np.random.default_rng(0)
        worst = 0.0
        for i in range(4):
            A = rng.normal(size=(H, H))
            y = slm_ode.OrderParams(
                jnp.asarray(rng.normal(size=(H, F))), jnp.asarray(A @ A.T + 0.5 * np.eye(H)),
                jnp.asarray(rng.normal(size=H)))
            a = jax.tree_util.tree_map(lambda x: x[i], args)
            ref = jax.jit(slm_ode.rhs, static_argnums=3)(y, a, bank, arch)
            got = np_rhs(*(np.asarray(v) for v in y), points[i][1], *bank_np, act)
            num = max(np.max(np.abs(np.asarray(r) - g)) for r, g in zip(ref, got))
            den = max(np.max(np.abs(np.asarray(r))) for r in ref)
            worst = max(worst, num / den)
        print(f"# NumPy RHS vs slm_ode.rhs at 4 random points: max relative difference {worst:.1e}")
        assert worst < 1e-8, worst

        # cost of one right-hand side per grid point: vmapped slm_ode.rhs over the grid, and NumPy
        vrhs = jax.jit(jax.vmap(lambda y, a: slm_ode.rhs(y, a, bank, arch, slm_ode.default_chunk())))
        y_pts = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64)[np.array([j for j, _ in points])], y0)
        jax.block_until_ready(vrhs(y_pts, args))
        t0 = time.perf_counter()
        for _ in range(10):
            out = vrhs(y_pts, args)
        jax.block_until_ready(out)
        c_jax = (time.perf_counter() - t0) / 10 / n
        yy = [np.asarray(v[0], np.float64) for v in y0]
        t0 = time.perf_counter()
        for _ in range(10):
            np_rhs(*yy, points[0][1], *bank_np, act)
        c_np = (time.perf_counter() - t0) / 10

        # 2. jaxattn: compile, then best of `repeats`; one device, then over all the devices
        def timed(devices):
            def go():
                return slm.integrate(config, start=y0, seed=range(n_starts), eta=list(etas), devices=devices)

            t0 = time.perf_counter()
            s = go()
            t_first = time.perf_counter() - t0
            best = np.inf
            for _ in range(opt.repeats):
                t0 = time.perf_counter()
                s = go()
                best = min(best, time.perf_counter() - t0)
            assert not bool(s["diverged"].any()), "a diffrax solve failed"
            return s["M"].values.reshape(n, len(ts_list), H, F), best, t_first - best

        M_jax, t_jax, t_compile = timed(jax.devices()[:1])
        n_dev = len(jax.devices())
        if n_dev > 1:
            M_sh, t_jax_sh, _ = timed(jax.devices())
            assert np.array_equal(M_sh, M_jax)  # the engine gives the same bits on any devices

        # 3. scipy one point at a time
        y0_np = [np.asarray(v, np.float64) for v in y0]
        ts_np = np.asarray(ts_list)
        k_sp = opt.scipy_points
        order = list(range(n))
        t_sp, n_sp, nfev, diffs = 0.0, 0, 0, []
        for i in order:
            if k_sp is not None and n_sp >= k_sp:
                break
            t0 = time.perf_counter()
            j, eta = points[i]
            s = scipy_point(y0_np[0][j], y0_np[1][j], y0_np[2][j], eta, bank_np, ts_np, act)
            t_sp += time.perf_counter() - t0
            n_sp += 1
            nfev += s.nfev
            assert s.success, s.message
            M_end = s.y[: H * F, -1].reshape(H, F)
            diffs.append(np.max(np.abs(M_end - M_jax[i, -1])))
            if k_sp is None and n_sp == 1 and t_sp * n > 300:
                k_sp = 4  # all points would take over 5 minutes: time a subset, scale per point
                print(f"# scipy: first point took {t_sp:.1f} s; timing {k_sp} points")
        per_pt = t_sp / n_sp
        t_sp_all = per_pt * n
        scaled = n_sp < n

    # 4. table
    print(f"# {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}, scipy {scipy.__version__}, "
          f"numpy {np.__version__}, backend {jax.default_backend()}, {len(jax.devices())} XLA device(s)")
    print(f"# one-hot prior F={F} nu={NU:g}, H={H}, L={L}, {act}, {n} points ({n_starts} starts x {len(etas)} values of eta in [0.2, 2]), "
          f"D={D} random starts; bank {opt.n_bank} x {F} = {bank.z.shape[0]} weighted draws shared by both; "
          f"t = {ts_list}; rtol={RTOL:g}, atol={ATOL:g}")
    print(f"# one RHS evaluation per grid point: {1e3 * c_jax:.2f} ms (slm_ode.rhs vmapped over the grid, "
          f"1 device), {1e3 * c_np:.2f} ms (NumPy)")
    print(f"# jaxattn compile {t_compile:.2f} s (excluded); best of {opt.repeats} warm runs")
    print(f"# scipy: {n_sp} of {n} points integrated, {nfev / n_sp:.0f} RHS evaluations per point"
          + (f"; wall time scaled to {n} points from {t_sp:.1f} s" if scaled else ""))
    print(f"# max |M_jaxattn - M_scipy| at t = {ts_list[-1]:g} over the {n_sp} points: {max(diffs):.1e} "
          f"(|M| up to {float(np.max(np.abs(M_jax[:, -1]))):.2f})")
    rows = [("jaxattn, `slm.integrate` (diffrax Dopri5, vmapped, one compile), 1 XLA device", n, t_jax)]
    if n_dev > 1:
        rows.append((f"jaxattn, the same, grid sharded over {n_dev} XLA host devices", n, t_jax_sh))
    sp_n = f"{n} ({n_sp} timed, scaled)" if scaled else f"{n}"
    rows.append(("scipy `solve_ivp` RK45, NumPy RHS, one point at a time", sp_n, t_sp_all))
    print("| implementation | grid points | wall time (s) | points / s | time / fastest jaxattn |")
    print("|---|---:|---:|---:|---:|")
    best = min(r[2] for r in rows[:-1])
    for name, pts, t in rows:
        print(f"| {name} | {pts} | {t:.2f} | {n / t:.2f} | {t / best:.1f}x |")
    print(f"# speed-up of jaxattn over scipy: {t_sp_all / t_jax:.1f}x (1 device)"
          + (f", {t_sp_all / t_jax_sh:.1f}x (sharded)" if n_dev > 1 else "") + "; target: >= 20x")
    if max(diffs) > 1e-4:  # two step controllers at rtol 1e-5 agree to about 1e-6: more is another ODE
        raise SystemExit(f"the two sides integrate different ODEs: max |dM| = {max(diffs):.1e} (same bank?)")

if __name__ == "__main__":
    main()
