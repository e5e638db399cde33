"""Claims (Spec A, section 3): the end states of specialisation, and the excursion of misplaced
heads from an uneven split to an even one.

Claimed: with Bayes-softmax, pairs of heads take single directions +-s_f; with softmax /
softmax-1, heads split along +-s_f and, with enough heads, cover the sign combinations
hierarchically; misplaced heads of an uneven split later make an excursion to an even split.

Online SGD at feasible D does not reach the end states (scripts/slm_specialisation_order.py stops
at t = 200), so the end states come from the order-parameter ODE (noise term on, eta = 1, the
D -> inf limit of online SGD at eta = 1) integrated to t = T_END:
  * from N_START random starts with the exact law of the initial overlaps at D = 300;
  * from the final state of online SGD (D = 200, eta = 1, t = T_SGD, 2 seeds): SGD as far as
    affordable, then the ODE from where it stopped.
Priors (L = 4, H = 4):
  * flipped spike theta_f = a_f r_f, a = (2.0, 1.2) (support: the 4 sign combinations);
  * signed one-hot theta = +-3 e_f, F = 2 (support: +-3 s_0, +-3 s_1).
Each head of an end state is labelled by the signs of its overlaps with |M[h, f]| > 0.5, e.g.
"+-" (on s_0 - s_1 in sign), "+0" (on +s_0 alone).

Run:  python scripts/slm_end_states.py      (about 4 minutes on 2 cores; N_START, T_END, T_SGD override)
      python scripts/slm_end_states.py --quick --out-dir /tmp/figs   (a smoke test: Bayes-softmax
          alone, 2 starts to t = 20, SGD at D = 20 to t = 2, small banks)
Writes docs/figures/slm_end_states.png, docs/figures/slm_excursion.png (or the same under
--out-dir) and prints markdown tables.
"""

from __future__ import annotations

import collections
import os
from typing import NamedTuple

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import slm  # noqa: E402
from jaxattn.plots import plt  # noqa: E402
from jaxattn.slm import ode as slm_ode  # noqa: E402
from jaxattn.slm import priors  # noqa: E402
from jaxattn.slm import risk as slm_risk  # noqa: E402
from jaxattn.slm.bayes import bayes_risk  # noqa: E402

OPT = _options.parse(__doc__)
H, L, ETA = 4, 4, 1.0
# quick: the environment's values still win
D_START, N_START = 300, int(os.environ.get("N_START", 2 if OPT.quick else 4))
T_END = float(os.environ.get("T_END", 20.0 if OPT.quick else 3000.0))
T_SGD, D_SGD = float(os.environ.get("T_SGD", 2.0 if OPT.quick else 100.0)), 20 if OPT.quick else 200
N_BANK, N_ORACLE = (100, 200) if OPT.quick else (1000, 4000)  # draws of the ODE's and the oracles' banks
BAYES = dict(n=1000, chunk=1000) if OPT.quick else dict(n=100_000)  # Monte Carlo draws of the Bayes risk
MAX_STEPS = 10_000  # per solve; a stiff point past it is reported as failed (softmax-1 gets stiff)
A = (2.0, 1.2)
CASES = [  # (name, prior, activation)
    ("flipped spike", priors.flipped_spike(list(A)), "bayes_softmax"),
    ("signed one-hot", priors.discrete([[3.0, 0.0], [-3.0, 0.0], [0.0, 3.0], [0.0, -3.0]]), "bayes_softmax"),
    ("flipped spike", priors.flipped_spike(list(A)), "softmax1"),
    ("flipped spike", priors.flipped_spike(list(A)), "softmax"),
]
# ACTS=bayes_softmax,softmax picks activations (softmax-1's long solves are stiff and slow; quick:
# Bayes-softmax alone, each activation is compiled anew)
ACTS = os.environ.get("ACTS", "bayes_softmax" if OPT.quick else "bayes_softmax,softmax1,softmax").split(",")
CASES = [c for c in CASES if c[2] in ACTS]
TS = np.concatenate([[0.0], np.geomspace(0.5, T_END, 80)])


def label(m, thr=0.5):
    """Sign pattern of one head's overlaps: '+', '-' or '0' per direction."""
    return "".join("+" if x > thr else "-" if x < -thr else "0" for x in m)


class Run(NamedTuple):
    M: np.ndarray  # (start, time, head, direction)
    risk: np.ndarray  # (start, time)
    ok: np.ndarray  # (start,): the solve succeeded


