"""Online SGD of the single-location model on the engine: the ``slm_sgd`` experiment over
``seed x H x L x eta x signal`` and :func:`train`.

``H`` and ``L`` are padded to their maxima and masked; with ``share_data`` (the default) the
points of one seed share one data stream: the same tokens, drawn once per step for all of them
(common random numbers: paired comparisons across ``H``, ``L``, ``eta``, ``signal`` and, between
runs, activations).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from jaxattn import engine
from jaxattn.core.attention import prefix_mask
from jaxattn.engine import Experiment, Layout, over_groups, stream_values
from jaxattn.slm import network, priors, sgd, task
from jaxattn.slm._config import SLMConfig
from jaxattn.slm.experiments._common import (
    AXES,
    GRID_AXES,
    HYPER,
    directions_and_test_key,
    directions_bytes,
    head_layout,
    masked_heads,
    point_keys,
)


class SGDStatic(NamedTuple):
    """The static part of an online-SGD grid (:class:`OnlineSGD`), fixed by its config and axes.

    Attributes:
        cfg: the SGD configuration (padded ``H_max``, ``L_max``).
        gaps: SGD steps before each recording (the first is 0: ``t = 0``).
        times: the recording times ``t = samples / D``.
        n_test: test samples per recorded error.
        F: number of latent directions.
        share_data: common random numbers across everything but the seed.
        matmul_precision: the precision the programs' matrix products are traced at (a part of
            the static, so that two precisions never share a program).
    """

    cfg: sgd.SGDConfig
    gaps: tuple[int, ...]  # SGD steps before each recording (the first is 0: t = 0)
    times: tuple[float, ...]
    n_test: int
    F: int
    share_data: bool
    matmul_precision: str


class OnlineSGDExperiment(Experiment):
    """Online SGD on the single-location model (Spec A, section 2): ``M``, ``Q``, ``b`` and the
    test error at the recording times, and whether the run diverged.

    Attributes:
        name: ``"slm_sgd"``, the name it is registered under.
        doc: one line describing it.
        config_type: :class:`~jaxattn.slm._config.SLMConfig`.
        axes: the grid axes ``seed``, ``H``, ``L``, ``eta``, ``signal``.
        block: streams per block where :meth:`default_block` has no grid to look at.
        group: default members per group.
        step_scope: the name (:func:`jax.named_scope`) of one SGD step's code in the compiled
            ``step`` program: its loop's kernels are :func:`jaxattn.core.hlo.loop_kernels` of
            :func:`jaxattn.engine.program_text` and this name.
    """

    name = "slm_sgd"
    doc = "single-location model, online SGD (jaxattn.slm.train)"
    config_type = SLMConfig
    axes = AXES
    block = 2
    group = 1  # measured fastest on a CPU (benchmarks/README.md)
    step_scope = "sgd_step"

    def shared_axes(self, config: SLMConfig) -> frozenset[str]:
        return HYPER if config.share_data else frozenset()

    def default_block(self, config: SLMConfig, static: SGDStatic, n_streams: int) -> int:
        """Streams per block on a CPU, from the tokens a stream draws per step and the grid's
        streams (accelerators take the whole grid: :func:`jaxattn.engine.default_block`).

        A block of ``S`` streams draws ``S * batch_size * L_max * D`` Gaussian tokens a step.
        Larger blocks spread the per-step overhead over more streams until those draws fill the
        caches: on a CPU the rate peaks near ``2^16`` tokens and 16 to 32 streams (measured on
        2 cores at ``D = 1000`` and ``D = 100``, ``benchmarks/README.md``), beyond which it falls.
        It is at most half the streams (a power of two), so that a small grid runs as two blocks
        (one per core) rather than padded into one.

        Args:
            config: The run's config.
            static: From :meth:`setup` (``D``, ``L_max``).
            n_streams: The number of streams in the grid.

        Returns:
            A power of two between 1 and 32.
        """
        tokens = config.batch_size * static.cfg.L_max * static.cfg.D
        cap = min(32, max(1, 2**16 // tokens))
        return 1 << (min(cap, max(1, n_streams // 2)).bit_length() - 1)

    def setup_bytes(self, config, values) -> int:
        return directions_bytes(config)

    def setup(self, config: SLMConfig, values):
        cfg = sgd.SGDConfig(
            D=config.D,
            H_max=max(values["H"]),
            L_max=max(values["L"]),
            arch=network.Arch(config.activation, config.aggregation),
            batch_size=config.batch_size,
            sigma0=float(config.sigma0),
            bias_lr=float(config.bias_lr),
        )
        steps = config.record_steps()
        directions, test_key = directions_and_test_key(config)
        shared = dict(
            directions=directions,
            prior=priors.astype(config.prior, jnp.float32),
            test_key=test_key,
            diverge_bound=np.float32(config.diverge_bound),  # an input, not a constant: one compile for any bound
        )
        static = SGDStatic(
            cfg,
            tuple(int(g) for g in np.diff(steps, prepend=0)),
            tuple(float(t) for t in steps * config.batch_size / config.D),
            config.n_test,
            config.F,
            config.share_data,
            config.matmul_precision,
        )
        return static, shared

    def params(self, static: SGDStatic, points) -> sgd.RunParams:
        init_key, data_key = point_keys(static.share_data, *(points[k] for k in GRID_AXES))
        return sgd.RunParams(
            init_key=init_key,
            data_key=data_key,
            eta=jnp.asarray(points["eta"], jnp.float32),  # one transfer each, whatever the grid
            signal=jnp.asarray(points["signal"], jnp.float32),
            H=jnp.asarray(points["H"], jnp.int32),
            L=jnp.asarray(points["L"], jnp.int32),
        )

    def init(self, static: SGDStatic, shared, p, n_groups):
        cfg = static.cfg
        states = over_groups(lambda rp: jax.vmap(jax.vmap(lambda r: sgd.init(cfg, r)))(rp), n_groups, p)
        lead = p.eta.shape + (len(static.gaps),)
        H = cfg.H_max
        rec = dict(
            M=jnp.zeros(lead + (H, static.F)),
            Q=jnp.zeros(lead + (H, H)),
            b=jnp.zeros(lead + (H,)),
            error=jnp.zeros(lead),
        )
        return states, rec

    def step(self, static: SGDStatic, shared, p, state, k, n_groups):
        cfg, dirs, prior = static.cfg, shared["directions"], shared["prior"]
        states, rec = state

        @jax.named_scope(self.step_scope)  # names the loop's code in the compiled program
        def sgd_step(_, st):
            # one batch per stream, drawn once and applied to every member of the stream
            sv = stream_values((p.data_key, st.step))
            batch = jax.vmap(lambda k, n: sgd.draw_batch(cfg, prior, k, n))(*sv)

            def group(s, rp):
                return jax.vmap(lambda b, s_, r_: jax.vmap(lambda a, c: sgd.update(cfg, dirs, a, c, b))(s_, r_))(
                    batch, s, rp
                )

            return over_groups(group, n_groups, st, p)

        states = jax.lax.fori_loop(0, jnp.asarray(static.gaps)[k], sgd_step, states)

        def observe(st: sgd.SGDState, rp: sgd.RunParams):
            hm, pm = prefix_mask(rp.H, cfg.H_max), prefix_mask(rp.L, cfg.L_max)
            M, Q = network.order_parameters(st.params, dirs)

            def err(i):
                # drawn where used, a batch at a time: the whole test set at once would take
                # n_test x L x D floats
                d = task.draw(jax.random.fold_in(shared["test_key"], i), prior, cfg.L_max, cfg.D)
                s = task.assemble(d, dirs, rp.L, rp.signal)
                return network.error(st.params, s.X, s.X[s.eps], cfg.arch, hm, pm)

            # summed a batch at a time: neither the indices nor the errors of the whole test set
            # are held, so its size costs time, not memory
            B = _test_batch(static)
            n_full, rest = divmod(static.n_test, B)

            def batch(j, total):
                return total + jnp.sum(jax.vmap(err)(j * B + jnp.arange(B)))

            total = jax.lax.fori_loop(0, n_full, batch, jnp.zeros((), jnp.float32))
            if rest:
                total = total + jnp.sum(jax.vmap(err)(n_full * B + jnp.arange(rest)))
            e = total / static.n_test
            M, Q, b = masked_heads(M, Q, st.params.bias, hm, st.diverged)
            return dict(M=M, Q=Q, b=b, error=jnp.where(st.diverged, jnp.nan, e))

        obs = over_groups(lambda s, rp: jax.vmap(jax.vmap(observe))(s, rp), n_groups, states, p)
        states, obs = _bound(shared["diverge_bound"], k, states, obs, rec)
        rec = jax.tree_util.tree_map(lambda r, o: jax.lax.dynamic_update_index_in_dim(r, o, k, 3), rec, obs)
        return states, rec

    def finish(self, static, shared, p, state, n_groups):
        states, rec = state
        return {**rec, "diverged": states.diverged}

    def layout(self, static: SGDStatic) -> Layout:
        return head_layout(static.times, static.cfg.H_max, static.F, "error")

    def bytes_per_point(self, static: SGDStatic) -> int:
        c = static.cfg
        per_step = 4 * (c.H_max * c.D * 3 + c.L_max * c.D * 2 * c.batch_size)
        records = 4 * len(static.gaps) * (c.H_max * (static.F + c.H_max + 1) + 1)
        test = 4 * _test_batch(static) * c.L_max * c.D  # a batch of the test set, drawn
        return per_step + records + test

    def progress_units(self, static: SGDStatic):
        return np.asarray(static.gaps) * static.cfg.batch_size / static.cfg.D, "t"

    def attrs(self, config: SLMConfig, static) -> dict:
        return {"activation": config.activation, "D": config.D, "F": config.F}


def _test_batch(static: SGDStatic) -> int:
    return min(static.n_test, 256)


def _largest_self_overlap(Q):
    d = jnp.diagonal(Q, axis1=-2, axis2=-1)
    return jnp.max(jnp.where(jnp.isnan(d), -jnp.inf, d), axis=-1)  # padded heads are NaN


def _bound(bound, k, states: sgd.SGDState, obs: dict, rec: dict):
    """The size bound at recording ``k > 0``: a run whose largest ``Q_hh`` exceeds ``bound *
    max(1, Q_hh(0))``, or whose error exceeds ``bound * error(0)``, is diverged from here on
    (frozen by :func:`~jaxattn.core.divergence.guard`, its observables ``NaN``), as if its loss
    had become non-finite."""
    q0 = jnp.maximum(_largest_self_overlap(rec["Q"][..., 0, :, :]), 1.0)
    big = (k > 0) & ((_largest_self_overlap(obs["Q"]) > bound * q0) | (obs["error"] > bound * rec["error"][..., 0]))
    obs = {n: jnp.where(big.reshape(big.shape + (1,) * (v.ndim - big.ndim)), jnp.nan, v) for n, v in obs.items()}
    return states._replace(diverged=states.diverged | big), obs


SLM_SGD = OnlineSGDExperiment()


TRAIN_GRID = {a.name: a.default for a in AXES}
"""``TRAIN_GRID`` is the grid :func:`train` runs unless told otherwise: one point, each axis at its default."""


def train(config: SLMConfig | None = None, **kw: Any) -> xr.Dataset:
    """Train the grid ``seed x H x L x eta x signal`` by online SGD; return the recorded
    observables as a Dataset with dimensions ``(seed, H, L, eta, signal, time, head, direction)``.

    Variables: ``M[..., time, head, direction]``, ``Q[..., time, head, head_]``,
    ``b[..., time, head]`` (``NaN`` on padded heads), ``error[..., time]`` (test error
    ``|y - y_hat|^2 / D``) and ``diverged[...]`` (a run whose loss became non-finite: its
    observables are ``NaN`` from then on; the rest of the grid is unaffected).

    The blocks of data streams are sharded over ``devices`` (default: all local devices); the
    numbers depend on nothing but each point's values and the block shape ``(block, group)``.

    Args:
        config: the fixed parameters (default ``SLMConfig()``).
        **kw: the axes ``seed`` (of the initial keys and the data stream), ``H`` (heads), ``L``
            (sequence length), ``eta`` (learning rate) and ``signal`` (``theta -> signal theta``),
            a value or a list each (default :data:`TRAIN_GRID`); and the options of :func:`jaxattn.engine.run` (``progress``, ``devices``, ``block``, ``group``, ``chunk_size``, ``memory_budget``).

    Returns:
        An ``xarray.Dataset`` with ``M``, ``Q``, ``b``, ``error`` and ``diverged`` as above.
    """
    return engine.run(SLM_SGD, config or SLMConfig(), **{**TRAIN_GRID, **kw})
