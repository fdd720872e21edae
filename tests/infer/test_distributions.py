"""AnyOrderAR and StochasticLocalization as NumPyro distributions: sampling (exact, sequential,
jit-able, Predictive), exact densities where they exist, clear errors where they do not."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from numpyro.infer import Predictive

from numpyro_autospec import AnyOrderAR, StochasticLocalization
from numpyro_autospec.engine import sequential_run
from numpyro_autospec.errors import InputError
from numpyro_autospec.oracles import (
    CurieWeissOracle,
    HopfieldOracle,
    IsingChainOracle,
    PerturbedOracle,
    TableOracle,
)
from numpyro_autospec.processes import AnyOrderProcess, uniform_times
from tests.engine.broken import break_target_steps
from tests.gof import assert_gof, chisquare_gof, encode_configurations
from tests.tables import random_table

N, Q = 4, 3


def all_configurations(n=N, q=Q):
    return np.stack(np.meshgrid(*[np.arange(q)] * n, indexing="ij"), -1).reshape(-1, n)


# ---------------------------------------------------------------------------------- sample
def test_sample_shape_dtype_and_sequential_draws():
    oracle = random_table(0)
    d = AnyOrderAR(oracle, N, Q)
    assert d.event_shape == (N,) and d.batch_shape == ()
    assert d.support.is_discrete and d.support.event_dim == 1
    key = jax.random.PRNGKey(0)
    one = d.sample(key)
    assert one.shape == (N,) and one.dtype == jnp.int32
    many = jax.jit(lambda k: d.sample(k, (2, 3)))(key)
    assert many.shape == (2, 3, N)
    # one key per draw: the key itself for one draw, split(key, D) for D draws
    process = AnyOrderProcess(oracle, N, Q)
    np.testing.assert_array_equal(one, sequential_run(process, key[None]).value[0])
    expected = sequential_run(process, jax.random.split(key, 6)).value.reshape(2, 3, N)
    np.testing.assert_array_equal(many, expected)
    assert d.sample(key, (0,)).shape == (0, N)


# Three settings whose draws are tested against their exact law: each builds the distribution,
# its number of categories and the exact law of a draw over the configurations (C order, as
# encode_configurations codes them), for the exactness tests below and for the wrong sampler of
# test_a_wrong_sequential_sampler_fails_the_same_test.
INFILL_OBSERVED, INFILL_MASK = np.array([0, 2, 0, 1]), np.array([False, True, False, True])
SITE_LAW = np.array([0.2, 0.3, 0.5])


def independent(x, mask):
    """A plain function oracle of a product law: every row is ``SITE_LAW``."""
    return jnp.broadcast_to(jnp.log(jnp.asarray(SITE_LAW, jnp.float32)), (5, 3))


def table_setting():
    oracle = random_table(1)
    return AnyOrderAR(oracle, N, Q), Q, np.exp(oracle.log_probs).ravel()


def infilling_setting():
    oracle = random_table(2)
    d = AnyOrderAR(oracle, N, Q, observed=INFILL_OBSERVED, observed_mask=INFILL_MASK)
    return d, Q, np.exp(oracle.conditional_log_probs(INFILL_OBSERVED, INFILL_MASK)).ravel()


def product_law_setting():
    # the product of SITE_LAW over the 5 sites, 243 configurations
    d = AnyOrderAR(independent, num_positions=5, num_categories=3)
    return d, 3, functools.reduce(np.multiply.outer, [SITE_LAW] * 5).ravel()


SETTINGS = {
    "table": table_setting,
    "infilling": infilling_setting,
    "product-law": product_law_setting,
}


def draws_and_law(name, seed, num_draws):
    """``num_draws`` draws of ``AnyOrderAR.sample`` in setting ``name`` (key ``seed``): the
    draws, their configuration codes and the exact law."""
    distribution, num_categories, law = SETTINGS[name]()
    x = np.asarray(distribution.sample(jax.random.PRNGKey(seed), (num_draws,)))
    return x, encode_configurations(x, num_categories), law


def test_sample_is_exact_on_a_table():
    """20 000 sequential draws, chi-square over the 81 configurations (p > 1e-4; 75 cells after
    pooling, where 20 000 draws catch an absolute error of 0.016 in a cell of probability 0.05
    at power 0.99, ``power_draws(0.016, 0.05, num_cells=75)``)."""
    _, codes, law = draws_and_law("table", 1, 20_000)
    assert_gof(codes, law, label="sample", catches=(0.016, 0.05))


def test_infilling_sample_keeps_observed_entries_and_is_exact():
    """Sites 1 and 3 pinned: 20 000 draws keep them, chi-square against
    ``TableOracle.conditional_log_probs`` (p > 1e-4; 9 cells, none pooled, where 20 000 draws
    catch an absolute error of 0.019 in the cell of probability 0.14 at power 0.99,
    ``power_draws(0.019, 0.14, num_cells=9)``: 18 394)."""
    x, codes, law = draws_and_law("infilling", 2, 20_000)
    assert (x[:, INFILL_MASK] == INFILL_OBSERVED[INFILL_MASK]).all()
    assert_gof(codes, law, label="infilling", catches=(0.019, 0.14))


def test_predictive_prior_check():
    oracle = CurieWeissOracle(12, beta=1.0)

    def model():
        x = numpyro.sample("x", AnyOrderAR(oracle, 12, 2))
        numpyro.deterministic("ups", x.sum())

    prior = Predictive(model, num_samples=50)(jax.random.PRNGKey(3))
    # the draws are known: Predictive splits its key once per draw, handlers.seed splits each
    # draw's key once per site, and the site draws sequentially with the second key
    site_keys = jax.vmap(lambda k: jax.random.split(k)[1])(
        jax.random.split(jax.random.PRNGKey(3), 50)
    )
    expected = sequential_run(AnyOrderProcess(oracle, 12, 2), site_keys).value
    np.testing.assert_array_equal(prior["x"], expected)
    np.testing.assert_array_equal(prior["ups"], np.asarray(expected).sum(-1))


def test_plain_function_oracle():
    """A plain function oracle of a product law: 20 000 draws, chi-square over the 243
    configurations (p > 1e-4; 243 cells, none pooled, where 20 000 draws catch an absolute
    error of 0.016 in the cell of probability 0.5**5 at power 0.99, ``power_draws(0.016,
    0.03125, num_cells=243)``: 19 560); it has no joint log_prob without an order."""
    _, codes, law = draws_and_law("product-law", 5, 20_000)
    assert_gof(codes, law, label="product law", catches=(0.016, 0.03125))
    d = AnyOrderAR(independent, num_positions=5, num_categories=3)
    with pytest.raises(NotImplementedError, match="order"):
        d.log_prob(jnp.zeros(5, jnp.int32))


@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_wrong_sequential_sampler_fails_the_same_test(monkeypatch, name):
    """``AnyOrderAR.sample`` with every step drawn from its conditional squared and
    renormalized (``tempered_target_sample``, tests/engine/broken.py, traced into the sampling
    of this run) is rejected by the chi-square of the setting's exactness test at 500 draws:
    measured p = 8e-32 (table), 5e-22 (infilling), 2e-66 (product law); over keys 7, 8, 9 the
    largest is 5e-22, and 200 draws still give p <= 2e-9."""
    break_target_steps(monkeypatch)
    _, codes, law = draws_and_law(name, 7, 500)
    result = chisquare_gof(codes, law)
    assert result.p_value <= 1e-4, result


def test_pytree_round_trip():
    d = AnyOrderAR(
        random_table(0),
        N,
        Q,
        observed=np.array([1, 0, 0, 0]),
        observed_mask=np.eye(N, dtype=bool)[0],
    )
    leaves, treedef = jax.tree.flatten(d)
    again = jax.tree.unflatten(treedef, leaves)
    # a built-in oracle is data: its table is among the leaves and comes back
    assert any(leaf is d.oracle.log_probs for leaf in leaves)
    assert isinstance(again.oracle, TableOracle)
    np.testing.assert_array_equal(again.oracle.log_probs, d.oracle.log_probs)
    np.testing.assert_array_equal(again.observed_mask, d.observed_mask)
    np.testing.assert_array_equal(again.observed, d.observed)


def test_pytree_round_trip_keeps_a_plain_function_oracle_static():
    def uniform(x, mask):
        return jnp.full((N, Q), -jnp.log(Q))

    d = AnyOrderAR(uniform, N, Q)
    leaves, treedef = jax.tree.flatten(d)
    assert all(leaf is not uniform for leaf in leaves)
    assert jax.tree.unflatten(treedef, leaves).oracle is uniform


# ---------------------------------------------------------------------------------- log_prob
def test_log_prob_equals_the_table():
    oracle = random_table(3)
    configurations = all_configurations()
    log_p = AnyOrderAR(oracle, N, Q).log_prob(configurations)
    np.testing.assert_allclose(log_p, oracle.log_probs.ravel(), rtol=1e-5, atol=1e-5)
    outside = AnyOrderAR(oracle, N, Q).log_prob(jnp.array([[0, 3, 0, 0], [0, -1, 0, 0]]))
    assert np.all(np.isneginf(outside))


class _UndeclaredJoint:
    """The table's set form and joint, without subclassing ``AnyOrderOracle``."""

    def __init__(self, table):
        self.table = table

    def __call__(self, x, mask):
        return self.table(x, mask)

    def log_prob(self, x):
        return self.table.log_prob(x)


