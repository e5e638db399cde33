"""The copy task's data on the engine: the keys of data sets, starts and chains, and the
statistics of a stream's data set and of each member's first ``P`` sequences.

A data set of ``seed`` is the sequences ``i = 0, 1, ...`` drawn from ``fold_in`` of
:func:`data_key` and ``i``: the first ``P`` of them are the data set of size ``P``, so a grid
over ``P`` pads every data set to its largest ``P`` and masks the rest (:func:`member_stats`).
"""

from __future__ import annotations

import jax
from jaxtyping import Array, ArrayLike, PRNGKeyArray

from jaxattn.copyhead import network, task
from jaxattn.copyhead._config import CopyData
from jaxattn.core import keys
from jaxattn.core.attention import prefix_mask


def data_key(seed: ArrayLike) -> PRNGKeyArray:
    """The PRNG keys of the data sets of ``seed`` (``fold_in(key(seed), 1)``; any shape, all at
    once: :func:`jaxattn.core.keys.derive`).

    Args:
        seed: the data seeds (a scalar or an array).

    Returns:
        Typed PRNG keys of the shape of ``seed``; sequence ``i`` is drawn from ``fold_in`` of
            one and ``i`` (:func:`jaxattn.copyhead.task.tokens`).
    """
    return keys.derive(seed, 1)


def init_key(seed: ArrayLike) -> PRNGKeyArray:
    """The PRNG keys of the random starts of ``seed`` (``fold_in(key(seed), 0)``).

    Args:
        seed: the runs' seeds (a scalar or an array).

    Returns:
        Typed PRNG keys of the shape of ``seed``.
    """
    return keys.derive(seed, 0)


def chain_key(chain_seed: int, chain: ArrayLike) -> PRNGKeyArray:
    """The PRNG keys of the noise of SGLD chains ``chain`` (``fold_in(fold_in(key(chain_seed), 2),
    chain)``).

    Args:
        chain_seed: seed of the chains' noise.
        chain: indices of the chains (a scalar or an array).

    Returns:
        Typed PRNG keys of the shape of ``chain``.
    """
    return keys.derive(chain_seed, 2, chain)


def test_stats(config: CopyData) -> network.CopyStats:
    """The statistics of the test sequences (drawn from ``test_seed``).

    Args:
        config: the network and the test set (``n_test``, ``test_seed``).

    Returns:
        Named tuple :class:`~jaxattn.copyhead.network.CopyStats` of the ``n_test`` test sequences.
    """
    X = task.one_hot(task.tokens(jax.random.key(config.test_seed), config.n_test, config.L, config.V), config.V)
    return network.stats(X)


def test_bytes(config: CopyData) -> int:
    """Memory :func:`test_stats` needs: the tokens and their one-hot embedding, twice over for
    the counts' workspace (so that a test set too large is refused before it is drawn).

    Args:
        config: the network and the test set.

    Returns:
        Bytes.
    """
    return 2 * 4 * config.n_test * config.L * (config.V + 1)


def stream_data(arch: network.CopyArch, keys: PRNGKeyArray, n_max: int) -> Array:
    """One-hot tokens of each stream's data set, drawn once per stream: sequence ``i`` of a
    stream is :func:`jaxattn.copyhead.task.tokens`'s ``i``-th, so ``P`` sequences are the first
    ``P`` of ``n_max``.

    Args:
        arch: the network (``L``, ``V``).
        keys: one data key per stream, shape ``(S,)``.
        n_max: sequences per stream.

    Returns:
        One-hot tokens, shape ``(S, n_max, L, V)``.
    """
    return task.one_hot(jax.vmap(lambda k: task.tokens(k, n_max, arch.L, arch.V))(keys), arch.V)


def member_stats(X: Array, P: Array, n_max: int) -> network.CopyStats:
    """Statistics of the first ``P`` sequences of each member's stream.

    Args:
        X: each stream's one-hot tokens, shape ``(S, n_max, L, V)`` (:func:`stream_data`).
        P: each member's number of sequences, shape ``(S, M)``.
        n_max: sequences per stream.

    Returns:
        :class:`~jaxattn.copyhead.network.CopyStats` with leading axes ``(S, M)``.
    """
    return jax.vmap(lambda x, ps: jax.vmap(lambda p: network.stats(x, prefix_mask(p, n_max)))(ps))(X, P)
