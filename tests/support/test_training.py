"""The any-order objective: unbiased for the order-averaged NLL, it trains a network towards
the data's law; data and settings are checked with readable errors."""

import itertools
import types

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from numpyro_autospec.errors import InputError  # noqa: E402
from numpyro_autospec.learned import LearnedOracle
from tests.gof import mean_z_test  # noqa: E402
from tests.learned.trained import (  # noqa: E402
    N,
    Q,
    fresh_network,
    table_data,
    table_probs,
    trained,
)

from support.training import any_order_loss, fit, order_averaged_nll

ORDERS = list(itertools.permutations(range(N)))


def order_log_laws(oracle: LearnedOracle) -> np.ndarray:
    r"""``[24, Q**N]``: :math:`\log p_\sigma` for every order :math:`\sigma`, by enumeration."""
    return np.stack([oracle.sequential_log_probs(order).ravel() for order in ORDERS])


def mixture_law(oracle: LearnedOracle) -> np.ndarray:
    """The sampler's law with a uniformly random order: the mean of p_sigma over all orders."""
    return np.exp(order_log_laws(oracle)).mean(axis=0)


def order_averaged_kl(oracle: LearnedOracle, probs: np.ndarray) -> float:
    r""":math:`\mathbb{E}_\sigma \mathrm{KL}(\mu \,\|\, p_\sigma)` for the table
    :math:`\mu`: by the chain rule of KL, the order-averaged expected KL divergence between the
    table's conditionals :math:`\mu(x_{\sigma(k)} \mid x_{\sigma(<k)})` and the network's."""
    return float(np.mean(np.sum(probs * (np.log(probs) - order_log_laws(oracle)), axis=1)))


def test_loss_is_unbiased_for_the_order_averaged_nll():
    r"""20 000 one-query estimates of :math:`L(x)` for each of three configurations against
    the exact average over all 24 orders (z-test, p > 1e-4), and 2000 whole-order estimates
    (``order_averaged_nll``) of each: both estimate the same :math:`L(x)` without bias."""
    network, _ = trained()
    x = table_data()[:3]
    codes = np.ravel_multi_index(tuple(x.T), (Q,) * N)
    exact = -order_log_laws(LearnedOracle(network))[:, codes].mean(axis=0)
    keys = jax.random.split(jax.random.PRNGKey(0), (20_000, 3))
    single = jax.vmap(any_order_loss, in_axes=(None, 0, 0))  # one example per batch
    estimates = jax.jit(jax.vmap(single, in_axes=(None, 0, None)))(
        network, keys, jnp.asarray(x)[:, None, :]
    )
    mean_z_test(np.asarray(estimates, np.float64), exact)
    whole_orders = order_averaged_nll(jax.random.PRNGKey(1), network, np.repeat(x, 2000, 0))
    mean_z_test(whole_orders.reshape(3, 2000).T, exact)


def test_training_decreases_the_loss_and_fits_the_table():
    probs = table_probs()
    fresh = LearnedOracle(fresh_network())
    network, losses = trained()
    oracle = LearnedOracle(network)
    assert losses.shape == (300,) and np.all(np.isfinite(losses))
    entropy = -np.sum(probs * np.log(probs))
    assert losses[-50:].mean() < losses[:20].mean() - 0.3
    # the order-averaged conditionals moved towards the table's
    before, after = order_averaged_kl(fresh, probs), order_averaged_kl(oracle, probs)
    assert after < 0.5 * before
    # the objective is near its value under the table: E_mu L = H(mu) + E_sigma KL(mu || p_sigma)
    assert losses[-50:].mean() == pytest.approx(entropy + after, abs=0.25)
    # so did the sampler's law (random order): total variation to the table
    tv_before = 0.5 * np.abs(mixture_law(fresh) - probs).sum()
    tv_after = 0.5 * np.abs(mixture_law(oracle) - probs).sum()
    assert tv_after < 0.6 * tv_before
    # order_averaged_nll on the data: down too
    data = table_data()[:500]
    nll_before = order_averaged_nll(jax.random.PRNGKey(3), fresh.network, data).mean()
    nll_after = order_averaged_nll(jax.random.PRNGKey(3), network, data).mean()
    assert nll_after < nll_before - 0.3


def test_fit_is_deterministic_and_accepts_an_optimizer():
    """Same key, same losses; the settings of ``trained()`` reuse its compiled step."""
    optax = pytest.importorskip("optax")
    data = table_data()
    first = fit(jax.random.PRNGKey(0), fresh_network(), data, 5, batch_size=64, learning_rate=1e-2)
    again = fit(jax.random.PRNGKey(0), fresh_network(), data, 5, batch_size=64, learning_rate=1e-2)
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[1], trained()[1][:5])  # another key
    frozen, losses = fit(jax.random.PRNGKey(0), fresh_network(), data, 5, optimizer=optax.sgd(0.0))
    assert np.ptp(losses) > 0  # new batches and masks at each step
    assert np.array_equal(frozen.layers[0].weight, fresh_network().layers[0].weight)


@pytest.mark.parametrize(
    "data, message",
    [
        (
            np.zeros((5, 3), np.int32),
            r"shape \[num_examples >= 1, num_positions = 4\], got \(5, 3\)",
        ),
        (np.zeros(4, np.int32), r"got \(4,\)"),
        (np.zeros((0, 4), np.int32), r"got \(0, 4\)"),
        (np.zeros((5, 4)), "integer dtype, got float64"),
        (
            np.array([[0, 1, 2, 0], [0, 0, 3, 0]]),
            r"value 3 at index \(1, 2\) is outside the categories \[0, 3\)",
        ),
        (np.array([[0, -1, 2, 0]]), r"value -1 at index \(0, 1\)"),
    ],
)
def test_data_errors_name_the_shape_or_value(data, message):
    with pytest.raises(ValueError, match=message):
        fit(jax.random.PRNGKey(0), fresh_network(), data, 1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_steps": 0}, "num_steps must be a positive integer, got 0"),
        ({"batch_size": 2.0}, "batch_size must be a positive integer, got 2.0"),
        ({"learning_rate": -1.0}, "learning_rate must be positive and finite, got -1.0"),
    ],
)
def test_setting_errors(kwargs, message):
    arguments = {"num_steps": 1, "batch_size": 4, "learning_rate": 1e-3} | kwargs
    with pytest.raises(ValueError, match=message):
        fit(jax.random.PRNGKey(0), fresh_network(), table_data()[:8], **arguments)


@pytest.mark.parametrize(
    "sizes, message",
    [
        ({}, "num_positions must be a positive integer, got None"),
        ({"num_positions": 4, "num_categories": True}, "num_categories must be .*, got True"),
        ({"num_positions": 0, "num_categories": 3}, "num_positions must be .*, got 0"),
    ],
)
def test_networks_without_positive_integer_sizes_are_refused_as_the_oracle_refuses_them(
    sizes, message
):
    """``fit`` and :class:`LearnedOracle` share one check of the sizes a network carries."""
    network = types.SimpleNamespace(**sizes)
    with pytest.raises(InputError, match="fit: the network attribute SimpleNamespace." + message):
        fit(jax.random.PRNGKey(0), network, table_data()[:8], 1)
    with pytest.raises(
        InputError,
        match="LearnedOracle: the network attribute SimpleNamespace." + message,
    ):
        LearnedOracle(network)
