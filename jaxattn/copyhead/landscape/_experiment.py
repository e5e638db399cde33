"""The ``copy_landscape`` experiment: one ladder of umbrella windows per
``(P, N, data_seed, chain)`` on the copy head's posterior
(:mod:`jaxattn.copyhead.landscape._windows`), an SGLD chain in each, with replica exchange between
neighbours; the windows are placed from ``(config, P, N)`` alone, so a sweep runs it as the Python
API does.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PRNGKeyArray

from jaxattn.copyhead import action
from jaxattn.copyhead._config import CopyLandscapeConfig
from jaxattn.copyhead.data import data_key, member_stats, stream_data
from jaxattn.copyhead.landscape._windows import ansatz_logits, default_range, place_windows, posterior_target
from jaxattn.core import keys, umbrella
from jaxattn.core.kernels import exchange, mala, sgld
from jaxattn.engine import Axis, Experiment, Layout, int_axis, over_groups, segments, stream_values

_RUNTIME = ("c_lo", "c_hi", "max_spacing", "spring", "step", "chain_seed")
"""The config's fields the compiled programs never read: the windows, step sizes and keys reach
them as per-point parameters."""


def _check_N(v) -> float:
    N = action.check_N(v)
    if not math.isfinite(N):
        raise ValueError("N must be finite for sampling (N = inf is the MAP point, not a posterior)")
    return N


class LandscapeStatic(NamedTuple):
    """The static (hashable) part of a :class:`CopyLandscape` run. Two are equal, and share their
    compiled programs, when they differ only in the fields of the config the programs do not read
    (the windows' placement, the step and the seed): one compile per architecture, window count,
    chain length and data size, across ``N`` and ``P`` (both per-point inputs).

    Attributes:
        config: the experiment's config.
        n_max: sequences per data stream: the grid's largest ``P`` plus ``reweight_span``,
            rounded up to a multiple of 128, so that a scan over nearby ``P`` keeps one shape.
        schedule: the chain's segments (burn-in, then draws; one per call of ``step``).
    """

    config: CopyLandscapeConfig
    n_max: int
    schedule: sgld.Schedule

    @property
    def matmul_precision(self) -> str:
        """The precision the programs' matrix products are traced at (the config's)."""
        return self.config.matmul_precision

    def _program(self) -> tuple:
        fields = dataclasses.fields(CopyLandscapeConfig)
        return (
            tuple(getattr(self.config, f.name) for f in fields if f.name not in _RUNTIME),
            self.n_max,
            self.schedule,
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, LandscapeStatic) and self._program() == other._program()

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._program())


@functools.lru_cache(maxsize=64)
def _placed(config: CopyLandscapeConfig, P: int, N: float) -> tuple[umbrella.Windows, np.ndarray, np.ndarray, float]:
    """``(windows, targets, G0, eps)`` of one ``(P, N)``: the windows (:func:`place_windows`,
    padded to ``config.n_windows``), the ansatz's ``G`` at each target, and the SGLD step, ``step``
    over ``N`` plus the bias's largest curvature along the ansatz, ``kappa |grad_G c|^2``."""
    arch = config.arch
    w, targets = place_windows(
        arch, P, N, config.c_range or default_range(arch), config.max_spacing, config.spring, config.n_windows
    )
    G0 = ansatz_logits(arch, P, N, targets)
    order = posterior_target(arch)[1]
    g2 = jax.vmap(lambda G: jnp.sum(jax.grad(order)(G) ** 2))(G0)
    return w, targets, np.asarray(G0), config.step / (N + float(w.spring[0]) * float(jnp.max(g2)))


def _shifts(config: CopyLandscapeConfig) -> np.ndarray:
    """The shifts ``d`` of ``P`` whose action a draw records: ``-reweight_span .. reweight_span``."""
    return np.arange(-config.reweight_span, config.reweight_span + 1)


def _keys(config: CopyLandscapeConfig, chain: np.ndarray) -> tuple[PRNGKeyArray, PRNGKeyArray]:
    """``(window keys, swap keys)`` of ladders ``chain``, ``(n, n_windows)`` and ``(n,)``: window
    ``k``'s chain ``c`` is keyed ``fold_in(fold_in(key, k), c)``, its swaps ``fold_in(fold_in(key,
    n_windows), c)`` (no window has that index)."""
    windows = keys.derive(config.chain_seed, np.arange(config.n_windows)[None, :], chain[:, None])
    return windows, keys.derive(config.chain_seed, config.n_windows, chain)


