"""Claim (Spec A, section 4): final error against signal strength and against H for softmax,
softmax-1 and Bayes-softmax, with the Bayes risk drawn in. Claimed: softmax keeps an error floor as
the signal grows, softmax-1 goes to zero, Bayes-softmax reaches the Bayes risk once H covers the
support.

1. Against signal strength: one-hot spikes F = 2, L = 4, H = 2; online SGD at D = 200, eta = 1,
   up to t = 200, 2 seeds; the signal grid is one compile per activation (a grid axis), and the
   three activations see the same data stream (common random numbers).
2. The same, by the order-parameter ODE (noise term on, eta = 1: online SGD as D -> inf) to
   t = T_ODE, from 4 random starts (exact law of the initial overlaps at D = 200) and from a
   specialised start (head h on s_h: M = 0.8 sqrt(nu) I, Q = M M^T + 0.1 I, b = 0). The ODE
   reaches the end states SGD does not reach at this budget; it is where the softmax floor is
   looked for.
3. Against H: one-hot spikes F = 3, nu = 9, L = 4, H = 1..5; online SGD (D = 200, eta = 1,
   t = 200, 2 seeds, the H grid one compile per activation) and the ODE to t = T_ODE from 4 random
   starts (H padded to 5 and masked, one compile per activation).

Run:  python scripts/slm_activation_comparison.py
      (part 1 takes about 3 minutes on 2 cores. Parts 2 and 3 had not finished after 6 minutes
      on a shared 2-core machine, because the softmax-1 ODE solves are stiff; they have not yet
      been run to the end. T_ODE=... shortens them.)
Writes docs/figures/slm_activation_comparison.png, docs/figures/slm_activation_vs_H.png and
prints markdown tables.
"""

from __future__ import annotations

import os

import jaxattn

jaxattn.use_cpu_cores()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import priors, slm  # noqa: E402
from jaxattn.models.multihead import Arch  # noqa: E402
from jaxattn.plots import plt  # noqa: E402
from jaxattn.theory import slm_ode, slm_risk  # noqa: E402
from jaxattn.theory.slm_bayes import bayes_risk  # noqa: E402

NUS = [1.0, 4.0, 9.0, 16.0, 25.0]
ACTS = ["softmax", "softmax1", "bayes_softmax"]
OUT = os.path.join(os.path.dirname(__file__), "..", "docs", "figures", "slm_activation_comparison.png")
OUT_H = os.path.join(os.path.dirname(__file__), "..", "docs", "figures", "slm_activation_vs_H.png")
T_ODE = float(os.environ.get("T_ODE", 2000.0))
N_RAND = 4
MAX_STEPS = 20_000  # per solve; a stiff point past it is reported as failed (softmax-1 gets stiff)
HS = [1, 2, 3, 4, 5]
PRIOR_H = priors.onehot(3, 9.0)


def ode_final(prior, L, H_max, y0, signal, head_mask, act):
    """Final risk and state of the noisy ODE (eta = 1) at T_ODE for a grid of starts."""
    n = y0.M.shape[0]
    args = slm_ode.ODEArgs(jnp.ones(n), jnp.asarray(signal, float), jnp.ones(n), jnp.asarray(head_mask),
                           jnp.ones((n, L), bool))
    bank = slm_risk.make_bank(prior, L, H_max, n=1000)
    ts = jnp.asarray([0.0, T_ODE / 10, T_ODE])
    sol = slm_ode.integrate_grid(y0, args, bank, ts, Arch(act), max_steps=MAX_STEPS)
    return jax.tree_util.tree_map(np.asarray, sol)


def ode_against_signal(act):
    """Final risk (start, nu) from N_RAND random starts and one specialised start, and whether
    the two heads ended specialised (|M[0, 0] - M[1, 0]| > 1)."""
    y_r = slm_ode.random_initial_conditions(jax.random.key(3), 2, 2, D=200, n=N_RAND)
    Ms, Qs, bs, sig = [], [], [], []
    for nu in NUS:
        for i in range(N_RAND + 1):
            if i < N_RAND:
                Ms.append(y_r.M[i]), Qs.append(y_r.Q[i])
            else:
                M = 0.8 * np.sqrt(nu) * np.eye(2)
                Ms.append(jnp.asarray(M)), Qs.append(jnp.asarray(M @ M.T + 0.1 * np.eye(2)))
            bs.append(jnp.zeros(2)), sig.append(np.sqrt(nu))
    y0 = slm_ode.OrderParams(jnp.stack(Ms), jnp.stack(Qs), jnp.stack(bs))
    sol = ode_final(priors.onehot(2, 1.0), 4, 2, y0, sig, np.ones((len(sig), 2), bool), act)
    risk = sol.risk[:, -1].reshape(len(NUS), N_RAND + 1)
    spec = (np.abs(sol.M[:, -1, 0, 0] - sol.M[:, -1, 1, 0]) > 1).reshape(len(NUS), N_RAND + 1)
    return risk, spec, sol.ok.reshape(len(NUS), N_RAND + 1), sol.M[:, -1].reshape(len(NUS), N_RAND + 1, 2, 2)


def ode_against_H(act):
    Hm = max(HS)
    y_r = slm_ode.random_initial_conditions(jax.random.key(4), Hm, 3, D=200, n=N_RAND)
    y0 = jax.tree_util.tree_map(lambda x: jnp.concatenate([x] * len(HS)), y_r)
    mask = np.concatenate([np.tile(np.arange(Hm) < H, (N_RAND, 1)) for H in HS])
    sol = ode_final(PRIOR_H, 4, Hm, y0, np.ones(len(mask)), mask, act)
    return sol.risk[:, -1].reshape(len(HS), N_RAND), sol.ok.reshape(len(HS), N_RAND)