def test_the_exact_joint_is_the_oracle_s_declared_log_prob():
    """An oracle's exact joint is its override of ``AnyOrderOracle.log_prob``.  The same table
    as a plain function has none, and an undeclared ``log_prob`` is not used, with a warning
    (nothing is looked up by name)."""
    oracle = random_table(3)
    as_function = AnyOrderAR(lambda x, mask: oracle(x, mask), N, Q)
    assert AnyOrderAR(oracle, N, Q).has_joint_log_prob and not as_function.has_joint_log_prob
    with pytest.raises(NotImplementedError, match="no exact joint"):
        as_function.joint_log_prob(jnp.zeros(N, jnp.int32))
    undeclared = AnyOrderAR(_UndeclaredJoint(oracle), N, Q)
    assert not undeclared.has_joint_log_prob
    with pytest.warns(UserWarning, match="defines log_prob but is not an AnyOrderOracle"):
        undeclared.make_process("x")


def test_conditional_log_prob_with_observed_entries():
    oracle = random_table(4)
    observed, mask = np.array([2, 0, 1, 0]), np.array([True, False, True, False])
    d = AnyOrderAR(oracle, N, Q, observed=observed, observed_mask=mask)
    log_p = np.asarray(d.log_prob(all_configurations()))
    expected = oracle.conditional_log_probs(observed, mask).ravel()
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isfinite(log_p), finite)
    np.testing.assert_allclose(log_p[finite], expected[finite], atol=1e-4)