class CopyLandscape(Experiment):
    """One ladder of ``n_windows`` SGLD chains per point on the marginal posterior of ``G`` (``W``
    integrated out exactly: the exact action B.3a, :func:`posterior_target`), window ``k``'s chain
    biased by umbrella window ``k`` of its ``P`` (:func:`place_windows`), with replica exchange
    between neighbouring windows every ``swap_every`` steps
    (:mod:`jaxattn.core.kernels.exchange`; none without ``exchange``): per window the
    windows' coordinate at every kept draw, the replica there, and whether its chain diverged; per
    neighbouring pair the swaps attempted and accepted. :func:`profile_of` turns a ``P``'s
    windows into ``F(a)`` by MBAR; :func:`sampled_profile` and :func:`landscape` run it, and so
    does a sweep.

    A step's cost does not grow with ``P``: the exact action sees the data only through the
    token co-occurrence counts (:func:`jaxattn.copyhead.network.stats`, shape ``(L V, L V)``),
    computed once per point.

    Attributes:
        name: ``"copy_landscape"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead._config.CopyLandscapeConfig`.
        axes: ``P``, ``N`` (the inverse temperature), ``data_seed`` and ``chain`` (the ladder's
            noise).
        block: default streams per block.
        group: default members per group.
    """

    name = "copy_landscape"
    doc = "copy task, umbrella windows with replica exchange on the posterior of G (jaxattn.copyhead.landscape)"
    config_type = CopyLandscapeConfig
    axes = (
        int_axis("P", 340, 1, shared=True, help="Training sequences."),
        Axis("N", "float", 20.0, _check_N, True, "Inverse temperature of exp(-N U)."),
        int_axis("data_seed", 0, 0, help="The data set."),
        int_axis("chain", 0, 0, shared=True, help="The ladder of windows (its noise)."),
    )
    block = 1  # one data set is the usual case
    # a ladder already vectorises its n_windows chains: wider groups gained nothing measured
    # (2 ladders of 56 at L = 32: 29k chain-steps/s with group 1 or 2), and a group larger than
    # the grid is padded (group 4 with 2 ladders: 17k)
    group = 1

    def setup(self, c: CopyLandscapeConfig, values):
        if c.reweight_span >= min(values["P"]):
            raise ValueError(f"reweight_span must be below the smallest P ({min(values['P'])}), got {c.reweight_span}")
        sched = sgld.schedule(segments(c.burn_in, 5), segments(c.n_draws))
        static = LandscapeStatic(c, -(-(max(values["P"]) + c.reweight_span) // 128) * 128, sched)
        return static, {}

    def params(self, s: LandscapeStatic, points):
        # the windows are placed once per distinct (P, N), on the host (a theory's minimisation),
        # and handed to the points by index: never once per point
        pairs, which = np.unique(np.stack([points["P"], points["N"]], 1).astype(float), axis=0, return_inverse=True)
        placed = [_placed(s.config, int(P), float(N)) for P, N in pairs]
        chain_key, swap_key = _keys(s.config, np.asarray(points["chain"]))

        def per_point(get, dtype=np.float32):
            return np.asarray(np.stack([get(p) for p in placed]), dtype)[which.reshape(-1)]

        return {
            "data_key": data_key(points["data_seed"]),
            "chain_key": chain_key,
            "swap_key": swap_key,
            "P": np.asarray(points["P"], np.int32),
            "N": np.asarray(points["N"], np.float32),  # an input, not a constant: one compile across N
            "center": per_point(lambda p: p[0].centers),
            "spring": per_point(lambda p: p[0].spring),
            "target": per_point(lambda p: p[1]),
            "G0": per_point(lambda p: p[2]),
            "eps": per_point(lambda p: p[3]),
        }

    def _kernel(self, s: LandscapeStatic, N) -> tuple[mala.MALA, Callable]:
        """The windows' kernel at inverse temperature ``N`` (traced) as ``(init(x, data), step,
        refresh or None)`` and the order parameter: SGLD's state caches nothing of its window,
        MALA's caches the density."""
        potential, order = posterior_target(s.config.arch)
        U = umbrella.biased_potential(potential, order, N)
        if s.config.kernel == "mala":
            return mala.mala(U, N), order
        if s.config.kernel == "hmc":
            return mala.hmc(U, N, s.config.n_leapfrog), order
        k = sgld.sgld(U, N)
        return mala.MALA(lambda x, data: k.init(x), k.step, None), order  # pyright: ignore[reportArgumentType]

    def init(self, s: LandscapeStatic, shared, p, n_groups):
        X = stream_data(s.config.arch, stream_values(p["data_key"]), s.n_max)
        K, n_draws = s.config.n_windows, s.config.n_draws

        def point(G0, stats, center, spring, N):
            kernel, _ = self._kernel(s, N)
            chains = jax.vmap(kernel.init, in_axes=(0, ((None, None), 0, 0)))(G0, ((stats, N), center, spring))
            return exchange.ladder(chains)

        def group(q):
            st = member_stats(X, q["P"], s.n_max)
            ladders = jax.vmap(jax.vmap(point))(q["G0"], st, q["center"], q["spring"], q["N"])
            shape = q["P"].shape + (K, n_draws)
            draws = {"c": jnp.zeros(shape, jnp.float32), "replica": jnp.zeros(shape, jnp.int32)}
            if not s.config.reweight_span:
                return ladders, st, draws
            # the statistics of P + d, leading axes (S, M, shift)
            shifted = jax.vmap(lambda d: member_stats(X, q["P"] + d, s.n_max), out_axes=2)(_shifts(s.config))
            draws["dS"] = jnp.zeros(shape + (_shifts(s.config).size,), jnp.float32)
            return ladders, (st, shifted), draws

        return over_groups(group, n_groups, p)

    def step(self, s: LandscapeStatic, shared, p, state, k, n_groups):
        c = s.config
        adv, first, nd = (jnp.asarray(t)[k] for t in s.schedule)
        t0 = jnp.asarray(np.concatenate([[0], np.cumsum(s.schedule.steps(c.thin))[:-1]]))[k]

        potential = posterior_target(c.arch)[0]

        def ladder(keys, swap_key, ld, stats, center, spring, eps, N, draws):
            kernel, order = self._kernel(s, N)
            stats, shifted = stats if c.reweight_span else (stats, None)
            data = ((stats, N), center, spring)
            per_window = ((None, None), 0, 0)

            def step_fn(chains):
                ks = jax.vmap(jax.random.fold_in)(keys, chains.step)
                return jax.vmap(kernel.step, in_axes=(0, 0, per_window, None))(ks, chains, data, eps)

            def observe(chains):
                obs = {"c": jax.vmap(order)(chains.position)}
                if shifted is not None:  # S_{P+d}(G) - S_P(G) of each window's G, for every d

                    def dS(G):
                        S = jax.vmap(lambda st: potential(G, (st, N)))(shifted)
                        return N * (S - S[c.reweight_span])  # d = 0 is P itself

                    obs["dS"] = jax.vmap(dS)(chains.position)
                return obs

            def delta(chains):
                return umbrella.exchange_delta(jax.vmap(order)(chains.position), center, spring), chains.diverged

            refresh = None
            if kernel.refresh is not None:
                refresh = lambda chains: jax.vmap(kernel.refresh, in_axes=(0, per_window))(chains, data)  # noqa: E731
            return exchange.run_segment(
                step_fn,
                observe,
                delta,
                swap_key,
                ld,
                t0,
                adv,
                nd,
                c.thin,
                first,
                draws,
                c.swap_every if c.exchange else None,
                refresh,
            )

        def group(ladders, stats, draws, q):
            ladders, draws = jax.vmap(jax.vmap(ladder))(
                q["chain_key"], q["swap_key"], ladders, stats, q["center"], q["spring"], q["eps"], q["N"], draws
            )
            return ladders, stats, draws

        return over_groups(group, n_groups, *state, p)

    def finish(self, s, shared, p, state, n_groups):
        ladders, _, draws = state
        return {
            **({"dS": draws["dS"]} if s.config.reweight_span else {}),
            "c": draws["c"],
            "replica": draws["replica"],
            "diverged": ladders.chains.diverged,
            "move_acceptance": (
                ladders.chains.accepted / jnp.maximum(ladders.chains.step, 1)
                if s.config.kernel != "sgld"
                else jnp.ones_like(ladders.chains.step, jnp.float32)
            ),
            "accepted": ladders.accepted,
            "attempted": ladders.attempted,
            "center": p["center"],
            "spring": p["spring"],
            "target": p["target"],
            "eps": p["eps"],
        }

    def layout(self, s: LandscapeStatic) -> Layout:
        K = s.config.n_windows
        span = s.config.reweight_span
        return Layout(
            {
                **({"dS": ("window", "draw", "shift")} if span else {}),
                "c": ("window", "draw"),
                "replica": ("window", "draw"),
                "diverged": ("window",),
                "move_acceptance": ("window",),
                "accepted": ("pair",),
                "attempted": ("pair",),
                "center": ("window",),
                "spring": ("window",),
                "target": ("window",),
                "eps": (),
            },
            {
                "window": np.arange(K),
                "pair": np.arange(K - 1),
                "draw": np.arange(s.config.n_draws),
                **({"shift": _shifts(s.config)} if span else {}),
            },
            {
                "dS": "S at P + shift minus S at P, of the window's draw (reweighting to other P)",
                "c": "the windows' coordinate: c_G (softmax) or |a_G| (linear)",
                "replica": "the replica in the window, by the window it started in",
                "move_acceptance": "the fraction of the kernel's moves accepted (1 for SGLD) by the replica now there",
                "accepted": "swaps accepted between windows pair and pair + 1",
                "attempted": "swaps attempted between windows pair and pair + 1",
                "center": "the window's centre",
            },
        )

    def bytes_per_point(self, s: LandscapeStatic) -> int:
        a, c = s.config.arch, s.config
        n_shift = 2 * c.reweight_span + 1 if c.reweight_span else 0
        per_window = 4 * a.L * a.L + (2 + n_shift) * c.n_draws
        return 4 * (s.n_max * a.L * a.V * 2 // 32 + (1 + n_shift) * (a.L * a.V) ** 2 + c.n_windows * per_window)

    def progress_units(self, s: LandscapeStatic):
        return s.schedule.steps(s.config.thin), "step"

    def attrs(self, c: CopyLandscapeConfig, s) -> dict:
        return {"attention": c.attention, "L": c.L, "V": c.V}


COPY_LANDSCAPE = CopyLandscape()