def integrate(y0, prior, act, ts=TS):
    """The ODE (eta = ETA, noise on) from each start of y0, recorded at ts."""
    cfg = slm.SLMODEConfig(prior=prior, activation=act, times=tuple(ts), n_bank=N_BANK, max_steps=MAX_STEPS)
    sol = slm.integrate(cfg, start=y0, seed=range(y0.M.shape[0]), H=H, L=L, eta=ETA)
    sol = sol.isel(H=0, L=0, eta=0, signal=0, noise=0)
    return Run(sol["M"].values, sol["risk"].values, ~sol["diverged"].values)


def sgd_then_ode(prior, act):
    cfg = slm.SLMConfig(D=D_SGD, prior=prior, activation=act, t_max=T_SGD, n_records=30, n_test=200)
    p = slm.train(cfg, seed=[0, 1], H=H, L=L, eta=ETA).isel(H=0, L=0, eta=0, signal=0)
    t_sgd = p["time"].values
    y0 = slm_ode.OrderParams(*(p[k].values[:, -1] for k in ("M", "Q", "b")))
    ts = np.concatenate([[0.0], np.geomspace(1.0, T_END - T_SGD, 50)])
    sol = integrate(y0, prior, act, ts)
    return t_sgd, p["M"].values, ts + T_SGD, sol


def oracle_risks(prior, act):
    """Risk of three candidate end states with head norms chosen by the activation's own optimum
    along a one-parameter family (scale c): heads on the 4 sign combinations c (+-a_0, +-a_1), and
    heads in pairs on single directions c (+-|a|, 0), c (0, +-|a|), |a| the prior's radius, and
    two heads on each of c (+-a_0, 0) (the split along s_0 alone); Q = M M^T, one common bias."""
    bank = slm_risk.make_bank(prior, L, H, n=N_ORACLE)
    th = np.asarray(slm_risk.theta_nodes(prior, jax.random.key(0), 10)[0])
    radius = float(np.sqrt((th**2).sum(1)).max())
    combos = np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]], float) * np.abs(th).max(0)
    singles = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], float) * radius
    split0 = np.array([[1, 0], [1, 0], [-1, 0], [-1, 0]], float) * np.abs(th).max(0)
    out = {}
    for name, M0 in (("sign combinations", combos), ("pairs on +-s_f", singles), ("2/2 on +-s_0", split0)):
        def r(c, bb, M0=jnp.asarray(M0)):
            M = c * M0
            return slm_risk.risk(M, M @ M.T + 1e-6 * jnp.eye(H), jnp.full(H, bb), bank, act)
        cc, bb = np.meshgrid(np.linspace(0.3, 2.5, 23), np.linspace(-6.0, 2.0, 17))
        out[name] = float(jnp.min(jax.jit(jax.vmap(r))(jnp.asarray(cc.ravel()), jnp.asarray(bb.ravel()))))
    return out


EXC_THR = 0.5  # a head is on a side of s_0 once |M[h, 0]| > EXC_THR (the labels' threshold)


def excursions(M, thr=EXC_THR):
    """Indices of runs (axis 0 of M[run, time, head, f]) whose split along s_0 was uneven at some
    time (|n+ - n-| >= 2 with every head on a side) and is even at the end."""
    npl, nmi = (M[..., 0] > thr).sum(-1), (M[..., 0] < -thr).sum(-1)
    uneven = (np.abs(npl - nmi) >= 2) & (npl + nmi == M.shape[2])
    even_end = (npl[:, -1] == nmi[:, -1]) & (npl[:, -1] + nmi[:, -1] == M.shape[2])
    return [i for i in range(M.shape[0]) if uneven[i].any() and even_end[i]]


