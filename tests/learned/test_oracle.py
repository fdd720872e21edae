"""LearnedOracle: the oracle protocol, pytree behaviour, the exact law of one order, and use
through ``AnyOrderAR`` and ``MCMC(AutospecKernel(model))``."""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
from numpyro.infer import MCMC  # noqa: E402

from numpyro_autospec import AnyOrderAR, AutospecKernel  # noqa: E402
from numpyro_autospec.errors import OracleError
from numpyro_autospec.learned import LearnedOracle, MaskedMLP  # noqa: E402
from numpyro_autospec.learned._oracle import learned_log_marginals
from numpyro_autospec.oracles import AnyOrderOracle, validate_oracle  # noqa: E402
from tests.learned.trained import (  # noqa: E402
    N,
    Q,
    all_masks,
    fresh_network,
    trained,
    trained_oracle,
)


class LogitNetwork(eqx.Module):
    """A network returning unnormalized logits (a plain linear map of the pinned one-hots)."""

    weight: jax.Array
    num_positions: int = eqx.field(static=True, default=N)
    num_categories: int = eqx.field(static=True, default=Q)

    def __call__(self, x, mask):
        inputs = jnp.where(mask[:, None], jax.nn.one_hot(x, Q), 0.0).reshape(-1)
        return (self.weight @ inputs).reshape(N, Q) + 5.0


@pytest.mark.parametrize("which", ["fresh", "trained"])
def test_protocol_and_validation(which):
    network = fresh_network() if which == "fresh" else trained()[0]
    oracle = LearnedOracle(network)
    assert isinstance(oracle, AnyOrderOracle)
    assert (oracle.num_positions, oracle.num_categories) == (N, Q)
    validate_oracle(oracle, N, Q, name=which, num_probes=32)
    masks = jnp.asarray(all_masks())
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.integers(0, Q, masks.shape), jnp.int32)
    other = jnp.where(masks, x, jnp.asarray(rng.integers(0, Q, masks.shape), jnp.int32))
    answers = np.asarray(jax.vmap(oracle)(x, masks), np.float64)
    np.testing.assert_array_equal(answers, np.asarray(jax.vmap(oracle)(other, masks)))
    np.testing.assert_allclose(np.log(np.exp(answers).sum(-1)), 0.0, atol=1e-6)
    np.testing.assert_allclose(answers, np.asarray(jax.vmap(network)(x, masks)), atol=1e-6)


def test_plain_logits_are_normalized_by_the_oracle():
    network = LogitNetwork(jax.random.normal(jax.random.PRNGKey(0), (N * Q, N * Q)))
    oracle = LearnedOracle(network)
    validate_oracle(oracle, N, Q)
    x, mask = jnp.array([0, 1, 2, 0]), jnp.array([True, True, False, False])
    expected = jax.nn.log_softmax(network(x, mask), axis=-1)
    np.testing.assert_allclose(np.asarray(oracle(x, mask)), np.asarray(expected), atol=1e-6)
    with pytest.raises(OracleError, match="not normalized"):
        validate_oracle(network, N, Q)  # the network alone breaks the contract


def test_construction_errors():
    with pytest.raises(ValueError, match="num_positions must be a positive integer, got None"):
        LearnedOracle(lambda x, mask: jnp.zeros((N, Q)))
    wrong = LogitNetwork(jnp.zeros((N * Q, N * Q)), num_categories=2)
    with pytest.raises(OracleError, match=r"could not be traced|shape \(4, 2\)"):
        LearnedOracle(wrong)


def test_jit_takes_the_oracle_as_an_argument_and_compiles_once():
    traces = []

    @jax.jit
    def first_rows(oracle, x, mask):
        traces.append(None)
        return oracle(x, mask)[0]

    x, mask = jnp.zeros(N, jnp.int32), jnp.zeros(N, bool)
    for seed in range(3):
        oracle = LearnedOracle(fresh_network(seed))
        np.testing.assert_allclose(first_rows(oracle, x, mask), oracle(x, mask)[0], atol=1e-6)
    assert len(traces) == 1
    # identity semantics: usable as a static field (AnyOrderAR keeps its oracle there)
    oracle = trained_oracle()
    assert oracle == oracle and oracle != LearnedOracle(oracle.network)
    assert isinstance(hash(oracle), int)
    restored = jax.tree.unflatten(*reversed(jax.tree.flatten(oracle)))
    assert eqx.tree_equal(restored.network, oracle.network) and restored.num_categories == Q


