r"""Exactness with a learned (inconsistent) oracle: the engine's autospeculative draws follow the
law of sequential sampling along the same order, :math:`p_\sigma(x) = \prod_k
p_\theta(x_{\sigma(k)} \mid x_{\sigma(<k)})`, computed by enumerating all 81 configurations
with the network (docs/algorithm.md section 2a).

Chi-square goodness of fit, fixed seeds, a test passes when p > 1e-4 (``tests/gof.py``).  Power:
40 000 draws over the 80 cells left after pooling detect an absolute error of 0.012 in a cell of
probability 0.05 at power 0.99 (``power_draws`` with the pooled cells, asserted below); at the
law's median cell (p of about 0.008) they catch only about 0.005, a relative error of about 60%.

The engine itself run broken through the same program, its block verification keeping every
drafted site (the speculation never corrected, ``tests/engine/broken.py``), is rejected by the
same chi-square at 4 000 draws.  Wrong-law comparisons besides (no wrong sampler runs in them):
the correct draws fail (p <= 1e-4) against the law of another order, the law of a uniformly
random order, the product of the first query's marginals, and a subtle one, one draw in ten
from another order (total variation about 0.02).
"""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import functools  # noqa: E402
import itertools  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from numpyro_autospec.config import SamplerConfig  # noqa: E402
from numpyro_autospec.engine import run  # noqa: E402
from numpyro_autospec.processes import AnyOrderProcess  # noqa: E402
from tests.engine.broken import break_block_verification  # noqa: E402
from tests.gof import assert_gof, chisquare_gof, encode_configurations, power_draws  # noqa: E402
from tests.learned.trained import N, Q, trained_oracle  # noqa: E402

pytestmark = pytest.mark.slow  # long goodness-of-fit runs (still part of CI)

ORDER = np.array([2, 0, 3, 1])
OTHER_ORDER = np.array([1, 3, 0, 2])
NUM_DRAWS = 40_000
CHUNK = 10_000
THRESHOLD = 1e-4


@functools.cache
def autospec_draws() -> np.ndarray:
    """``NUM_DRAWS`` engine draws (autospec, default config) along ``ORDER``, int ``[D, N]``;
    one compilation, ``CHUNK`` draws per pool."""
    process = AnyOrderProcess(trained_oracle(), N, Q, order=ORDER)
    draw = jax.jit(lambda keys: run(process, keys, SamplerConfig(method="autospec")))
    keys = jax.random.split(jax.random.PRNGKey(2024), NUM_DRAWS)
    samples = [draw(keys[start : start + CHUNK]) for start in range(0, NUM_DRAWS, CHUNK)]
    rounds = np.concatenate([np.asarray(s.rounds) for s in samples])
    assert np.all(rounds >= 1) and rounds.mean() < N  # autospeculation: fewer rounds than n
    return np.concatenate([np.asarray(s.value) for s in samples])


def test_autospec_draws_follow_the_sequential_law_of_the_order():
    oracle = trained_oracle()
    law = np.exp(oracle.sequential_log_probs(ORDER)).ravel()
    codes = encode_configurations(autospec_draws(), Q)
    result = assert_gof(codes, law, threshold=THRESHOLD, label="learned oracle, fixed order")
    assert result.num_cells > 40  # most of the 81 cells are tested, not pooled
    # the power of the test run: delta 0.012 at p = 0.05 over the cells left after pooling
    assert power_draws(0.012, 0.05, num_cells=result.num_cells) <= NUM_DRAWS


def test_a_wrong_sampler_fails_the_same_test(monkeypatch):
    """The program of :func:`autospec_draws` with its block verification broken (every
    drafted site kept, :func:`tests.engine.broken.keep_every_site`), traced afresh: 4 000 draws
    are rejected by the chi-square above against the sequential law of the order."""
    break_block_verification(monkeypatch)
    process = AnyOrderProcess(trained_oracle(), N, Q, order=ORDER)
    keys = jax.random.split(jax.random.PRNGKey(7), 4_000)
    draw = jax.jit(lambda keys: run(process, keys, SamplerConfig(method="autospec")))
    law = np.exp(trained_oracle().sequential_log_probs(ORDER)).ravel()
    result = chisquare_gof(encode_configurations(np.asarray(draw(keys).value), Q), law)
    assert result.p_value <= THRESHOLD, result


def wrong_laws() -> dict[str, np.ndarray]:
    """Wrong laws, flat ``[81]``: what a broken sampler could produce, each far in TV from the
    right one (enumerated, compared with the correct draws: no broken sampler runs)."""
    oracle = trained_oracle()
    law = np.exp(oracle.sequential_log_probs(ORDER)).ravel()
    other = np.exp(oracle.sequential_log_probs(OTHER_ORDER)).ravel()
    orders = itertools.permutations(range(N))
    mixture = np.mean([np.exp(oracle.sequential_log_probs(o)).ravel() for o in orders], axis=0)
    first = np.asarray(oracle(jnp.zeros(N, jnp.int32), jnp.zeros(N, bool)), np.float64)
    product = np.exp(first[np.arange(N), oracle.configurations()].sum(axis=1))
    return {
        # the order was confused (the oracle is inconsistent: orders give different laws)
        "another order": other,
        # the fixed order was ignored: the law of a uniformly random order
        "random order": mixture,
        # speculation from the first query, never corrected
        "first marginals": product / product.sum(),
        # a subtle error: one draw in ten from the other order (total variation about 0.02)
        "10% another order": 0.9 * law + 0.1 * other,
    }


@pytest.mark.parametrize(
    "name", ["another order", "random order", "first marginals", "10% another order"]
)
def test_the_same_test_rejects_a_wrong_law(name):
    law = np.exp(trained_oracle().sequential_log_probs(ORDER)).ravel()
    wrong = wrong_laws()[name]
    assert 0.5 * np.abs(wrong - law).sum() > 0.015
    result = chisquare_gof(encode_configurations(autospec_draws(), Q), wrong)
    assert result.p_value <= THRESHOLD, result
