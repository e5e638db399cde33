"""Invalid input raises a ValueError that names the parameter."""

import jax
import numpy as np
import pytest

from jaxattn import slm
from jaxattn.slm import priors, task


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: priors.discrete([[1.0, 0.0], [0.0, 1.0]], [0.7, 0.7]), "weights"),
        (lambda: priors.discrete([[1.0, 0.0], [0.0, 1.0]], [0.5, 0.3, 0.2]), "weights"),
        (lambda: priors.discrete([[1.0, 0.0], [0.0, 1.0]], [1.2, -0.2]), "weights"),
        (lambda: priors.discrete([[1.0, np.nan]], [1.0]), "support"),
        (lambda: priors.flipped_spike([1.0, -1.0]), "amplitude"),
        (lambda: priors.flipped_spike([1.0, 1.0], mean=[0.0]), "mean"),
        (lambda: priors.gaussian([0.0, 0.0], [-1.0, 1.0]), "cov"),
        (lambda: priors.gaussian([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]]), "cov"),
        (lambda: priors.gaussian([0.0, np.inf], 1.0), "mean"),
        (lambda: priors.gaussian([0.0, 0.0], np.eye(3)), "cov"),
        (lambda: priors.onehot(2, -1.0), "nu"),
        (lambda: priors.onehot(0, 1.0), "F"),
        (lambda: task.check_dims(D=10, L=1, F=2), "L"),
        (lambda: task.check_dims(D=2, L=4, F=3), "D"),
        (lambda: task.latent_directions(jax.random.key(0), 2, 3), "D"),
    ],
)
def test_invalid_data_model(make, name):
    with pytest.raises(ValueError, match=name):
        make()


@pytest.mark.parametrize(
    "config, grid, name",
    [
        (dict(D=1), {}, "D"),
        (dict(activation="relu"), {}, "activation"),
        (dict(aggregation="max"), {}, "aggregation"),
        (dict(t_max=-1.0), {}, "t_max"),
        (dict(t_max=float("nan")), {}, "t_max"),
        (dict(batch_size=0), {}, "batch_size"),
        (dict(n_test=0), {}, "n_test"),
        (dict(sigma0=-0.1), {}, "sigma0"),
        (dict(times=(-1.0, 2.0)), {}, "times"),
        ({}, dict(L=[1]), "L"),
        ({}, dict(H=[0, 2]), "H"),
        ({}, dict(eta=[0.0]), "eta"),
        ({}, dict(eta=[np.nan]), "eta"),
        ({}, dict(signal=[-1.0]), "signal"),
        ({}, dict(seed=[1.5]), "seed"),
        ({}, dict(H=[2, 2]), "H"),
    ],
)
def test_invalid_training_input(config, grid, name):
    with pytest.raises(ValueError, match=name):
        slm.train(slm.SLMConfig(**config), **grid)