@pytest.mark.parametrize(
    "oracle",
    [CurieWeissOracle(6, beta=1.3, h=0.2), IsingChainOracle.uniform(6, coupling=0.7, field=0.1)],
    ids=["curie-weiss", "ising-chain"],
)
def test_conditional_log_prob_normalizes_for_structured_oracles(oracle):
    observed, mask = np.array([1, 0, 0, 1, 0, 0]), np.array([1, 0, 0, 1, 0, 1], bool)
    d = AnyOrderAR(oracle, 6, 2, observed=observed, observed_mask=mask)
    log_p = np.asarray(d.log_prob(all_configurations(6, 2)), np.float64)
    assert abs(np.logaddexp.reduce(log_p) - 0.0) < 1e-4
    assert np.all(np.isneginf(log_p[(all_configurations(6, 2)[:, mask] != observed[mask]).any(1)]))


def test_fixed_order_log_prob_is_exact_for_an_inconsistent_oracle():
    oracle = PerturbedOracle(random_table(5), 0.7, jax.random.PRNGKey(0))
    order = np.array([2, 0, 3, 1])
    observed, mask = np.array([0, 1, 0, 0]), np.array([False, True, False, False])
    d = AnyOrderAR(oracle, N, Q, observed=observed, observed_mask=mask, order=order)
    log_p = np.asarray(d.log_prob(all_configurations()))
    expected = oracle.sequential_log_probs(order, observed, mask).ravel()
    finite = np.isfinite(expected)
    np.testing.assert_allclose(log_p[finite], expected[finite], atol=1e-4)
    assert np.all(np.isneginf(log_p[~finite]))


