"""Claim (Spec A, section 4): final error against signal strength and against H for softmax,
softmax-1 and Bayes-softmax, with the Bayes risk drawn in. Claimed: softmax keeps an error floor as
the signal grows, softmax-1 goes to zero, Bayes-softmax reaches the Bayes risk once H covers the
support.

1. Online SGD against signal strength: one-hot spikes F = 2, L = 4, H = 2; D = 200, eta = 1,
   t = 200, 2 seeds; the signal grid is one compile per activation, and the three activations see
   the same data stream (common random numbers).
2. Where training ends, against signal strength: the minima of R(M, Q, b)
   (`slm_risk.minimise_risk`, L-BFGS on Q = M M^T + A A^T; the end points of gradient flow, reached
   without integrating the slow, for softmax-1 stiff, approach). Each (activation, nu) starts from
   the prior's support (head h on support point h, M = 0.8 theta_h) and from N_RAND random
   starts, all vmapped in one compile; the table gives the lowest minimum found, its risk measured
   on an independent bank of N_TEST draws (the bank the minimiser sees is small enough to be
   over-fitted). Two priors:
     (a) one-hot F = 2, H = 2 (the spec's calibration setting: the mean direction s_0 + s_1 serves
         both spikes);
     (b) signed one-hot theta = +-sqrt(nu) e_f, F = 2, H = 4 (support of 4 points, zero mean: no
         direction serves every sample, heads must specialise).
3. Against H: the signed one-hot prior of 2(b) at nu = 9, H = 1..5 (padded to 5 and masked, one
   compile per activation): the minima of R as in 2, and online SGD (D = 200, eta = 1, t = 200,
   2 seeds, the H grid one compile per activation).

Run:  python scripts/slm_activation_comparison.py     (about 10 minutes on 2 cores)
      python scripts/slm_activation_comparison.py --quick --out-dir /tmp/figs   (a smoke test:
          Bayes-softmax alone, two nu, H = 1, 2, short SGD, a few L-BFGS steps on small banks)
Writes docs/figures/slm_activation_comparison.png, docs/figures/slm_activation_vs_H.png (or the
same under --out-dir) and prints markdown tables.
"""

from __future__ import annotations

import os

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import slm  # noqa: E402
from jaxattn.plots import plt  # noqa: E402
from jaxattn.slm import priors  # noqa: E402
from jaxattn.slm import risk as slm_risk  # noqa: E402
from jaxattn.slm.bayes import bayes_risk  # noqa: E402

OPT = _options.parse(__doc__)
NUS = [1.0, 4.0, 9.0, 16.0, 25.0]
ACTS = ["softmax", "softmax1", "bayes_softmax"]
OUT, OUT_H = (os.path.join(OPT.out_dir, f) for f in ("slm_activation_comparison.png", "slm_activation_vs_H.png"))
L = 4
N_RAND = int(os.environ.get("N_RAND", 1 if OPT.quick else 3))
N_BANK, N_TEST, N_STEPS = 500, 20000, 150
HS = [1, 2, 3, 4, 5]
SGD = dict(D=200, t_max=200.0, n_records=3, n_test=2000)  # the online-SGD runs of parts 1 and 3
BAYES = dict(n=200_000)  # Monte Carlo draws of the Bayes risk
if OPT.quick:
    NUS, HS = [1.0, 16.0], [1, 2]  # nu = 16's minimum is printed
    ACTS = ["bayes_softmax"]  # each activation is compiled five times over
    N_BANK, N_TEST, N_STEPS = 50, 200, 3
    SGD = dict(D=20, t_max=2.0, n_records=3, n_test=100)
    BAYES = dict(n=1000, chunk=1000)
NU_H = 9.0
ONEHOT = priors.onehot(2, 1.0)
SIGNED = priors.discrete([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])


