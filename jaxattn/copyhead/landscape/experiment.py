"""The ``copy_landscape`` experiment: one SGLD chain per ``(P, data_seed, window, chain)`` on the
copy head's posterior biased by an umbrella window (:mod:`jaxattn.copyhead.landscape.windows`),
placed from ``(config, P)`` alone, so a sweep runs it as the Python API does.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxattn.copyhead.config import CopyLandscapeConfig
from jaxattn.copyhead.data import data_key, member_stats, stream_data
from jaxattn.copyhead.landscape.windows import ansatz_logits, default_range, place_windows, posterior_target
from jaxattn.core import umbrella
from jaxattn.core.kernels import sgld
from jaxattn.engine import Experiment, Layout, int_axis, over_groups, segments, stream_values


class LandscapeStatic(NamedTuple):
    """The static (hashable) part of a :class:`CopyLandscape` run.

    Attributes:
        config: the experiment's config.
        n_max: sequences per data stream: the grid's largest ``P`` rounded up to a multiple of
            128, so that a scan over nearby ``P`` keeps one shape.
        schedule: the chain's segments (burn-in, then draws; one per call of ``step``).
    """

    config: CopyLandscapeConfig
    n_max: int
    schedule: sgld.Schedule


@functools.lru_cache(maxsize=64)
def _placed(config: CopyLandscapeConfig, P: int) -> tuple[umbrella.Windows, np.ndarray, np.ndarray, float]:
    """``(windows, targets, G0, eps)`` of one ``P``: the windows (:func:`place_windows`, padded to
    ``config.n_windows``), the ansatz's ``G`` at each target, and the SGLD step, ``step`` over
    ``N`` plus the bias's largest curvature along the ansatz, ``kappa |grad_G c|^2``."""
    arch, N = config.arch, config.N
    w, targets = place_windows(
        arch, P, N, config.c_range or default_range(arch), config.max_spacing, config.spring, config.n_windows
    )
    G0 = ansatz_logits(arch, P, N, targets)
    order = posterior_target(arch)[1]
    g2 = jax.vmap(lambda G: jnp.sum(jax.grad(order)(G) ** 2))(G0)
    return w, targets, np.asarray(G0), config.step / (N + float(w.spring[0]) * float(jnp.max(g2)))


