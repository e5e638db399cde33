"""The copy head's fixed parameters (Spec B): one config per experiment, each extending the
network's :class:`~jaxattn.copyhead.network.CopyArch`, so no field is declared twice; the command
line and sweep files read them through :mod:`jaxattn.engine.config`.

- :class:`CopyConfig`: full-batch Adam (the MAP runs);
- :class:`SGLDConfig`: the sampler alone; :class:`CopySGLDConfig`: the network and the sampler;
- :class:`CopyLandscapeConfig`: umbrella sampling of the marginal posterior of ``G``;
- :class:`CopyTheoryConfig`: the choices of the reduced effective action.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxattn.copyhead import network
from jaxattn.core import checks
from jaxattn.core.precision import MATMUL_PRECISION_HELP, check_matmul


def _h(text: str, **more) -> dict:
    return {"help": text, **more}


@dataclass(frozen=True)
class CopyData(network.CopyArch):
    """The network plus what every copy-head simulation shares: the test set and the two kinds
    of start.

    Attributes:
        n_test: fresh test sequences (drawn from ``test_seed``, shared by the grid).
        test_seed: seed of the test sequences.
        copy_strength: ``c`` of the copy-biased start ``G_0 = c S`` (default: ``ln L + 2`` for
            softmax, previous-token weight near 0.8 at ``L = 32``; ``A = S`` for linear).
        basin_threshold: previous-token weight above which a run is in the copy basin (default
            ``(ln L)^{1/4} / L^{3/4}``, the geometric middle of the uniform weight ``1/L`` and the
            softmax copy minimum ``~ sqrt(ln L / L)`` of Spec B, section 3; 0.10 at ``L = 32``).
        matmul_precision: the precision of the simulation's matrix products
            (:data:`~jaxattn.core.precision.MATMUL_PRECISIONS`): ``"highest"`` (the default: full
            float32 on every device), or ``"high"`` / ``"default"`` (TF32 on NVIDIA GPUs,
            bfloat16 passes on TPUs; the same numbers on a CPU).
    """

    n_test: int = field(default=2000, metadata=_h("Fresh test sequences."))
    test_seed: int = field(default=12345, metadata=_h("Seed of the test sequences."))
    copy_strength: float | None = field(default=None, metadata=_h("c of the copy start G = c S."))
    basin_threshold: float | None = field(
        default=None, metadata=_h("Previous-token weight above which a run is in the copy basin.")
    )
    matmul_precision: str = field(default="highest", metadata=_h(MATMUL_PRECISION_HELP))

    @property
    def c_copy(self) -> float:
        """``copy_strength``, or its default (``ln L + 2`` softmax; ``L`` or 1 linear: ``A = S``)."""
        if self.copy_strength is not None:
            return float(self.copy_strength)
        if self.attention == "softmax":
            return math.log(self.L) + 2.0
        return float(self.L) if self.linear_norm == "L" else 1.0

    @property
    def threshold(self) -> float:
        """``basin_threshold``, or its default ``(ln L)^{1/4} / L^{3/4}``."""
        if self.basin_threshold is not None:
            return float(self.basin_threshold)
        return math.log(self.L) ** 0.25 / self.L**0.75

    def validate(self):
        super().validate()
        checks.integer("n_test", self.n_test, 1)
        checks.integer("test_seed", self.test_seed, 0)
        if self.copy_strength is not None:
            checks.as_array("copy_strength", self.copy_strength, ndim=0)
        if self.basin_threshold is not None:
            checks.positive("basin_threshold", self.basin_threshold)
        check_matmul(self.matmul_precision)
        return self


@dataclass(frozen=True)
class CopyConfig(CopyData):
    """Everything about a grid of copy-task Adam runs except its axes (``P``, ``seed``,
    ``init``).

    Attributes:
        lr: Adam learning rate (cosine-decayed to ``lr * final_lr_fraction``).
        n_steps: Adam steps.
        final_lr_fraction: final learning rate as a fraction of ``lr``.
        sigma0: scale of the random initial logits.
        grad_tol: a run counts as converged when ``|grad U| <= grad_tol * sqrt(1 + n L)``, the
            gradient scale of the data term (``n`` samples).
    """

    lr: float = field(default=0.05, metadata=_h("Adam learning rate (cosine decay)."))
    n_steps: int = field(default=2000, metadata=_h("Adam steps."))
    final_lr_fraction: float = field(default=0.01, metadata=_h("Final learning rate over the first."))
    sigma0: float = field(default=0.1, metadata=_h("Scale of random initial G."))
    grad_tol: float = field(default=1e-4, metadata=_h("Converged when |grad U| <= grad_tol sqrt(1 + n L)."))

    def validate(self) -> CopyConfig:
        super().validate()
        checks.positive("lr", self.lr)
        checks.integer("n_steps", self.n_steps, 1)
        checks.positive("final_lr_fraction", self.final_lr_fraction)
        checks.positive("sigma0", self.sigma0, allow_zero=True)
        checks.positive("grad_tol", self.grad_tol)
        return self


@dataclass(frozen=True)
class SGLDConfig:
    """Unadjusted Langevin on ``exp(-N U)`` (Spec B, section 4).

    Attributes:
        N: inverse temperature of the posterior (``N = 1``: the plain Bayesian posterior).
        eps_G, eps_W: step sizes of the two blocks (default: ``step_fraction`` over the block's
            curvature scale, ``N (beta n / (L V) + 1 / sigma_G^2)`` and ``N (beta n / V + 1/omega)``).
        step_fraction: default step size over the block's curvature scale.
        n_steps: steps after burn-in; a draw is kept every ``thin`` steps.
        burn_in: steps before the first draw.
        thin: steps between kept draws.
        n_chains: independent chains per ``(P, start)``, from ``G = 0, W = 0`` (``"uniform"``) or
            from ``G = c S, W = I`` (``"copy"``).
        data_seed: the data set (the same sequences as :func:`train`'s seed ``data_seed``).
        chain_seed: seed of the chains' noise (chain ``i`` uses ``fold_in`` of it and ``i``).
    """

    N: float = field(default=1.0, metadata=_h("Inverse temperature of exp(-N U)."))
    eps_G: float | None = field(default=None, metadata=_h("Step size of G (default: from curvature)."))
    eps_W: float | None = field(default=None, metadata=_h("Step size of W (default: from curvature)."))
    step_fraction: float = field(default=0.05, metadata=_h("Step size over the curvature scale."))
    n_steps: int = field(default=4000, metadata=_h("Steps after burn-in."))
    burn_in: int = field(default=2000, metadata=_h("Steps before the first draw."))
    thin: int = field(default=20, metadata=_h("Steps between kept draws."))
    n_chains: int = field(default=16, metadata=_h("Chains per (P, start).", cli="--chains"))
    data_seed: int = field(default=0, metadata=_h("The data set."))
    chain_seed: int = field(default=0, metadata=_h("Seed of the chains' noise."))

    @property
    def n_kept(self) -> int:
        """Draws kept per chain, ``n_steps // thin``."""
        return self.n_steps // self.thin

    def validate(self) -> SGLDConfig:
        checks.positive("N", self.N)
        if self.eps_G is not None:
            checks.positive("eps_G", self.eps_G)
        if self.eps_W is not None:
            checks.positive("eps_W", self.eps_W)
        checks.positive("step_fraction", self.step_fraction)
        checks.integer("n_steps", self.n_steps, 1)
        checks.integer("burn_in", self.burn_in, 0)
        checks.integer("thin", self.thin, 1)
        if self.thin > self.n_steps:
            raise ValueError(f"thin must be <= n_steps, got thin={self.thin}, n_steps={self.n_steps}")
        checks.integer("n_chains", self.n_chains, 1)
        checks.integer("data_seed", self.data_seed, 0)
        checks.integer("chain_seed", self.chain_seed, 0)
        return self

    def step_sizes(self, arch: network.CopyArch, n: ArrayLike | Sequence[float]) -> network.CopyParams:
        """Per-block step sizes for ``n`` samples (arrays, so a ``P`` grid gets one each).

        Args:
            arch: the network (``L``, ``V``, ``beta`` and the priors).
            n: number(s) of training sequences, shape (nP,) or scalar.

        Returns:
            Named tuple :class:`~jaxattn.copyhead.network.CopyParams` of float32 step sizes ``(eps_G, eps_W)``,
                each of the shape of ``n``.
        """
        n = np.asarray(n, float)
        eG = self.step_fraction / (self.N * (arch.beta * n / (arch.L * arch.V) + 1.0 / arch.sigma_G2))
        eW = self.step_fraction / (self.N * (arch.beta * n / arch.V + 1.0 / arch.omega))
        eG = np.full_like(n, self.eps_G) if self.eps_G is not None else eG
        eW = np.full_like(n, self.eps_W) if self.eps_W is not None else eW
        return network.CopyParams(jnp.asarray(eG, jnp.float32), jnp.asarray(eW, jnp.float32))


@dataclass(frozen=True)
class CopySGLDConfig(SGLDConfig, CopyData):
    """The network, the test set and starts (:class:`CopyData`) and the sampler
    (:class:`SGLDConfig`) of a grid of SGLD chains (axes ``P``, ``start``, ``data_seed``,
    ``chain``). Its fields are those of the two (see their ``Attributes``).

    Attributes:
        sampler: the :class:`SGLDConfig` part, as a config of its own.
    """

    def validate(self) -> CopySGLDConfig:
        CopyData.validate(self)
        SGLDConfig.validate(self)
        return self

    @classmethod
    def of(cls, config: CopyData, sgld: SGLDConfig) -> CopySGLDConfig:
        """The combination of a network config and a sampler config.

        Args:
            config: the network, test set and starts.
            sgld: the sampler.

        Returns:
            A config :class:`CopySGLDConfig` with the fields of both.
        """
        import dataclasses

        kw = {f.name: getattr(config, f.name) for f in dataclasses.fields(CopyData)}
        kw.update({f.name: getattr(sgld, f.name) for f in dataclasses.fields(SGLDConfig)})
        return cls(**kw)

    @property
    def sampler(self) -> SGLDConfig:
        """The :class:`SGLDConfig` part, as a config of its own."""
        import dataclasses

        return SGLDConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SGLDConfig)})