def starts(H, F, support, n_rand, key):
    """Initial (M, Q, b): head h on support point h (random beyond the support), then n_rand
    random starts with M ~ N(0, 0.3^2) and Q = M M^T + 0.25 I. M is in units of the signal."""
    M_rand = 0.3 * np.asarray(jax.random.normal(jax.random.split(key)[0], (n_rand + 1, H, F)))
    M_sup = M_rand[0].copy()
    k = min(H, len(support))
    M_sup[:k] = 0.8 * support[:k]
    M = np.concatenate([M_sup[None], M_rand[1:]])
    Q = M @ np.swapaxes(M, 1, 2) + 0.25 * np.eye(H)
    return M, Q, np.zeros(M.shape[:2])


def minima(prior, H_max, act, signals, M0, Q0, b0, head_masks):
    """Lowest minimum over starts for each (signal, mask) pair; M0 in units of the signal.
    Returns the risk on an independent test bank (signal, mask), and the minimiser's M there."""
    bank = slm_risk.make_bank(prior, L, H_max, n=N_BANK)
    test = slm_risk.make_bank(prior, L, H_max, n=N_TEST, key=jax.random.key(99))

    def one(sig, hm, M, Q, b):
        bk = slm_risk.Bank(bank.z, bank.theta * sig, bank.weight)
        r = slm_risk.minimise_risk(sig * M, sig**2 * Q, b, bk, act, head_mask=hm, n_steps=N_STEPS)
        tb = slm_risk.Bank(test.z, test.theta * sig, test.weight)
        return slm_risk.risk(r.M, r.Q, r.b, tb, act, head_mask=hm), r.risk, r.M, r.grad_norm

    over_starts = jax.vmap(one, in_axes=(None, None, 0, 0, 0))
    f = jax.jit(jax.vmap(over_starts, in_axes=(0, 0, None, None, None)))
    r_test, r_train, M, gn = f(jnp.asarray(signals), jnp.asarray(head_masks), jnp.asarray(M0),
                               jnp.asarray(Q0), jnp.asarray(b0))
    best = np.argmin(np.asarray(r_train), axis=1)
    idx = np.arange(len(best))
    return np.asarray(r_test)[idx, best], np.asarray(M)[idx, best], float(np.max(np.asarray(gn)[idx, best]))


def table(title, rows, cols, cells):
    print(f"\n{title}")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r, c in zip(rows, cells):
        print(f"| {r} | " + " | ".join(c) + " |")


