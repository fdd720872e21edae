"""The residual of a small block drawn by enumeration has the law (mu_S - nu_S)_+ / TV.

:func:`numpyro_autospec.enumeration.sample_residual` is compared by goodness of fit (p > 1e-4,
fixed seeds, 40 000 draws: an absolute error of 0.02 in a cell of probability 0.1 is caught,
tests/gof.py ``power_draws``) with the residual computed by brute force from an explicit
table, for blocks of 2 and 3 steps after a pinned prefix, through the block-scoring form and
through single-step queries; the same test fails on a sampler that draws the block from
mu_S instead of the residual.  That the samplers using it stay exact is checked in
tests/engine/test_scheduler.py and tests/test_reference.py (their blocks of 2 and 3 steps
enumerate by default).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import numpyro_autospec.enumeration as enumeration
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.enumeration import configurations, enumeration_size, sample_residual
from numpyro_autospec.oracles import TableOracle
from numpyro_autospec.processes import AnyOrderProcess
from tests.gof import assert_gof, chisquare_gof, encode_configurations, power_draws

N, Q, SIZE = 5, 3, 3  # blocks of up to 3 steps: 9 prefix configurations
ORDER = np.array([2, 4, 0, 3, 1])
PREFIX = (1, 0)  # the values of the sites of steps 0 and 1 (sites 2 and 4)
DRAWS = 40_000


def table() -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.dirichlet(np.full(Q**N, 0.5)).reshape((Q,) * N)


def exact_residual(probs: np.ndarray, m: int) -> np.ndarray:
    """(mu_S - nu_S)_+ / TV over the block's q^m values (the block's sites in step order,
    first site varying slowest), by brute force from the table."""
    index = [slice(None)] * N
    for site, value in zip(ORDER[: len(PREFIX)], PREFIX, strict=True):
        index[site] = value
    pinned = probs[tuple(index)]  # axes: the free sites in increasing site order
    free = [site for site in range(N) if site not in ORDER[: len(PREFIX)]]
    block = list(ORDER[len(PREFIX) : len(PREFIX) + m])
    rest = tuple(free.index(site) for site in free if site not in block)
    joint = pinned.sum(axis=rest) if rest else pinned
    kept = [site for site in free if site in block]
    joint = np.transpose(joint, [kept.index(site) for site in block])  # step order
    mu = joint / joint.sum()
    marginals = [mu.sum(axis=tuple(j for j in range(m) if j != i)) for i in range(m)]
    nu = functools.reduce(np.multiply.outer, marginals)
    residual = np.maximum(mu - nu, 0.0)
    return residual / residual.sum()


def residual_draws(m: int, block_scoring: bool, seed: int) -> np.ndarray:
    """``DRAWS`` blocks (values of the block's sites in step order) from ``sample_residual``."""
    process = AnyOrderProcess(TableOracle(np.log(table())), N, Q, order=ORDER)
    x = process.init(jax.random.PRNGKey(0))
    for step, value in enumerate(PREFIX):
        x = process.set_step_value(x, step, jnp.int32(value))
    a = len(PREFIX)
    answer = process.query(x, a, SIZE)

    @jax.jit
    def draw(keys):
        def one(key):
            drawn = sample_residual(process, key, x, a, m, answer, SIZE, block_scoring).x
            return drawn.values[ORDER[a : a + m]]

        return jax.vmap(one)(keys)

    return np.asarray(draw(jax.random.split(jax.random.PRNGKey(seed), DRAWS)))


@pytest.mark.parametrize("block_scoring", [True, False], ids=["block-form", "single-step"])
@pytest.mark.parametrize("m", [2, 3])
def test_residual_law_by_goodness_of_fit(m, block_scoring):
    assert DRAWS >= power_draws(0.02, 0.1, num_cells=Q**m)
    expected = exact_residual(table(), m)
    assert (expected == 0).any()  # some blocks have mu <= nu: the residual is not mu
    values = residual_draws(m, block_scoring, seed=m)
    assert_gof(encode_configurations(values, Q), expected.ravel(), threshold=1e-4)


def test_a_sampler_of_mu_instead_of_the_residual_fails(monkeypatch):
    """Weights log mu_S (the acceptance term dropped): the block is drawn from mu_S."""
    monkeypatch.setattr(
        enumeration, "residual_log_accept_prob", lambda log_mu, log_nu: jnp.zeros_like(log_mu)
    )
    values = residual_draws(3, True, seed=3)
    result = chisquare_gof(encode_configurations(values, Q), exact_residual(table(), 3).ravel())
    assert result.p_value <= 1e-4


def test_enumeration_size_and_configurations():
    assert [enumeration_size(16, q) for q in (1, 2, 3, 4, 16, 17)] == [2, 5, 3, 3, 2, 0]
    assert enumeration_size(0, 2) == 0
    digits = configurations(3, 3)
    assert digits.shape == (9, 2)
    # the configurations of a block of m steps are the first q^(m-1), later digits 0
    assert (digits[:3, 1] == 0).all() and digits[:3, 0].tolist() == [0, 1, 2]


def test_root_policy_resolves_enumeration():
    assert SamplerConfig().root_policy(64, True, 2).enumeration == 4  # recursion blocks of 4
    assert SamplerConfig(fallback=16).root_policy(64, True, 2).enumeration == 5
    assert SamplerConfig(fallback=16).root_policy(64, True, 512).enumeration == 0
    assert SamplerConfig(fallback=16).root_policy(64, False, 2).enumeration == 0
    assert SamplerConfig(residual_enumeration=0).root_policy(64, True, 2).enumeration == 0
    assert SamplerConfig(leaf_size=8, fallback=16).root_policy(64, True, 2).enumeration == 0
    with pytest.raises(ValueError, match="residual_enumeration must be >= 0"):
        SamplerConfig(residual_enumeration=-1).validate()