def test_core_is_the_class():
    oracle = trained_oracle()
    x, mask = jnp.array([2, 1, 0, 1]), jnp.array([False, True, True, False])
    np.testing.assert_array_equal(
        np.asarray(learned_log_marginals(oracle.network, x, mask)), np.asarray(oracle(x, mask))
    )


def test_sequential_law_is_the_chain_rule_of_any_order_ar():
    """Enumeration in ``sequential_log_probs`` against ``AnyOrderAR(order=...).log_prob``
    (an independent chain-rule implementation), with and without observed sites."""
    oracle = trained_oracle()
    order = np.array([2, 0, 3, 1])
    configurations = oracle.configurations()
    law = oracle.sequential_log_probs(order)
    assert law.shape == (Q,) * N
    assert np.exp(law).sum() == pytest.approx(1.0, abs=1e-9)
    chain_rule = AnyOrderAR(oracle, N, Q, order=order).log_prob(jnp.asarray(configurations))
    np.testing.assert_allclose(law.ravel(), np.asarray(chain_rule, np.float64), atol=1e-5)

    mask = np.array([False, True, False, False])
    values = np.array([0, 2, 0, 0])
    infill = oracle.sequential_log_probs(order, values, mask)
    off = configurations[:, 1] != 2
    assert np.all(infill.ravel()[off] == -np.inf)
    assert np.exp(infill).sum() == pytest.approx(1.0, abs=1e-9)
    distribution = AnyOrderAR(oracle, N, Q, observed=values, observed_mask=mask, order=order)
    expected = np.asarray(distribution.log_prob(jnp.asarray(configurations[~off])), np.float64)
    np.testing.assert_allclose(infill.ravel()[~off], expected, atol=1e-5)


def test_trained_network_is_inconsistent():
    """Different orders give different laws: there is no joint behind the conditionals, so
    exactness means the law of sequential sampling with the same order."""
    oracle = trained_oracle()
    laws = [
        np.exp(oracle.sequential_log_probs(order)).ravel() for order in ([0, 1, 2, 3], [3, 2, 1, 0])
    ]
    assert 0.5 * np.abs(laws[0] - laws[1]).sum() > 0.05


def test_sequential_law_errors():
    oracle = trained_oracle()
    with pytest.raises(ValueError, match=r"not a permutation of range\(4\)"):
        oracle.sequential_log_probs([0, 0, 1, 2])
    with pytest.raises(ValueError, match=r"value 3 at index 1 is outside the support \[0, 3\)"):
        oracle.sequential_log_probs([0, 1, 2, 3], [0, 3, 0, 0], [False, True, False, False])
    big = LearnedOracle(MaskedMLP(12, 3, hidden_size=2, key=jax.random.PRNGKey(0)))
    with pytest.raises(ValueError, match=r"q\^n = 3\^12 configurations is too many"):
        big.configurations()


def test_autospec_kernel_draws_from_a_learned_site():
    """``MCMC(AutospecKernel(model))`` with an ``AnyOrderAR(LearnedOracle(...))`` site (the
    default autospec method, the oracle validated at init)."""
    oracle = trained_oracle()

    def model():
        x = numpyro.sample("x", AnyOrderAR(oracle, num_positions=N, num_categories=Q))
        numpyro.deterministic("total", x.sum())

    mcmc = MCMC(AutospecKernel(model), num_warmup=2, num_samples=12, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), extra_fields=("rounds", "queries"))
    samples, extra = mcmc.get_samples(), mcmc.get_extra_fields()
    x = np.asarray(samples["x"])
    assert x.shape == (12, N) and np.issubdtype(x.dtype, np.integer)
    assert x.min() >= 0 and x.max() < Q
    np.testing.assert_array_equal(np.asarray(samples["total"]), x.sum(1))
    assert len({tuple(row) for row in x}) > 1
    rounds, queries = np.asarray(extra["rounds"]), np.asarray(extra["queries"])
    assert rounds.shape == queries.shape == (12,)
    assert np.all(rounds >= 1) and np.all(queries >= rounds)