def main():
    with jax.enable_x64(True):
        br = {"onehot": [bayes_risk(priors.onehot(2, nu), L, **BAYES).risk for nu in NUS],
              "signed": [bayes_risk(priors.discrete(np.sqrt(nu) * np.asarray(SIGNED.support)), L,
                                    **BAYES).risk for nu in NUS]}

    # 1. online SGD against nu
    sgd = {}
    for act in ACTS:
        cfg = slm.SLMConfig(prior=ONEHOT, activation=act, **SGD)
        ds = slm.train(cfg, seed=[0, 1], H=2, L=L, eta=1.0, signal=np.sqrt(NUS))
        sgd[act] = ds["error"].isel(H=0, L=0, eta=0, time=-1).values  # (seed, signal)
    table("Online SGD (one-hot F = 2, H = 2, D = 200, t = 200), seed mean", NUS,
          ["nu", "Bayes risk", *ACTS],
          [[f"{br['onehot'][i]:.3f}"] + [f"{sgd[a][:, i].mean():.3f}" for a in ACTS] for i in range(len(NUS))])

    # 2. minima of R against nu
    ends, gmax = {}, 0.0
    with jax.enable_x64(True):
        for name, prior, H in (("onehot", ONEHOT, 2), ("signed", SIGNED, 4)):
            M0, Q0, b0 = starts(H, 2, np.asarray(prior.support), N_RAND, jax.random.key(1))
            masks = np.ones((len(NUS), H), bool)
            for act in ACTS:
                r, M, g = minima(prior, H, act, np.sqrt(NUS), M0, Q0, b0, masks)
                ends[name, act] = (r, M)
                gmax = max(gmax, g)
    for name, H in (("onehot", 2), ("signed", 4)):
        lab = "one-hot F = 2, H = 2" if name == "onehot" else "signed one-hot +-sqrt(nu) e_f, F = 2, H = 4"
        table(f"Minima of R ({lab}; lowest over {N_RAND + 1} starts, risk on {N_TEST} fresh draws)", NUS,
              ["nu", "Bayes risk", *ACTS],
              [[f"{br[name][i]:.3f}"] + [f"{ends[name, a][0][i]:.3f}" for a in ACTS] for i in range(len(NUS))])
    print(f"largest gradient norm at the lowest minima (after {N_STEPS} L-BFGS steps): {gmax:.1e}")
    for a in ACTS:
        print(f"{a}, signed one-hot, nu = 16, M / sqrt(nu) at the minimum: "
              + np.array2string(ends["signed", a][1][NUS.index(16.0)] / 4.0, precision=2).replace("\n", ""))

    fig, axs = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    panels = [("online SGD, one-hot F = 2, H = 2, D = 200, t = 200", "onehot", None),
              ("minima of R, one-hot F = 2, H = 2", "onehot", "onehot"),
              ("minima of R, signed one-hot F = 2, H = 4", "signed", "signed")]
    for ax, (title, bname, ename) in zip(axs, panels):
        for k, a in enumerate(ACTS):
            if ename is None:
                ax.errorbar(NUS, sgd[a].mean(0), yerr=sgd[a].std(0), marker="o", capsize=3, color=f"C{k}", label=a)
            else:
                ax.plot(NUS, ends[ename, a][0], marker="o", color=f"C{k}", label=a)
        ax.plot(NUS, br[bname], "k--", label="Bayes risk")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("signal strength nu")
        ax.legend(fontsize=7)
    axs[0].set_ylabel("final error")
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    print(f"figure: {os.path.relpath(OUT)}")

    # 3. against H (signed one-hot, nu = NU_H)
    Hm, sig = max(HS), np.sqrt(NU_H)
    masks = np.stack([np.arange(Hm) < H for H in HS])
    sgd_H, end_H = {}, {}
    for act in ACTS:
        cfg = slm.SLMConfig(prior=SIGNED, activation=act, **SGD)
        ds = slm.train(cfg, seed=[0, 1], H=HS, L=L, eta=1.0, signal=sig)
        sgd_H[act] = ds["error"].isel(L=0, eta=0, signal=0, time=-1).values  # (seed, H)
    with jax.enable_x64(True):
        M0, Q0, b0 = starts(Hm, 2, np.asarray(SIGNED.support), N_RAND, jax.random.key(2))
        for act in ACTS:
            end_H[act] = minima(SIGNED, Hm, act, np.full(len(HS), sig), M0, Q0, b0, masks)[0]
        br_H = bayes_risk(priors.discrete(sig * np.asarray(SIGNED.support)), L, **BAYES).risk
    table(f"Against H (signed one-hot F = 2, nu = {NU_H:g}; Bayes risk {br_H:.3f}): online SGD at t = 200 "
          f"(2 seeds) / lowest minimum of R", HS, ["H", *ACTS],
          [[f"{sgd_H[a][:, j].mean():.3f} / {end_H[a][j]:.3f}" for a in ACTS] for j in range(len(HS))])
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for k, a in enumerate(ACTS):
        ax.plot(HS, sgd_H[a].mean(0), marker="o", ls="--", color=f"C{k}", label=f"{a}, SGD t = 200")
        ax.plot(HS, end_H[a], marker="s", color=f"C{k}", label=f"{a}, minimum of R")
    ax.axhline(br_H, color="k", ls=":", label="Bayes risk")
    ax.set_xlabel(f"H (signed one-hot, F = 2, nu = {NU_H:g}, L = {L})")
    ax.set_ylabel("final error")
    ax.set_xticks(HS)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT_H, dpi=120)
    print(f"figure: {os.path.relpath(OUT_H)}")


if __name__ == "__main__":
    main()
