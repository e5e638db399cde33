"""The single-location model's fixed parameters (Spec A): one config for the Python API, the
command line and sweep files, whose fields :mod:`jaxattn.engine.config` reads everywhere."""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import numpy as np

from jaxattn.core import checks
from jaxattn.core.attention import activation_name, check_activation
from jaxattn.core.checks import plain
from jaxattn.core.precision import MATMUL_PRECISION_HELP, check_matmul
from jaxattn.slm import priors


def _help(text: str, **more) -> dict:
    return {"help": text, **more}


PRIOR_FIELD = _help(
    "P_theta: a table {family = onehot | flipped | gaussian, F, nu} or {family = discrete, support, weights}",
    parse=priors.from_spec,
    dump=priors.to_spec,
    cli=False,
)


@dataclass(frozen=True)
class SLMConfig:
    """Everything about a grid of online-SGD runs except its axes (``seed``, ``H``, ``L``,
    ``eta``, ``signal``).

    Attributes:
        D: embedding dimension (one compile per value).
        prior: ``P_theta`` (its ``F`` is the number of latent directions).
        activation: the attention activation (:mod:`jaxattn.core.attention`).
        aggregation: ``"mean"`` or ``"sum"`` over heads (``None``: the activation's default).
        t_max: training time in units of ``samples / D``.
        n_records: number of recording times, log-spaced from ``t_min`` to ``t_max`` (plus 0),
            unless ``times`` lists them.
        t_min: the first recording time after 0.
        times: the recording times, instead of log-spaced ones (``None``: log-spaced).
        batch_size: samples per SGD step (mean gradient; ``t`` advances by ``batch_size / D``).
        sigma0: initial keys ``k_h ~ N(0, sigma0^2 I_D)``.
        bias_lr: bias step is ``bias_lr * eta / D``.
        diverge_bound: a run is diverged once, at a recording, a head's ``Q_hh`` exceeds
            ``diverge_bound * max(1, Q_hh(0))`` or the test error exceeds ``diverge_bound`` times
            its value at ``t = 0`` (a blow-up that stays finite); a non-finite loss or gradient
            always is. ``inf`` keeps only the latter.
        n_test: test samples for the recorded error (the same test set for every run and time).
        share_data: common random numbers across everything but the seed.
        directions_seed: seed of the latent directions and of the test set (shared by the grid).
        matmul_precision: the precision of online SGD's matrix products
            (:data:`~jaxattn.core.precision.MATMUL_PRECISIONS`): ``"highest"`` (the default: full
            float32 on every device), or ``"high"`` / ``"default"`` (TF32 on NVIDIA GPUs,
            bfloat16 passes on TPUs; the same numbers on a CPU). The ODEs and the SDE
            (:class:`SLMODEConfig`) compute at ``"highest"`` whatever it says.
    """

    D: int = field(default=200, metadata=_help("Embedding dimension."))
    prior: priors.Prior = field(default_factory=lambda: priors.onehot(2, 9.0), metadata=PRIOR_FIELD)
    activation: str = field(default="bayes_softmax", metadata=_help("Attention activation."))
    aggregation: str | None = field(
        default=None, metadata=_help("Head aggregation, mean or sum (default: mean for softmax/linear, sum otherwise).")
    )
    t_max: float = field(default=200.0, metadata=_help("Training time samples/D."))
    n_records: int = field(default=25, metadata=_help("Log-spaced recordings."))
    t_min: float = field(default=0.1, metadata=_help("First recording time after 0."))
    times: tuple[float, ...] | None = field(default=None, metadata=_help("Recording times (instead of log-spaced)."))
    batch_size: int = field(default=1, metadata=_help("Samples per SGD step."))
    sigma0: float = field(default=1.0, metadata=_help("Initial key scale."))
    bias_lr: float = field(default=1.0, metadata=_help("Bias step relative to eta / D."))
    diverge_bound: float = field(
        default=1000.0,
        metadata=_help(
            "A run diverges (frozen, NaN from then on) once a head's Q_hh or the test error is this many "
            "times its value at t = 0 (Q_hh(0) counted as at least 1); inf: only non-finite values."
        ),
    )
    n_test: int = field(default=1000, metadata=_help("Test samples per record."))
    share_data: bool = field(
        default=True, metadata=_help("Common random numbers across the grid (one data stream per seed).")
    )
    directions_seed: int = field(default=0, metadata=_help("Seed of the latent directions and the test set."))
    matmul_precision: str = field(default="highest", metadata=_help(MATMUL_PRECISION_HELP))

    @property
    def F(self) -> int:
        return self.prior.F

    def record_steps(self) -> np.ndarray:
        """Step indices at which observables are recorded (sorted, unique, starting at 0)."""
        if self.times is not None:
            t = np.asarray(self.times, float)
        else:
            t = np.concatenate([[0.0], np.geomspace(min(self.t_min, self.t_max), self.t_max, self.n_records)])
        return np.unique(np.round(t * self.D / self.batch_size).astype(np.int64))

    def record_times(self) -> np.ndarray:
        """The recording times ``t = samples / D`` of :meth:`record_steps`."""
        return self.record_steps() * self.batch_size / self.D

    def validate(self) -> SLMConfig:
        checks.integer("D", self.D, 1)
        if self.D < self.F:
            raise ValueError(f"D must be >= F, got D={self.D}, F={self.F}")
        if activation_name(self.activation) != self.activation:
            return _replace(self, activation=activation_name(self.activation)).validate()
        check_activation(self.activation, self.aggregation)
        checks.positive("t_max", self.t_max)
        checks.positive("t_min", self.t_min)
        checks.integer("n_records", self.n_records, 1)
        if self.times is not None:
            t = checks.as_array("times", self.times, ndim=1)
            if t.size == 0 or np.any(t < 0):
                raise ValueError(f"times must be a non-empty list of values >= 0, got {plain(self.times)}")
        checks.integer("batch_size", self.batch_size, 1)
        end = "times" if self.times is not None else "t_max"
        t = max(self.times) if self.times is not None else self.t_max

        def beyond_the_counter(last):
            return ValueError(
                f"{end} gives {last:.3g} SGD steps (time * D / batch_size), more than a step counter holds "
                f"({checks.INT32_MAX})"
            )

        if self.times is None:  # both checked before the log-spaced times are built
            steps = round(self.t_max * self.D / self.batch_size)
            if steps > checks.INT32_MAX:
                raise beyond_the_counter(steps)
            if self.n_records > max(steps + 1, 1000):
                raise ValueError(
                    f"n_records must be <= 1000 or the number of SGD steps + 1 ({steps + 1}: a record is "
                    f"a step, t_max * D / batch_size of them), got {self.n_records}"
                )
        last = int(self.record_steps()[-1])
        if last < 1 and t > 0:  # times = (0,) asks for the initial state alone
            raise ValueError(
                f"{end} gives no SGD step: {t:g} * D / batch_size = {t:g} * {self.D} / {self.batch_size} "
                "rounds to 0 (raise it, or D)"
            )
        if last > checks.INT32_MAX:
            raise beyond_the_counter(last)
        checks.positive("sigma0", self.sigma0, allow_zero=True)
        checks.positive("bias_lr", self.bias_lr, allow_zero=True)
        if not float(self.diverge_bound) > 1:  # inf allowed: only non-finite values diverge
            raise ValueError(f"diverge_bound must be > 1 (inf allowed), got {plain(self.diverge_bound)}")
        checks.integer("n_test", self.n_test, 1)
        checks.integer("directions_seed", self.directions_seed, 0)
        check_matmul(self.matmul_precision)
        leaves = jax.tree_util.tree_leaves(self.prior)
        if not leaves or not all(np.all(np.isfinite(np.asarray(x))) for x in leaves):
            raise ValueError("prior must have finite parameters")
        return self


