"""NUTS reference for the copy-task posterior ``exp(-N U)`` (numpyro, float64).

Spec B, section 4: at small sizes an exact MCMC method validates the stationary distribution of
the SGLD sampler (:func:`jaxattn.copyhead.sample`), whose Euler discretisation is biased by
``O(step size)``. The data set is the one :func:`jaxattn.copyhead.sample` uses (``data_seed``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxattn.copyhead import network, task
from jaxattn.copyhead._config import CopyData
from jaxattn.copyhead.data import data_key
from jaxattn.core import checks, diagnostics, precision
from jaxattn.core.attention import prefix_mask


def nuts_reference(
    config: CopyData,
    P: int,
    *,
    N: float = 1.0,
    data_seed: int = 0,
    n_warmup: int = 500,
    n_samples: int = 1000,
    n_chains: int = 4,
    seed: int = 0,
    start: str = "uniform",
) -> dict[str, np.ndarray | float]:
    """NUTS draws of the order parameters under ``exp(-N U)`` on the ``P`` sequences of
    ``data_seed`` (Spec B, section 4: the reference that validates the SGLD sampler), float64,
    from random starts ``G ~ N(0, 0.1^2)`` near the uniform state, or from the copy state.

    Chains from both starts that agree show that NUTS crosses between the basins within its run,
    which is when it checks the umbrella windows across a barrier.

    Args:
        config: the network (its ``arch``); validated here.
        P: number of training sequences.
        N: inverse temperature.
        data_seed: the data set (as in :func:`jaxattn.copyhead.sample`).
        n_warmup: NUTS warm-up steps per chain.
        n_samples: draws per chain.
        n_chains: chains (vectorized).
        seed: seed of the starts and of NUTS.
        start: ``"uniform"`` (``G ~ N(0, 0.1^2)``, near the uniform state) or ``"copy"`` (``G = c S``, ``c`` the config's
            ``c_copy``); ``W ~ N(0, 1/V)`` in both (:func:`jaxattn.copyhead.network.init`).

    Returns:
        ``prev_weight``, ``a1``, ``aG``, ``U`` as ``(chain, draw)`` arrays, and per observable its
            posterior ``mean``, Monte Carlo ``se`` (from the effective sample size), split R-hat and
            effective sample size, under keys ``"<name>_mean"``, ``"<name>_se"``, ``"<name>_rhat"``,
            ``"<name>_ess"`` (:mod:`jaxattn.core.diagnostics`).
    """
    from numpyro.infer import MCMC, NUTS

    config = config.validate()
    P = checks.integer("P", P, 1)
    checks.positive("N", N)
    start = checks.choice("start", start, ("uniform", "copy"))
    for name, v in (("n_warmup", n_warmup), ("n_samples", n_samples), ("n_chains", n_chains)):
        checks.integer(name, v, 1)
    arch = config.arch
    with precision.float64():
        X = task.one_hot(task.tokens(data_key(data_seed), P, arch.L, arch.V), arch.V, jnp.float64)
        st = network.stats(X, prefix_mask(P, P))
        pot = lambda p: N * network.loss(p, st, arch)  # noqa: E731
        keys = jax.random.split(jax.random.key(seed), n_chains + 1)
        copy = start == "copy"
        init = jax.vmap(lambda k: network.init(k, arch, 0.1, config.c_copy, copy, jnp.float64))(keys[1:])
        mcmc = MCMC(
            NUTS(potential_fn=pot),
            num_warmup=n_warmup,
            num_samples=n_samples,
            num_chains=n_chains,
            chain_method="vectorized",
            progress_bar=False,
        )
        mcmc.run(keys[0], init_params=init)
        draws = mcmc.get_samples(group_by_chain=True)

        def obs(p):
            return dict(network.order_parameters(p.G, arch), U=network.loss(p, st, arch))

        out = jax.device_get(jax.vmap(jax.vmap(obs))(draws))
    draws_np = {k: np.asarray(v) for k, v in out.items()}
    res: dict[str, np.ndarray | float] = dict(draws_np)
    for k, x in draws_np.items():
        n_eff = diagnostics.ess(x)
        res[f"{k}_mean"] = float(x.mean())
        res[f"{k}_se"] = float(x.std() / np.sqrt(max(n_eff, 1.0)))
        res[f"{k}_rhat"] = diagnostics.split_rhat(x)
        res[f"{k}_ess"] = n_eff
    return res