class CopyLandscape(Experiment):
    """One SGLD chain per point on the marginal posterior of ``G`` (``W`` integrated out
    exactly: the exact action B.3a, :func:`posterior_target`) biased by umbrella window
    ``window`` of its ``P`` (:func:`place_windows`): the windows' coordinate at every kept draw,
    the window, and whether the chain diverged. :func:`profile_of` turns a ``P``'s windows into
    ``F(a)`` by MBAR; :func:`sampled_profile` and :func:`landscape` run it, and so does a sweep.

    Attributes:
        name: ``"copy_landscape"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead.config.CopyLandscapeConfig`.
        axes: ``P``, ``data_seed``, ``window`` and ``chain``.
        block: default streams per block.
        group: default members per group.
    """

    name = "copy_landscape"
    doc = "copy task, umbrella windows on the posterior of G (jaxattn.copyhead.landscape)"
    config_type = CopyLandscapeConfig
    axes = (
        int_axis("P", 340, 1, shared=True, help="Training sequences."),
        int_axis("data_seed", 0, 0, help="The data set."),
        int_axis("window", 0, 0, shared=True, help="The umbrella window (0 to n_windows - 1)."),
        int_axis("chain", 0, 0, shared=True, help="The chain of a window (its noise)."),
    )
    block = 1  # one data set is the usual case
    group = 32  # members (windows x chains) vectorised together

    def setup(self, c: CopyLandscapeConfig, values):
        if max(values["window"]) >= c.n_windows:
            raise ValueError(f"window must be below n_windows={c.n_windows}, got {max(values['window'])}")
        sched = sgld.schedule(segments(c.burn_in, 5), segments(c.n_draws))
        static = LandscapeStatic(
            c,
            -(-max(values["P"]) // 128) * 128,
            sched,
        )
        return static, {}

    def params(self, s: LandscapeStatic, points):
        placed = [_placed(s.config, int(P)) for P in points["P"]]
        k = [int(x) for x in points["window"]]
        base = jax.random.key(s.config.chain_seed)
        return {
            "data_key": jnp.stack([data_key(d) for d in points["data_seed"]]),
            "chain_key": jnp.stack(
                [jax.random.fold_in(jax.random.fold_in(base, w), c) for w, c in zip(k, points["chain"])]
            ),
            "P": jnp.asarray(points["P"], jnp.int32),
            "center": jnp.asarray([p[0].centers[w] for p, w in zip(placed, k)], jnp.float32),
            "spring": jnp.asarray([p[0].spring[w] for p, w in zip(placed, k)], jnp.float32),
            "target": jnp.asarray([p[1][w] for p, w in zip(placed, k)], jnp.float32),
            "G0": jnp.asarray(np.stack([p[2][w] for p, w in zip(placed, k)]), jnp.float32),
            "eps": jnp.asarray([p[3] for p in placed], jnp.float32),
        }

    def _kernel(self, s: LandscapeStatic):
        potential, order = posterior_target(s.config.arch)
        return sgld.sgld(umbrella.biased_potential(potential, order, s.config.N), s.config.N), order

    def init(self, s: LandscapeStatic, shared, p, n_groups):
        kernel, _ = self._kernel(s)
        X = stream_data(s.config.arch, stream_values(p["data_key"]), s.n_max)

        def group(q):
            st = member_stats(X, q["P"], s.n_max)
            chains = jax.vmap(jax.vmap(kernel.init))(q["G0"])
            return chains, st, jnp.zeros(q["P"].shape + (s.config.n_draws,), jnp.float32)

        return over_groups(group, n_groups, p)

    def step(self, s: LandscapeStatic, shared, p, state, k, n_groups):
        kernel, order = self._kernel(s)
        adv, first, nd = (jnp.asarray(t)[k] for t in s.schedule)
        N = jnp.float32(s.config.N)

        def chain(key, st, stats, center, spring, eps, draws):
            data = ((stats, N), center, spring)
            return sgld.run_segment(
                kernel, lambda G, _: order(G), key, st, data, eps, adv, nd, s.config.thin, first, draws
            )

        def group(chains, stats, draws, q):
            chains, draws = jax.vmap(jax.vmap(chain))(
                q["chain_key"], chains, stats, q["center"], q["spring"], q["eps"], draws
            )
            return chains, stats, draws

        return over_groups(group, n_groups, *state, p)

    def finish(self, s, shared, p, state, n_groups):
        chains, _, draws = state
        return {
            "c": draws,
            "diverged": chains.diverged,
            "center": p["center"],
            "spring": p["spring"],
            "target": p["target"],
            "eps": p["eps"],
        }

    def layout(self, s: LandscapeStatic) -> Layout:
        return Layout(
            {"c": ("draw",), "diverged": (), "center": (), "spring": (), "target": (), "eps": ()},
            {"draw": np.arange(s.config.n_draws)},
            {"c": "the windows' coordinate: c_G (softmax) or |a_G| (linear)", "center": "the window's centre"},
        )

    def bytes_per_point(self, s: LandscapeStatic) -> int:
        a = s.config.arch
        return 4 * (s.n_max * a.L * a.V * 2 // 32 + 4 * a.L * a.L + (a.L * a.V) ** 2 + 2 * s.config.n_draws)

    def progress_units(self, s: LandscapeStatic):
        return s.schedule.steps(s.config.thin), "step"

    def attrs(self, c: CopyLandscapeConfig, s) -> dict:
        return {"attention": c.attention, "L": c.L, "V": c.V, "N": float(c.N)}


COPY_LANDSCAPE = CopyLandscape()
