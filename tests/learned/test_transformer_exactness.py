r"""Exactness with an order-dependent oracle: draws follow the law of sequential sampling along a
uniformly random order (observed sites pinned first, in index order),

.. math:: p_{\text{mix}}(x) = \mathbb{E}_\sigma \prod_k p_\theta(x_{\sigma(k)} \mid x_{\sigma(<k)}),

enumerated over all orders and all :math:`3^5 = 243` configurations with a tiny trained
:class:`~numpyro_autospec.learned.TransformerOracle` (``random_order_law``; docs/algorithm.md,
section 2a).

Chi-square goodness of fit (``tests/gof.py``), fixed seeds, pass when p > 1e-4.  Power:
40 000 draws detect an absolute error of 0.01 in a cell of probability 0.02 at power 0.99 over
all 243 cells (``power_draws(0.01, 0.02, num_cells=243)``: 32 420 draws); with two sites
observed there are 27 cells (14 702 draws suffice).  Each test checks this statement on the
cells its own chi-square kept after pooling (``catches=POWER``).  0.02 is about
the largest cell of the free law; at its median cell (about 0.0033) the same draws catch only
about 0.0037, a relative error of about 110%.

The same test runs on the draws of the engine (autospeculation), of the sequential sampler with
cached keys and values (``kv_cached_sequential_run``) and of the test's own sequential
reference, and it must *fail* on each of them run broken (``tests/engine/broken.py``), 10 000
draws through the same code: the engine's block verification keeping every drafted site, the
cache dropping the keys of site 1 (every later conditional ignores its value), the reference's
random order never shuffled (the left-to-right law; total variation about 0.07 from the right
one).
"""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import functools  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import numpyro_autospec.learned._kv_cache as kv_cache  # noqa: E402
from numpyro_autospec.engine import run  # noqa: E402
from numpyro_autospec.learned import kv_cached_sequential_run, random_order_law
from numpyro_autospec.learned._order_law import fixed_order_law
from numpyro_autospec.oracles import TableOracle  # noqa: E402
from numpyro_autospec.processes import AnyOrderProcess  # noqa: E402
from tests.engine.broken import break_block_verification, drop_one_key, identity_permutation  # noqa: E402
from tests.gof import assert_gof, chisquare_gof, encode_configurations  # noqa: E402
from tests.learned.transformer_fixtures import (  # noqa: E402
    N,
    Q,
    table_probs,
    trained_transformer,
)

pytestmark = pytest.mark.slow  # long goodness-of-fit runs (still part of CI)

NUM_DRAWS = 40_000
CHUNK = 10_000
THRESHOLD = 1e-4
#: the power statement: an absolute error of 0.01 in a cell of probability 0.02 at power 0.99
POWER = (0.01, 0.02)
OBSERVED = np.array([1, 0, 0, 0, 2], np.int32)
OBSERVED_MASK = np.array([True, False, False, False, True])
SETTINGS = {"free": (None, None), "observed": (OBSERVED, OBSERVED_MASK)}


def sequential_reference(oracle, keys, observed=None, observed_mask=None) -> np.ndarray:
    """Sequential sampling along uniformly random orders, one ``log_conditionals`` row per
    step (no speculation): the definition of the law, independent of the engine."""
    mask = np.zeros(N, bool) if observed_mask is None else np.asarray(observed_mask)
    values = np.zeros(N, np.int32) if observed is None else np.where(mask, observed, 0)
    observed_sites, free_sites = np.flatnonzero(mask), np.flatnonzero(~mask)

    def draw(key):
        key_order, key_steps = jax.random.split(key)
        free = jax.random.permutation(key_order, jnp.asarray(free_sites))
        order = jnp.concatenate([jnp.asarray(observed_sites, jnp.int32), free.astype(jnp.int32)])
        ranks = jnp.zeros(N, jnp.int32).at[order].set(jnp.arange(N, dtype=jnp.int32))

        def step(k, carry):
            x, key = carry
            key, key_value = jax.random.split(key)
            row = oracle.log_conditionals(x, ranks, order[k][None], jnp.array([k]))[0]
            return x.at[order[k]].set(jax.random.categorical(key_value, row)), key

        x, _ = jax.lax.fori_loop(len(observed_sites), N, step, (jnp.asarray(values), key_steps))
        return x

    return np.asarray(jax.jit(jax.vmap(draw))(keys))


@functools.cache
def laws(setting: str) -> tuple[np.ndarray, np.ndarray]:
    """``(random-order law, left-to-right law)`` of the trained transformer, flat ``[243]``."""
    observed, mask = SETTINGS[setting]
    oracle = trained_transformer()
    right = random_order_law(oracle, observed, mask).ravel()
    left_to_right = fixed_order_law(oracle, np.arange(N), observed, mask).ravel()
    return right, left_to_right


SAMPLERS = {
    "autospec": lambda process, keys: run(process, keys),
    "kv-cache": lambda process, keys: kv_cached_sequential_run(process, keys),
}


