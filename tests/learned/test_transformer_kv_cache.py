"""Sequential sampling with cached keys and values (``numpyro_autospec.learned._kv_cache``): the
incremental rows equal ``log_conditionals``'s rows along a random order with observed sites (a
property test), the draws equal ``sequential_run``'s key for key, and bad input is rejected by
name.  Its law is tested against the enumerated random-order law, with the wrong-law rejections,
in ``test_transformer_exactness.py``."""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from numpyro_autospec.engine._sequential import sequential_run  # noqa: E402
from numpyro_autospec.errors import OracleError  # noqa: E402
from numpyro_autospec.learned import kv_cached_sequential_run  # noqa: E402
from numpyro_autospec.learned._kv_cache import append_site, next_conditional, prefill  # noqa: E402
from numpyro_autospec.oracles import CurieWeissOracle  # noqa: E402
from numpyro_autospec.processes import AnyOrderProcess  # noqa: E402
from tests.learned.transformer_fixtures import fresh_transformer  # noqa: E402

N, Q = 9, 4
ORACLE = fresh_transformer(seed=11, num_layers=3, n=N, q=Q)


@jax.jit
def incremental_rows(x, order, num_observed):
    """Rows of the free steps by the cache: prefill the observed prefix, then one
    ``next_conditional`` and one ``append_site`` per step (the values of ``x``)."""
    ranks = jnp.zeros(N, jnp.int32).at[order].set(jnp.arange(N, dtype=jnp.int32))
    cache = prefill(ORACLE, x, ranks, num_observed)

    def step(cache, k):
        site = order[k]
        row = next_conditional(ORACLE, cache, site)
        cache = jax.lax.cond(
            k >= num_observed, lambda c: append_site(ORACLE, c, site, x[site]), lambda c: c, cache
        )
        return cache, row

    return jax.lax.scan(step, cache, jnp.arange(N))[1], ranks


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), num_observed=st.integers(0, N - 1))
def test_incremental_rows_equal_the_block_form_along_a_random_order(seed, num_observed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, Q, N).astype(np.int32)
    order = rng.permutation(N).astype(np.int32)
    rows, ranks = incremental_rows(x, order, num_observed)
    expected = ORACLE.log_conditionals(x, ranks, order, jnp.arange(N))
    free = np.arange(N) >= num_observed
    np.testing.assert_allclose(np.asarray(rows)[free], np.asarray(expected)[free], atol=2e-5)


def test_incremental_rows_see_the_appended_values():
    # the converse: the equality above could not hold by ignoring the cache
    x = np.zeros(N, np.int32)
    order = np.arange(N, dtype=np.int32)
    base, _ = incremental_rows(x, order, 0)
    changed_x = x.copy()
    changed_x[2] = 3
    changed, _ = incremental_rows(changed_x, order, 0)
    base, changed = np.asarray(base), np.asarray(changed)
    np.testing.assert_allclose(changed[:3], base[:3], atol=1e-6)  # rows before site 2 is drawn
    assert np.abs(changed[3:] - base[3:]).max() > 1e-3


OBSERVED = np.array([2, 0, 0, 1, 0, 0, 3, 0, 0], np.int32)
MASK = np.array([True, False, False, True, False, False, True, False, False])


@pytest.mark.parametrize("observed", [False, True])
def test_draws_equal_the_plain_sequential_samplers_key_for_key(observed):
    kwargs = {"observed_values": OBSERVED, "observed_mask": MASK} if observed else {}
    process = AnyOrderProcess(ORACLE, N, Q, **kwargs)
    keys = jax.random.split(jax.random.PRNGKey(3), 2000)
    cached = jax.jit(lambda k: kv_cached_sequential_run(process, k))(keys)
    plain = jax.jit(lambda k: sequential_run(process, k))(keys)
    cached_values, plain_values = np.asarray(cached.value), np.asarray(plain.value)
    assert np.mean(np.all(cached_values == plain_values, axis=1)) >= 0.999  # rounding aside
    if observed:
        assert np.all(cached_values[:, MASK] == OBSERVED[MASK])
    # the comparison has power: other keys give other draws
    shifted = np.roll(plain_values, 1, axis=0)
    assert np.mean(np.all(cached_values == shifted, axis=1)) < 0.5
    free_steps = N - (int(MASK.sum()) if observed else 0)
    assert np.all(np.asarray(cached.rounds) == free_steps + 1)


def test_observed_values_may_be_traced():
    process_of = lambda values: AnyOrderProcess(  # noqa: E731
        ORACLE, N, Q, observed_values=values, observed_mask=MASK
    )
    draw = jax.jit(lambda key, values: kv_cached_sequential_run(process_of(values), key[None]))
    for values in (OBSERVED, (OBSERVED + 1) % Q):
        out = np.asarray(draw(jax.random.PRNGKey(0), values).value[0])
        assert np.all(out[MASK] == values[MASK])


def test_rejects_an_oracle_that_is_not_a_transformer_by_site_name():
    process = AnyOrderProcess(CurieWeissOracle(N, beta=1.0), N, 2, name="spins")
    with pytest.raises(OracleError, match="site 'spins'.*TransformerOracle.*CurieWeissOracle"):
        kv_cached_sequential_run(process, jax.random.split(jax.random.PRNGKey(0), 2))


def test_rejects_keys_of_the_wrong_shape():
    process = AnyOrderProcess(ORACLE, N, Q)
    with pytest.raises(ValueError, match=r"shape \[D, 2\].*\(2, 2, 2\)"):
        kv_cached_sequential_run(process, jnp.zeros((2, 2, 2), jnp.uint32))