LD_SAMPLES = 256
"""The quasi-Monte Carlo points per scramble of the sampled map's large-deviation ``P*``
(:func:`jaxattn.copyhead.lines.theory_lines`: two scramblings, one pass): 13 s a point at
``L = 32`` on 2 cores, within 1.5 sequences (0.3%) of the converged value there, which costs 80 to
590 s a point (``fluctuations.p_star_large_deviation``'s defaults)."""

REWEIGHT_SPAN = 12
"""The ``reweight_span`` of the ``P*`` search (``jaxattn.copyhead.landscape.landscape`` and
``jaxattn copy landscape``): each sampled ``P``'s draws give the log-odds at ``P +- 12``. At
``N = 20, L = 32`` (about 4 per sequence) the draws at the reduced theory's ``P* = 330`` reach the
sampled 340 (measured: 340.5 +- 0.3 from ``P = 330`` alone)."""

MAP_SAMPLER = MappingProxyType(
    dict(
        kernel="hmc",
        n_leapfrog=4,
        step=0.04,
        swap_every=2,
        thin=3,
        burn_in=400,
        n_draws=600,
        reweight_span=REWEIGHT_SPAN,
    )
)
"""The sampled map's defaults for its windows (``jaxattn.copyhead.landscape.sampled_phase_diagram``
and ``jaxattn copy phase-diagram --sampled``), with :data:`MAP_CHAINS` ladders and one ``P`` a
point per round: HMC, exact, with 4 leapfrog steps of 0.04 and an exchange every 2 steps, 400
steps of burn-in and 600 draws 3 steps apart (about 80% of the gradients of SGLD at burn-in 4000
and 800 draws 10 apart). Measured at ``L = 32``, ``N`` = 1 to 20 on 2 cores (``docs/claims.md``):
0.88x the sampling time of the SGLD sweep ``examples/copy_phase_diagram.toml``, with smaller
``P*`` errors at every ``N``; SGLD's step also biases ``P*`` up by 0.1% to 0.3% at ``N`` = 3 to 5."""