def test_log_prob_without_an_exact_joint_explains_why():
    oracle = HopfieldOracle.random(jax.random.PRNGKey(0), 8, 2, beta=1.0)
    with pytest.raises(
        NotImplementedError, match=r"no exact joint log_prob and no order was given.*order=\.\.\."
    ):
        AnyOrderAR(oracle, 8, 2).log_prob(jnp.zeros(8, jnp.int32))


# ---------------------------------------------------------------------------------- errors
def test_constructor_errors():
    oracle = random_table(0)
    with pytest.raises(ValueError, match="num_positions=5 but the oracle"):
        AnyOrderAR(oracle, 5, Q)
    with pytest.raises(
        ValueError, match=r"^AnyOrderAR: observed given without observed_mask.*obs=values"
    ):
        AnyOrderAR(oracle, N, Q, observed=np.zeros(N, int))
    with pytest.raises(ValueError, match="^AnyOrderAR: observed_mask given without observed$"):
        AnyOrderAR(oracle, N, Q, observed_mask=np.ones(N, bool))
    with pytest.raises(ValueError, match="bool array of shape"):
        AnyOrderAR(oracle, N, Q, observed=np.zeros(N, int), observed_mask=np.ones(3, bool))
    with pytest.raises(ValueError, match="integer dtype"):
        AnyOrderAR(oracle, N, Q, observed=np.zeros(N), observed_mask=np.ones(N, bool))
    with pytest.raises(ValueError, match="not a permutation"):
        AnyOrderAR(oracle, N, Q, order=np.array([0, 0, 1, 2]))
    with pytest.raises(ValueError, match="must be concrete"):
        jax.jit(lambda m: AnyOrderAR(oracle, N, Q, observed=jnp.zeros(N, int), observed_mask=m))(
            jnp.ones(N, bool)
        )
    with pytest.raises(ValueError, match="shape"):
        AnyOrderAR(lambda x, mask: jnp.zeros((N, 2)), N, Q)  # wrong oracle output shape


def test_observed_value_outside_the_support_names_site_index_and_value():
    d = AnyOrderAR(
        random_table(0), N, Q, observed=np.array([0, 5, 0, 0]), observed_mask=np.ones(N, bool)
    )
    with pytest.raises(ValueError, match=r"site 'x': value 5 at index 1 is outside"):
        d.make_process("x")


def test_traced_observed_values_are_allowed():
    oracle = random_table(6)
    mask = np.array([True, False, False, False])

    @jax.jit
    def draw(value, key):
        return AnyOrderAR(oracle, N, Q, observed=value, observed_mask=mask).sample(key)

    x = draw(jnp.array([2, 0, 0, 0]), jax.random.PRNGKey(0))
    assert int(x[0]) == 2


# --------------------------------------------------------------------------- diffusion
def test_stochastic_localization():
    diffusion = pytest.importorskip("numpyro_autospec.processes._diffusion")
    from numpyro_autospec.denoisers import PointCloudDenoiser
    from numpyro_autospec.errors import TimeGridError

    points = jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    times = uniform_times(16, 50.0)
    d = StochasticLocalization(PointCloudDenoiser(points), dim=2, times=times)
    assert d.event_shape == (2,) and d.batch_shape == ()
    key = jax.random.PRNGKey(0)
    y = d.sample(key, (5,))
    assert y.shape == (5, 2)
    process = diffusion.DiffusionProcess(PointCloudDenoiser(points), 2, times)
    np.testing.assert_allclose(
        y, sequential_run(process, jax.random.split(key, 5)).value, atol=1e-6
    )
    np.testing.assert_allclose(d.times, times)
    with pytest.raises(NotImplementedError, match="no tractable density"):
        d.log_prob(y)
    with pytest.raises(TimeGridError, match=r"times must be strictly increasing: times\[2\]"):
        StochasticLocalization(PointCloudDenoiser(points), dim=2, times=np.array([0.0, 1.0, 0.5]))


