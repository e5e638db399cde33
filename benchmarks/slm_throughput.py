"""Online-SGD throughput on the single-location model (samples x runs per second).

Side by side, in one process:
  jaxattn   a grid of independent runs (one seed each, so one data stream each) stepped by
            ``jaxattn.runners.online_sgd.advance`` (vmapped, one compile);
  draw-only the bare cost of drawing the same Gaussian tokens with the same generator, in the
            same vmapped loop, and nothing else: the bound online SGD cannot beat;
  torch     the same runs one at a time in a plain PyTorch CPU loop with autograd, the way public
            code in this field is written.

On the CPU, XLA runs the small per-run products of online SGD on one thread per program, while
the random draws parallelise across cores; so the grid is sharded over one XLA host device per
core (``jaxattn.use_cpu_cores``, as the command line does), and the draw-only bound is measured
with the same sharding. The single-device rate is reported beside it.

Run:  python benchmarks/slm_throughput.py            (both configurations of benchmarks/README.md)
      python benchmarks/slm_throughput.py --quick    (a smoke test of the script, a few seconds)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time

import jaxattn

jaxattn.use_cpu_cores()  # before JAX starts its backends: one host device per core

import jax  # noqa: E402
import jax.numpy as jnp
import numpy as np

from jaxattn import priors
from jaxattn.core.devices import shard_streams
from jaxattn.slm.network import Arch
from jaxattn.slm import sgd as osgd
from jaxattn.slm import task as slm

ACT = "bayes_softmax"


def grid(cfg, n_runs, devices):
    keys = jax.random.split(jax.random.key(0), 2 * n_runs)
    rp = osgd.RunParams(
        keys[:n_runs], keys[n_runs:], jnp.full(n_runs, 0.5), jnp.ones(n_runs),
        jnp.full(n_runs, cfg.H_max, jnp.int32), jnp.full(n_runs, cfg.L_max, jnp.int32),
    )
    rp = jax.tree_util.tree_map(lambda x: x.reshape((n_runs, 1) + x.shape[1:]), rp)  # one stream per run
    st = jax.vmap(jax.vmap(lambda r: osgd.init(cfg, r)))(rp)
    return shard_streams(rp, devices), shard_streams(st, devices)


def jaxattn_timer(cfg, S, prior, n_runs, steps, devices):
    """A function that runs ``steps`` SGD steps of the grid and returns the rate."""
    rp, st = grid(cfg, n_runs, devices)
    box = [osgd.advance(cfg, S, prior, st, rp, jnp.asarray(steps))]  # compile + warm up
    jax.block_until_ready(box[0])

    def once():
        t = time.perf_counter()
        box[0] = osgd.advance(cfg, S, prior, box[0], rp, jnp.asarray(steps))
        jax.block_until_ready(box[0])
        return steps * n_runs * cfg.batch_size / (time.perf_counter() - t)

    return once


def draw_timer(cfg, prior, n_runs, steps, devices):
    keys = shard_streams(jax.random.split(jax.random.key(1), n_runs), devices)

    @jax.jit
    def run(acc, n):
        def body(i, acc):
            d = jax.vmap(lambda k: osgd.draw_batch(cfg, prior, k, i))(keys)
            # consume every token (a cheap reduction) so that nothing is optimised away
            return acc + jnp.sum(d.noise, axis=(1, 2, 3)) + d.u.sum(1) + d.theta.sum((1, 2))
        return jax.lax.fori_loop(0, n, body, acc)

    box = [run(shard_streams(jnp.zeros(n_runs), devices), steps)]
    jax.block_until_ready(box[0])

    def once():
        t = time.perf_counter()
        box[0] = run(box[0], steps)
        jax.block_until_ready(box[0])
        return steps * n_runs * cfg.batch_size / (time.perf_counter() - t)

    return once


def time_torch(D, L, H, F, nu, steps, n_runs=2):
    """Per-run loop: fresh sample each step, autograd, manual SGD update (as public code does)."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count() or 1)
    rates = []
    for run in range(n_runs):
        g = torch.Generator().manual_seed(run)
        S = torch.linalg.qr(torch.randn(D, F, generator=g))[0].T * math.sqrt(D)
        K = torch.randn(H, D, generator=g).requires_grad_(True)
        b = torch.zeros(H, requires_grad=True)
        eta = 0.5
        t = time.perf_counter()
        for _ in range(steps):
            X = torch.randn(L, D, generator=g)
            eps = int(torch.randint(L, (1,), generator=g))
            f = int(torch.randint(F, (1,), generator=g))
            X[eps] += math.sqrt(nu) * S[f] / math.sqrt(D)
            y = X[eps]
            chi = K @ X.T / math.sqrt(D) + b[:, None]
            sigma = torch.softmax(chi.reshape(-1), 0).reshape(H, L)  # Bayes-softmax
            loss = ((y - sigma.sum(0) @ X) ** 2).sum() / (2 * D)
            gK, gb = torch.autograd.grad(loss, (K, b))
            with torch.no_grad():
                K -= eta * gK
                b -= eta / D * gb
        rates.append(steps / (time.perf_counter() - t))
    return float(np.median(rates))


def bench(D, L, H, n_runs, steps, torch_steps, F=2, nu=9.0, repeats=7):
    cfg = osgd.SGDConfig(D=D, H_max=H, L_max=L, arch=Arch(ACT))
    S = slm.latent_directions(jax.random.key(0), D, F)
    prior = priors.astype(priors.onehot(F, nu), jnp.float32)
    devs = jax.local_devices()
    t_jx = jaxattn_timer(cfg, S, prior, n_runs, steps, devs)
    t_one = jaxattn_timer(cfg, S, prior, n_runs, steps, devs[:1])
    t_draw = draw_timer(cfg, prior, n_runs, steps, devs)
    # interleaved, best of `repeats` each: all see the same machine state
    jx = one = draw = 0.0
    for _ in range(repeats):
        jx, one, draw = max(jx, t_jx()), max(one, t_one()), max(draw, t_draw())
    tor = time_torch(D, L, H, F, nu, torch_steps)
    row = dict(D=D, L=L, H=H, runs=n_runs, devices=len(devs), jaxattn=jx, jaxattn_1_device=one,
               draw_only=draw, torch_loop=tor, frac_of_draw=jx / draw, x_torch=(jx / tor if tor else None))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    a = ap.parse_args()
    if a.quick:
        cases = [dict(D=100, L=4, H=2, n_runs=8, steps=50, torch_steps=50, repeats=1)]
    else:
        cases = [dict(D=1000, L=8, H=4, n_runs=64, steps=1000, torch_steps=2000),
                 dict(D=100, L=8, H=4, n_runs=256, steps=2000, torch_steps=4000)]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__},"
          f" backend {jax.default_backend()}, activation {ACT}")
    print(f"# rates in samples x runs / s; jaxattn and draw-only sharded over {len(jax.local_devices())} host devices")
    print("| D | L | H | runs | jaxattn | jaxattn, 1 device | draw-only | torch loop | jaxattn / draw-only | jaxattn / torch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for c in cases:
        r = bench(**c)
        rows.append(r)
        tor = f"{r['torch_loop']:,.0f}" if r["torch_loop"] else "n/a"
        xt = f"{r['x_torch']:.1f}x" if r["x_torch"] else "n/a"
        print(f"| {r['D']} | {r['L']} | {r['H']} | {r['runs']} | {r['jaxattn']:,.0f} | {r['jaxattn_1_device']:,.0f} |"
              f" {r['draw_only']:,.0f} |"
              f" {tor} | {r['frac_of_draw']:.0%} | {xt} |", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