MAP_CHAINS = 4
"""The sampled map's ladders per ``P`` (:data:`MAP_SAMPLER`): their spread is the log-odds'
error, with three degrees of freedom."""

LANDSCAPE_KERNELS = ("sgld", "mala", "hmc")
"""The samplers of the umbrella windows: unadjusted and Metropolis-adjusted Langevin, and
Hamiltonian Monte Carlo."""


@dataclass(frozen=True)
class CopyLandscapeConfig(network.CopyArch):
    """The umbrella sampling of the marginal posterior of ``G`` (``jaxattn.copyhead.landscape``;
    axes ``P``, ``N``, ``data_seed``, ``chain``): the network, the windows and the sampler.

    Attributes:
        n_windows: windows per ``P`` (the placement's targets, padded to this many; one shape,
            hence one compile, for every ``P``).
        c_lo, c_hi: the span of the targets on the windows' coordinate (``c_G`` for softmax,
            ``|a_G|`` for linear; default :func:`jaxattn.copyhead.landscape._windows.default_range`).
        max_spacing: the targets' largest spacing.
        spring: the windows' spring constant (default: from the reduced action).
        burn_in: kernel steps before the first draw.
        n_draws: draws per chain.
        thin: kernel steps between draws.
        step: the Langevin step size times ``N`` plus the bias's curvature (HMC's leapfrog step
            is ``sqrt(2 x)`` of the step size).
        kernel: the windows' sampler: ``"sgld"`` (unadjusted Langevin), ``"mala"``
            (Metropolis-adjusted, exact at any step) or ``"hmc"`` (exact, ``n_leapfrog``
            gradients a step; :data:`LANDSCAPE_KERNELS`).
        n_leapfrog: HMC's leapfrog steps per step (the other kernels ignore it).
        exchange: replica exchange between neighbouring windows (off: the windows' chains are
            independent).
        swap_every: kernel steps between rounds of exchange.
        reweight_span: at every draw, also record the change of the action from ``P`` to
            ``P + d`` for ``|d| <= reweight_span`` (the first ``P + d`` sequences), so that one
            ``P``'s draws give the posterior at its neighbours by reweighting (0: none).
        chain_seed: seed of the chains (window ``k``'s chain ``c``: ``fold_in(fold_in(key, k), c)``).
        matmul_precision: the precision of the samplers' matrix products, as
            :class:`CopyData`'s.
    """

    n_windows: int = field(default=64, metadata=_h("Umbrella windows per P."))
    c_lo: float | None = field(default=None, metadata=_h("Lowest window target (default: by attention)."))
    c_hi: float | None = field(default=None, metadata=_h("Highest window target (default: by attention)."))
    max_spacing: float = field(default=0.2, metadata=_h("Largest spacing of the window targets."))
    spring: float | None = field(default=None, metadata=_h("Spring constant (default: from the action)."))
    burn_in: int = field(default=1000, metadata=_h("Kernel steps before the first draw."))
    n_draws: int = field(default=200, metadata=_h("Draws per chain."))
    thin: int = field(default=10, metadata=_h("Kernel steps between draws."))
    step: float = field(default=0.05, metadata=_h("Langevin step times N plus the bias curvature."))
    kernel: str = field(default="sgld", metadata=_h("The windows' sampler: sgld, mala or hmc."))
    n_leapfrog: int = field(default=4, metadata=_h("HMC's leapfrog steps per step."))
    exchange: bool = field(default=True, metadata=_h("Replica exchange between neighbouring windows."))
    swap_every: int = field(default=10, metadata=_h("Kernel steps between rounds of replica exchange."))
    reweight_span: int = field(default=0, metadata=_h("Record the action at P + d, |d| <= this, for reweighting."))
    chain_seed: int = field(default=0, metadata=_h("Seed of the chains."))
    matmul_precision: str = field(default="highest", metadata=_h(MATMUL_PRECISION_HELP))

    def validate(self) -> CopyLandscapeConfig:
        super().validate()
        checks.integer("n_windows", self.n_windows, 2)
        if (self.c_lo is None) != (self.c_hi is None):
            raise ValueError(
                f"c_lo and c_hi go together, got c_lo={checks.plain(self.c_lo)}, c_hi={checks.plain(self.c_hi)}"
            )
        checks.positive("max_spacing", self.max_spacing)
        if self.spring is not None:
            checks.positive("spring", self.spring)
        checks.integer("burn_in", self.burn_in, 0)
        checks.integer("n_draws", self.n_draws, 8)  # split R-hat needs four draws a half-chain
        checks.integer("thin", self.thin, 1)
        checks.positive("step", self.step)
        if self.kernel not in LANDSCAPE_KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(LANDSCAPE_KERNELS)}, got {checks.plain(self.kernel)}")
        checks.integer("n_leapfrog", self.n_leapfrog, 1)
        checks.integer("swap_every", self.swap_every, 1)
        checks.integer("reweight_span", self.reweight_span, 0)
        checks.integer("chain_seed", self.chain_seed, 0)
        check_matmul(self.matmul_precision)
        return self

    @property
    def c_range(self) -> tuple[float, float] | None:
        """``(c_lo, c_hi)``, or ``None`` for the default."""
        return None if self.c_lo is None or self.c_hi is None else (float(self.c_lo), float(self.c_hi))