@dataclass(frozen=True)
class SLMODEConfig(SLMConfig):
    """The order-parameter ODEs' parameters: those of the online-SGD runs they describe (``D``
    sets the initial overlaps, which are those of the SGD run of the same seed), plus the
    Monte Carlo bank of the expectations and the solver's tolerances.

    Attributes:
        n_bank: draws of the bank (:func:`jaxattn.slm.risk.make_bank`).
        bank_seed: seed of the bank.
        bank_method: ``"sobol"`` (the default: scrambled Sobol points, ``n_bank`` rounded up to
            a power of 2; the same drift accuracy with several times fewer points,
            ``tests/test_risk.py``) or ``"mc"`` (Monte Carlo). Both are prefix-consistent: a
            grid point padded to a larger ``(L, H)`` sees the draws it sees alone.
        rtol: relative tolerance of the adaptive Dopri5 solver.
        atol: absolute tolerance of the adaptive Dopri5 solver.
        max_steps: solver steps before a solve is reported as failed.
        precision: ``"float64"`` (the default) or ``"float32"``; float32 keeps ``M`` within the
            accuracy measured in ``docs/theory/single_location.md`` (section 9) and runs at full
            speed where float64 is slow (consumer GPUs, TPUs).
    """

    n_bank: int = field(default=4096, metadata=_help("Points of the ODE's expectations (sobol: a power of 2)."))
    bank_seed: int = field(default=0, metadata=_help("Seed of the bank."))
    bank_method: str = field(default="sobol", metadata=_help("Bank of the expectations: sobol or mc."))
    rtol: float = field(default=1e-5, metadata=_help("Relative tolerance of the solver."))
    atol: float = field(default=1e-7, metadata=_help("Absolute tolerance of the solver."))
    max_steps: int = field(default=20000, metadata=_help("Solver steps before a solve counts as failed."))
    precision: str = field(
        default="float64", metadata=_help("float64, or float32 (faster on accelerators; accuracy in the docs).")
    )

    def validate(self) -> SLMODEConfig:
        super().validate()
        checks.integer("n_bank", self.n_bank, 1)
        checks.integer("bank_seed", self.bank_seed, 0)
        if checks.choice("bank_method", self.bank_method, ("mc", "sobol")) != self.bank_method:
            return _replace(
                self, bank_method=checks.choice("bank_method", self.bank_method, ("mc", "sobol"))
            ).validate()
        checks.positive("rtol", self.rtol)
        checks.positive("atol", self.atol)
        checks.integer("max_steps", self.max_steps, 1)
        checks.choice("precision", self.precision, ("float64", "float32"))
        return self


@dataclass(frozen=True)
class SLMSDEConfig(SLMODEConfig):
    """The finite-``D`` order-parameter SDE's parameters (:mod:`jaxattn.slm.sde`): those of the
    ODEs (the drift, its bank, the start of each seed), plus the Euler-Maruyama step and the seed
    of the Brownian paths (one path per seed: ``fold_in(key(brownian_seed), seed)``). The
    tolerances ``rtol`` and ``atol`` are unused (the step is fixed).

    Attributes:
        dt: Euler-Maruyama step in units of ``samples / D``.
        brownian_seed: seed of the Brownian paths.
    """

    dt: float = field(default=0.05, metadata=_help("Euler-Maruyama step of the SDE (samples / D)."))
    brownian_seed: int = field(default=0, metadata=_help("Seed of the SDE's Brownian paths."))

    def validate(self) -> SLMSDEConfig:
        super().validate()
        checks.positive("dt", self.dt)
        checks.integer("brownian_seed", self.brownian_seed, 0)
        return self


def _replace(config, **changes):
    import dataclasses

    return dataclasses.replace(config, **changes)