def main():
    base = priors.onehot(2, 1.0)
    final = {}
    for act in ACTS:
        cfg = slm.SLMConfig(D=200, prior=base, activation=act, t_max=200.0, n_records=3, n_test=2000)
        ds = slm.train(cfg, seed=[0, 1], H=2, L=4, eta=1.0, signal=np.sqrt(NUS))
        final[act] = ds["error"].isel(H=0, L=0, eta=0, time=-1).values  # (seed, signal)
    with jax.enable_x64(True):
        br = [bayes_risk(priors.onehot(2, nu), 4, n=200_000).risk for nu in NUS]

    print("| nu | Bayes risk | " + " | ".join(ACTS) + " |")
    print("|---|---|" + "---|" * len(ACTS))
    for i, nu in enumerate(NUS):
        cells = " | ".join(f"{final[a][:, i].mean():.3f}" for a in ACTS)
        print(f"| {nu:g} | {br[i]:.3f} | {cells} |")

    with jax.enable_x64(True):
        ode = {a: ode_against_signal(a) for a in ACTS}
    print(f"\nODE (noise on, eta = 1) at t = {T_ODE:g}: final risk, mean over {N_RAND} random starts "
          f"[number of them specialised] / from the specialised start [specialised at the end?]")
    print("| nu | Bayes risk | " + " | ".join(ACTS) + " |")
    print("|---|---|" + "---|" * len(ACTS))
    for i, nu in enumerate(NUS):
        cells = []
        for a in ACTS:
            r, sp, ok, _ = ode[a]
            bad = "" if ok[i].all() else f" ({(~ok[i]).sum()} failed)"
            cells.append(f"{r[i, :N_RAND].mean():.3f} [{sp[i, :N_RAND].sum()}] / {r[i, -1]:.3f} "
                         f"[{'yes' if sp[i, -1] else 'no'}]{bad}")
        print(f"| {nu:g} | {br[i]:.3f} | " + " | ".join(cells) + " |")
    for a in ACTS:
        print(f"{a}: final M from the specialised start at nu = 16: "
              + np.array2string(ode[a][3][NUS.index(16.0), -1], precision=2).replace("\n", ""))

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for k, a in enumerate(ACTS):
        ax.errorbar(NUS, final[a].mean(0), yerr=final[a].std(0), marker="o", capsize=3, label=a)
        r, sp, _, _ = ode[a]
        ax2.plot(NUS, r[:, :N_RAND].mean(1), marker="o", color=f"C{k}", label=f"{a}, random starts")
        ax2.plot(NUS, r[:, -1], marker="s", ls=":", color=f"C{k}", label=f"{a}, specialised start")
    for x in (ax, ax2):
        x.plot(NUS, br, "k--", label="Bayes risk")
        x.set_xlabel("signal strength nu (one-hot, F = 2, L = 4, H = 2)")
        x.legend(fontsize=7)
    ax.set_ylabel("final error")
    ax.set_title("online SGD, D = 200, t = 200", fontsize=9)
    ax2.set_title(f"ODE (D -> inf, eta = 1, noise on), t = {T_ODE:g}", fontsize=9)
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    print(f"figure: {os.path.relpath(OUT)}")

    # against H
    sgd_H = {}
    for act in ACTS:
        cfg = slm.SLMConfig(D=200, prior=PRIOR_H, activation=act, t_max=200.0, n_records=3, n_test=2000)
        ds = slm.train(cfg, seed=[0, 1], H=HS, L=4, eta=1.0)
        sgd_H[act] = ds["error"].isel(L=0, eta=0, signal=0, time=-1).values  # (seed, H)
    with jax.enable_x64(True):
        ode_H = {a: ode_against_H(a) for a in ACTS}
        br_H = bayes_risk(PRIOR_H, 4, n=200_000).risk
    print(f"\nAgainst H (one-hot F = 3, nu = 9, L = 4; Bayes risk {br_H:.3f}): SGD (D = 200, t = 200, "
          f"2 seeds) / ODE at t = {T_ODE:g} (mean over {N_RAND} random starts, min in brackets)")
    print("| H | " + " | ".join(ACTS) + " |")
    print("|---|" + "---|" * len(ACTS))
    for j, H in enumerate(HS):
        cells = []
        for a in ACTS:
            r, ok = ode_H[a]
            bad = "" if ok[j].all() else f" ({(~ok[j]).sum()} failed)"
            cells.append(f"{sgd_H[a][:, j].mean():.3f} / {r[j].mean():.3f} ({r[j].min():.3f}){bad}")
        print(f"| {H} | " + " | ".join(cells) + " |")
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for k, a in enumerate(ACTS):
        ax.plot(HS, sgd_H[a].mean(0), marker="o", ls="--", color=f"C{k}", label=f"{a}, SGD t = 200")
        ax.errorbar(HS, ode_H[a][0].mean(1), yerr=ode_H[a][0].std(1), marker="s", capsize=3, color=f"C{k}",
                    label=f"{a}, ODE t = {T_ODE:g}")
    ax.axhline(br_H, color="k", ls=":", label="Bayes risk")
    ax.set_xlabel("H (one-hot, F = 3, nu = 9, L = 4)")
    ax.set_ylabel("final error")
    ax.set_xticks(HS)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT_H, dpi=120)
    print(f"figure: {os.path.relpath(OUT_H)}")


if __name__ == "__main__":
    main()