@dataclass(frozen=True)
class CopyTheoryConfig:
    """The static choices of the reduced effective action (Spec B, section 3); ``L``, ``V``,
    ``P``, ``N`` and the hyper-parameters are the grid's axes.

    Attributes:
        attention: ``"softmax"`` or ``"linear"``.
        linear_norm: linear attention ``A = G / L`` (``"L"``) or ``A = G`` (``"none"``).
        cyclic: cyclic boundary, or position 0 dropped from the loss.
        precision: ``"float64"`` (the default) or ``"float32"``, whose accuracy against float64
            ``docs/theory/copy_head.md`` states (section "Precision").
    """

    attention: str = field(default="softmax", metadata=_h("Attention: softmax or linear."))
    linear_norm: str = field(default="L", metadata=_h("Linear attention A = G / L (L) or A = G (none)."))
    cyclic: bool = field(default=True, metadata=_h("Cyclic boundary."))
    precision: str = field(default="float64", metadata=_h("float64, or float32 (accuracy in the docs)."))

    def validate(self) -> CopyTheoryConfig:
        checks.choice("attention", self.attention, network.ATTENTIONS)
        checks.choice("linear_norm", self.linear_norm, network.LINEAR_NORMS)
        checks.choice("precision", self.precision, ("float64", "float32"))
        return self