def main():
    jax.config.update("jax_enable_x64", True)
    results = []
    for name, prior, act in CASES:
        y0 = slm_ode.random_initial_conditions(jax.random.key(1), H, 2, D=D_START, n=N_START)
        sol = integrate(y0, prior, act)
        t_sgd, M_sgd, t_cont, cont = sgd_then_ode(prior, act)
        results.append(dict(name=name, act=act, prior=prior, sol=sol, t_sgd=t_sgd, M_sgd=M_sgd, t_cont=t_cont,
                            cont=cont, oracle=oracle_risks(prior, act),
                            bayes=bayes_risk(prior, L, **BAYES).risk))
        print(f"done: {act}, {name}", flush=True)

    print(f"\nEnd states at t = {T_END:g} (ODE, eta = {ETA:g}, noise on); head labels: signs of M[h, (0, 1)]")
    print("| activation | prior | from | end states (count of runs) | final risk | oracle: sign combinations | oracle: pairs on +-s_f | oracle: 2/2 on +-s_0 | Bayes risk |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for src, sol in (("random start D = 300", r["sol"]), (f"SGD to t = {T_SGD:g}, then ODE", r["cont"])):
            # a failed solve (max_steps reached) has no end state: it is counted, not labelled
            pats = collections.Counter(" ".join(sorted(label(m) for m in Mr[-1])) for Mr in sol.M[sol.ok])
            cell = "; ".join(f"{k} ({v})" for k, v in pats.most_common())
            ok = "" if sol.ok.all() else f"; {(~sol.ok).sum()} solve(s) failed"
            print(f"| {r['act']} | {r['name']} | {src} | {cell}{ok} | {np.mean(sol.risk[sol.ok, -1]):.3f} | "
                  f"{r['oracle']['sign combinations']:.3f} | {r['oracle']['pairs on +-s_f']:.3f} | "
                  f"{r['oracle']['2/2 on +-s_0']:.3f} | {r['bayes']:.3f} |")
    print("\nSGD states at t = T_SGD (seed 0, 1):")
    for r in results:
        print(f"- {r['act']}, {r['name']}: " + "; ".join(" ".join(sorted(label(m) for m in Ms[-1])) for Ms in r["M_sgd"]))

    # squeeze=False: ACTS=softmax leaves one case, and one axis
    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 4), squeeze=False)
    axes = axes[0]
    for ax, r in zip(axes, results):
        th = np.asarray(slm_risk.theta_nodes(r["prior"], jax.random.key(0), 10)[0])
        ax.scatter(th[:, 0], th[:, 1], marker="x", s=80, color="k", label="prior support")
        for i, Mr in enumerate(r["sol"].M):
            for h in range(H):
                ax.plot(Mr[:, h, 0], Mr[:, h, 1], color=f"C{i}", lw=0.6, alpha=0.5)
            ax.scatter(Mr[-1, :, 0], Mr[-1, :, 1], color=f"C{i}", s=25, zorder=3)
        for Mr in r["cont"].M:
            ax.scatter(Mr[-1, :, 0], Mr[-1, :, 1], facecolor="none", edgecolor="k", s=90, zorder=4)
        ax.set_title(f"{r['act']}, {r['name']}", fontsize=9)
        ax.set_xlabel("M[h, 0]")
        ax.set_ylabel("M[h, 1]")
        ax.set_aspect("equal", "datalim")
    axes[0].scatter([], [], facecolor="none", edgecolor="k", s=90, label="SGD then ODE, end")
    axes[0].scatter([], [], color="C0", s=25, label="ODE from random start, end")
    axes[0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"end states at t = {T_END:g}, H = {H}, L = {L} (lines: ODE paths, colour: start)", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(OPT.out_dir, "slm_end_states.png"), dpi=110)

    # the excursion: the first run (ODE from random starts, or SGD then ODE) with an uneven
    # split along s_0 that ends even
    found = None
    for r in results:
        if r["name"] != "flipped spike":
            continue
        for i in excursions(r["sol"].M):
            found = found or (r, "ODE from a random start (D = 300)", TS, r["sol"].M[i])
        Mc = np.concatenate([r["M_sgd"], r["cont"].M], axis=1)
        for i in excursions(Mc):
            found = found or (r, f"SGD (D = {D_SGD}) to t = {T_SGD:g}, then ODE", np.concatenate([r["t_sgd"], r["t_cont"]]), Mc[i])
    counts = {f"{r['act']}": (len(excursions(r["sol"].M)), N_START) for r in results if r["name"] == "flipped spike"}
    print(f"\nruns with an uneven split along s_0 ending even (ODE from random starts): {counts}")
    if found is None:
        print("no excursion found")
        return
    r, src, t, M = found
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
    for h in range(H):
        a.plot(t, M[:, h, 0], label=f"head {h}")
        b.plot(t, M[:, h, 1], label=f"head {h}")
    for ax, f in ((a, 0), (b, 1)):
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlabel("t = samples / D")
        ax.set_ylabel(f"M[h, {f}]")
        ax.axhline(0, color="k", lw=0.5)
    a.legend(fontsize=7)
    fig.suptitle(f"{r['act']}, flipped spike a = {A}: {src}", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(OPT.out_dir, "slm_excursion.png"), dpi=110)
    npl, nmi = (M[..., 0] > EXC_THR).sum(-1), (M[..., 0] < -EXC_THR).sum(-1)
    tu = t[np.argmax((np.abs(npl - nmi) >= 2) & (npl + nmi == H))]
    te = t[len(t) - np.argmax(((npl != nmi) | (npl + nmi != H))[::-1])]
    print(f"excursion figure: {r['act']}, {src}: uneven split ({npl.max()}/{H - npl.max()} along s_0) at t = {tu:.0f}, "
          f"even for good from t = {te:.0f}; final M = {np.array2string(M[-1], precision=2).replace(chr(10), '')}")


if __name__ == "__main__":
    main()
