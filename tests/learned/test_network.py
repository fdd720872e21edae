"""MaskedMLP: the input encoding, normalized rows, dependence on x only through x[mask]."""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from numpyro_autospec.learned import MaskedMLP  # noqa: E402
from numpyro_autospec.learned._network import masked_inputs
from tests.learned.trained import N, Q, all_masks, fresh_network  # noqa: E402

batched = eqx.filter_jit(jax.vmap(lambda network, x, mask: network(x, mask), (None, 0, 0)))


def random_queries(seed, num_queries, n=N, q=Q):
    rng = np.random.default_rng(seed)
    return (
        jnp.asarray(rng.integers(0, q, (num_queries, n)), jnp.int32),
        jnp.asarray(rng.random((num_queries, n)) < 0.5),
    )


def test_input_is_the_one_hot_of_pinned_sites_then_the_mask():
    x = jnp.array([2, 0, 1, 1])
    mask = jnp.array([True, False, True, False])
    inputs = np.asarray(masked_inputs(x, mask, Q))
    assert inputs.shape == (N * Q + N,)
    np.testing.assert_array_equal(
        inputs[: N * Q].reshape(N, Q), [[0, 0, 1], [0] * 3, [0, 1, 0], [0] * 3]
    )
    np.testing.assert_array_equal(inputs[N * Q :], [1, 0, 1, 0])


def test_shapes_parameters_and_normalized_rows():
    network = fresh_network(hidden_size=8)
    assert (network.num_positions, network.num_categories) == (N, Q)
    assert [layer.weight.shape for layer in network.layers] == [(8, N * Q + N), (8, 8), (N * Q, 8)]
    xs, masks = random_queries(0, 32)
    answers = np.asarray(batched(network, xs, masks), np.float64)
    assert answers.shape == (32, N, Q) and answers.dtype == np.float64
    np.testing.assert_allclose(np.log(np.exp(answers).sum(-1)), 0.0, atol=1e-6)
    # a random network is not trivially uniform
    assert np.ptp(answers) > 0.05


def test_answer_depends_on_x_only_through_the_pinned_sites():
    network = fresh_network(seed=1)
    rng = np.random.default_rng(1)
    masks = jnp.asarray(all_masks())
    x = jnp.asarray(rng.integers(0, Q, (len(masks), N)), jnp.int32)
    scrambled = jnp.where(masks, x, jnp.asarray(rng.integers(0, Q, (len(masks), N)), jnp.int32))
    np.testing.assert_array_equal(
        np.asarray(batched(network, x, masks)), np.asarray(batched(network, scrambled, masks))
    )


def test_the_mask_is_an_input():
    """Pinning a site to value 0 is not the same query as leaving it free."""
    network = fresh_network(seed=2)
    x = jnp.zeros(N, jnp.int32)
    free = network(x, jnp.zeros(N, bool))
    pinned = network(x, jnp.array([True, False, False, False]))
    assert float(jnp.max(jnp.abs(free[1:] - pinned[1:]))) > 1e-4


def test_network_is_a_pytree_of_weights_with_static_sizes():
    network = fresh_network(hidden_size=8)
    leaves = jax.tree.leaves(network)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves)
    assert len(leaves) == 6  # three layers: weight and bias each
    doubled = jax.tree.map(lambda leaf: 2 * leaf, network)
    assert doubled.num_positions == N and doubled.activation is jax.nn.gelu


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_positions": 0}, "num_positions must be a positive integer, got 0"),
        ({"num_categories": 2.5}, "num_categories must be a positive integer, got 2.5"),
        ({"hidden_size": True}, "hidden_size must be a positive integer, got True"),
        ({"depth": 0}, "depth must be a positive integer, got 0"),
    ],
)
def test_construction_errors(kwargs, message):
    arguments = {"num_positions": N, "num_categories": Q} | kwargs
    with pytest.raises(ValueError, match=message):
        MaskedMLP(**arguments, key=jax.random.PRNGKey(0))


def test_query_shape_error_names_the_shapes():
    network = fresh_network()
    with pytest.raises(
        ValueError, match=r"shape \(4,\) \(one query; vmap for a batch\), got \(2, 4\)"
    ):
        network(jnp.zeros((2, N), jnp.int32), jnp.zeros((2, N), bool))