def test_stochastic_localization_passes_its_speculation_variance_to_the_process():
    from numpyro_autospec.denoisers import PointCloudDenoiser

    denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0]]))
    times = uniform_times(8, 50.0)
    d = StochasticLocalization(denoiser, dim=2, times=times, speculation_variance=0.25)
    process = d.make_process("y")
    assert float(process.speculation_variance) == 0.25
    assert StochasticLocalization(denoiser, 2, times).make_process("y").speculation_variance is None
    # a pytree: the variance is data (flattened and rebuilt, e.g. by vmap over a latent)
    rebuilt = jax.tree.unflatten(*reversed(jax.tree.flatten(d)))
    assert float(rebuilt.speculation_variance) == 0.25
    # "posterior" is static (it changes the answers' shape): kept through flattening and jit
    posterior = StochasticLocalization(denoiser, 2, times, speculation_variance="posterior")
    assert posterior.make_process("y").posterior_response
    rebuilt = jax.tree.unflatten(*reversed(jax.tree.flatten(posterior)))
    assert rebuilt.make_process("y").posterior_response
    assert jax.jit(lambda d: d.sample(jax.random.PRNGKey(0)))(posterior).shape == (2,)
    # so is its rank, which sets the answers' shape (d + r + 1 + d * r)
    low = StochasticLocalization(
        denoiser, 2, times, speculation_variance="posterior", posterior_rank=1
    )
    rebuilt = jax.tree.unflatten(*reversed(jax.tree.flatten(low)))
    process = rebuilt.make_process("y")
    assert process.posterior_rank == 1
    assert process.query(process.init(jax.random.PRNGKey(0)), 0).shape == (2 + 1 + 1 + 2,)
    whole = StochasticLocalization(
        denoiser, 2, times, speculation_variance="posterior", posterior_rank=2
    )
    assert whole.make_process("y").posterior_rank is None  # r >= d: the whole Jacobian


@pytest.mark.parametrize(
    "variance, rank, message",
    [
        (None, 1, r"^posterior_rank=1 needs speculation_variance='posterior', got None$"),
        (0.5, 1, r"^posterior_rank=1 needs speculation_variance='posterior', got 0.5$"),
        ("posterior", 0, r"^posterior_rank must be a positive integer, got 0$"),
        ("posterior", 1.5, r"^posterior_rank must be a positive integer, got 1.5$"),
    ],
)
def test_stochastic_localization_refuses_a_bad_posterior_rank(variance, rank, message):
    from numpyro_autospec.denoisers import PointCloudDenoiser
    from numpyro_autospec.errors import DenoiserError

    denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(DenoiserError, match=message):
        StochasticLocalization(
            denoiser,
            2,
            np.linspace(0.0, 1.0, 5),
            speculation_variance=variance,
            posterior_rank=rank,
        )


@pytest.mark.parametrize(
    "variance, message",
    [
        (-1.0, r"^speculation_variance must be a positive finite scalar, got -1.0$"),
        (float("nan"), r"^speculation_variance must be a positive finite scalar, got nan$"),
        (np.ones(2), r"^speculation_variance must be a scalar, got shape \(2,\)$"),
        (
            "auto",
            r"^speculation_variance must be a positive finite scalar or 'posterior', got 'auto'$",
        ),
    ],
)
def test_stochastic_localization_refuses_a_bad_speculation_variance(variance, message):
    from numpyro_autospec.denoisers import PointCloudDenoiser
    from numpyro_autospec.errors import DenoiserError

    denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0]]))
    with pytest.raises(DenoiserError, match=message):
        StochasticLocalization(denoiser, 2, np.linspace(0.0, 1.0, 5), speculation_variance=variance)


def test_sizes_are_read_from_the_oracle():
    """An ``AnyOrderOracle`` declares ``n`` and ``q``: ``AnyOrderAR(oracle)`` reads them; a plain
    function declares none and must be given them; given sizes that disagree are refused."""
    oracle = random_table(0)
    d = AnyOrderAR(oracle)
    assert (d.num_positions, d.num_categories) == (N, Q) and d.event_shape == (N,)
    assert AnyOrderAR(oracle.__call__, N, Q).event_shape == (N,)
    with pytest.raises(InputError, match="num_positions not given, and oracle .* declares none"):
        AnyOrderAR(oracle.__call__)
    with pytest.raises(InputError, match="num_categories=2 but the oracle has num_categories=3"):
        AnyOrderAR(oracle, num_categories=2)