def draws_of(sampler: str, setting: str, num_draws: int) -> np.ndarray:
    """``num_draws`` draws of ``SAMPLERS[sampler]`` (keys ``split(PRNGKey(2025))``), in one
    compiled program called on chunks of ``CHUNK`` keys."""
    observed, mask = SETTINGS[setting]
    process = AnyOrderProcess(
        trained_transformer(), N, Q, observed_values=observed, observed_mask=mask
    )
    draw = jax.jit(lambda keys: SAMPLERS[sampler](process, keys))
    keys = jax.random.split(jax.random.PRNGKey(2025), num_draws)
    samples = [draw(keys[start : start + CHUNK]) for start in range(0, num_draws, CHUNK)]
    rounds = np.concatenate([np.asarray(s.rounds) for s in samples])
    assert np.all(rounds >= 1)
    return np.concatenate([np.asarray(s.value) for s in samples])


@functools.cache
def sampler_draws(sampler: str, setting: str) -> np.ndarray:
    return draws_of(sampler, setting, NUM_DRAWS)


@pytest.mark.parametrize("setting", ["free", "observed"])
def test_enumerated_law_of_a_consistent_oracle_is_its_joint(setting):
    observed, mask = SETTINGS[setting]
    table = table_probs(seed=5).reshape((Q,) * N)
    law = random_order_law(TableOracle(np.log(table)), observed, mask)
    expected = table.copy()
    if mask is not None:
        pinned = np.all(np.stack(np.indices((Q,) * N), -1)[..., mask] == observed[mask], axis=-1)
        expected = np.where(pinned, table, 0.0)
    np.testing.assert_allclose(law, expected / expected.sum(), atol=1e-6)


@pytest.mark.parametrize("setting", ["free", "observed"])
def test_enumerated_law_is_normalised_and_differs_between_orders(setting):
    right, left_to_right = laws(setting)
    assert right.sum() == pytest.approx(1.0, abs=1e-5)
    assert 0.5 * np.abs(left_to_right - right).sum() > 0.05  # the oracle depends on the order


@pytest.mark.parametrize("setting", ["free", "observed"])
def test_reference_sequential_sampler_follows_the_enumerated_law(setting):
    observed, mask = SETTINGS[setting]
    keys = jax.random.split(jax.random.PRNGKey(7), NUM_DRAWS)
    draws = sequential_reference(trained_transformer(), keys, observed, mask)
    codes = encode_configurations(draws, Q)
    right, _ = laws(setting)
    assert_gof(
        codes, right, threshold=THRESHOLD, label=f"reference sampler, {setting}", catches=POWER
    )


@pytest.mark.parametrize("sampler", list(SAMPLERS))
@pytest.mark.parametrize("setting", ["free", "observed"])
def test_draws_follow_the_random_order_sequential_law(sampler, setting):
    right, _ = laws(setting)
    codes = encode_configurations(sampler_draws(sampler, setting), Q)
    result = assert_gof(
        codes, right, threshold=THRESHOLD, label=f"{sampler}, {setting}", catches=POWER
    )
    assert result.num_cells > (100 if setting == "free" else 5)


#: each sampler of the file run broken (tests/engine/broken.py): the piece patched in (read when
#: the sampler is traced: a compilation of its own)
BROKEN = {
    "reference": lambda patch: patch.setattr(jax.random, "permutation", identity_permutation),
    "autospec": break_block_verification,
    "kv-cache": lambda patch: patch.setattr(kv_cache, "append_site", drop_one_key),
}
WRONG_DRAWS = 10_000


@pytest.mark.parametrize(
    ("sampler", "setting"),
    [
        ("reference", "free"),
        ("reference", "observed"),
        ("autospec", "free"),
        ("autospec", "observed"),
        ("kv-cache", "free"),
        ("kv-cache", "observed"),
    ],
)
def test_the_same_test_rejects_a_wrong_sampler(monkeypatch, sampler, setting):
    """The chi-square of the exactness tests above rejects each sampler with one broken piece
    (:data:`BROKEN`), ``WRONG_DRAWS`` draws (measured, p-values of the broken and the right
    sampler on the same keys: reference unshuffled 1.7e-20 and 0.22 (free), 1.2e-31 and 0.67
    (observed); autospec keeping every drafted site 0 and 0.59 (free), 2.8e-243 and 0.62
    (observed); cache without site 1's
    keys 9.6e-30 and 0.35 (free), 6.7e-78 and 0.84 (observed))."""
    right, _ = laws(setting)
    trained_transformer()  # trained (and cached) before the break: a shuffle is patched
    BROKEN[sampler](monkeypatch)
    if sampler == "reference":
        observed, mask = SETTINGS[setting]
        keys = jax.random.split(jax.random.PRNGKey(2025), WRONG_DRAWS)
        draws = sequential_reference(trained_transformer(), keys, observed, mask)
    else:
        draws = draws_of(sampler, setting, WRONG_DRAWS)
    result = chisquare_gof(encode_configurations(draws, Q), right)
    assert result.p_value <= THRESHOLD, result
