"""The two-stream transformer as an oracle of the block form: shapes and normalisation, rows
that depend on ``x`` only through their prefix (a property test), one pass equal to row-by-row
calls, order awareness, and the pytree / identity semantics the samplers rely on."""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from numpyro_autospec.learned import TransformerOracle  # noqa: E402
from numpyro_autospec.learned._transformer import inverse_permutation
from numpyro_autospec.oracles import AnyOrderOracle  # noqa: E402
from tests.learned.transformer_fixtures import N, Q, fresh_transformer  # noqa: E402

ORACLE = fresh_transformer(seed=3, num_layers=2)
CONDITIONALS = jax.jit(ORACLE.log_conditionals)


def random_query(rng: np.random.Generator, num_rows: int = N):
    x = rng.integers(0, Q, N).astype(np.int32)
    order = rng.permutation(N).astype(np.int32)
    sites = rng.integers(0, N, num_rows).astype(np.int32)
    lengths = rng.integers(0, N + 1, num_rows).astype(np.int32)
    return x, order, np.asarray(inverse_permutation(order)), sites, lengths


def test_declares_the_block_form_and_order_dependence():
    assert isinstance(ORACLE, AnyOrderOracle)
    assert TransformerOracle.scores_blocks and TransformerOracle.depends_on_order
    assert (ORACLE.num_positions, ORACLE.num_categories) == (N, Q)
    with pytest.raises(NotImplementedError, match="depend on the order"):
        ORACLE.log_marginals(jnp.zeros(N, jnp.int32), jnp.zeros(N, bool))


@pytest.mark.parametrize("num_rows", [1, 3, 8])
def test_rows_are_normalised_log_probabilities_of_shape_rows_by_categories(num_rows):
    x, _, ranks, sites, lengths = random_query(np.random.default_rng(num_rows), num_rows)
    rows = np.asarray(ORACLE.log_conditionals(x, ranks, sites, lengths))
    assert rows.shape == (num_rows, Q) and rows.dtype == np.float32
    assert np.all(np.isfinite(rows))
    np.testing.assert_allclose(np.exp(rows).sum(axis=1), 1.0, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_each_row_depends_on_x_only_through_its_prefix(seed):
    rng = np.random.default_rng(seed)
    x, _, ranks, sites, lengths = random_query(rng)
    other = rng.integers(0, Q, N).astype(np.int32)
    rows = np.asarray(CONDITIONALS(x, ranks, sites, lengths))
    for j in range(N):
        changed = np.where(ranks < lengths[j], x, other)  # x kept on row j's prefix only
        changed_rows = np.asarray(CONDITIONALS(changed, ranks, sites, lengths))
        np.testing.assert_allclose(changed_rows[j], rows[j], atol=1e-5)


def test_rows_change_when_x_changes_inside_the_prefix():
    # the converse: the prefix-only test above could not pass by ignoring x altogether
    x = np.zeros(N, np.int32)
    ranks = np.arange(N, dtype=np.int32)
    sites, lengths = np.array([4], np.int32), np.array([3], np.int32)
    base = np.asarray(CONDITIONALS(x, ranks, sites, lengths))
    for site in range(3):
        changed = x.copy()
        changed[site] = 2
        assert np.abs(np.asarray(CONDITIONALS(changed, ranks, sites, lengths)) - base).max() > 1e-3


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_one_pass_over_a_block_equals_one_call_per_row(seed):
    x, _, ranks, sites, lengths = random_query(np.random.default_rng(seed))
    block = np.asarray(CONDITIONALS(x, ranks, sites, lengths))
    single = jax.jit(ORACLE.log_conditionals)
    for j in range(N):
        row = np.asarray(single(x, ranks, sites[j : j + 1], lengths[j : j + 1]))
        np.testing.assert_allclose(row[0], block[j], atol=1e-5)


def test_speculation_and_scoring_rows_of_a_block_in_one_call():
    # a block [a, a + m) of the order: speculation rows (every prefix a) and scoring rows
    # (prefix a + j) are the same function of (site, prefix) in one call
    rng = np.random.default_rng(0)
    x, order, ranks, _, _ = random_query(rng)
    a, m = 1, 3
    sites = order[a : a + m]
    speculation = np.asarray(CONDITIONALS(x, ranks, sites, np.full(m, a, np.int32)))
    scoring = np.asarray(CONDITIONALS(x, ranks, sites, np.arange(a, a + m, dtype=np.int32)))
    np.testing.assert_allclose(speculation[0], scoring[0], atol=1e-5)  # both given prefix a
    assert np.abs(speculation[1:] - scoring[1:]).max() > 1e-3


def test_empty_prefix_rows_ignore_x_but_not_the_site():
    rng = np.random.default_rng(1)
    ranks = np.asarray(inverse_permutation(rng.permutation(N)))
    sites, lengths = np.arange(N, dtype=np.int32), np.zeros(N, np.int32)
    first = np.asarray(CONDITIONALS(np.zeros(N, np.int32), ranks, sites, lengths))
    second = np.asarray(CONDITIONALS(np.full(N, 2, np.int32), ranks, sites, lengths))
    np.testing.assert_allclose(first, second, atol=1e-5)
    assert np.abs(first[0] - first[1]).max() > 1e-3


def test_rows_ignore_the_order_after_the_prefix_but_not_the_order_of_the_prefix():
    x = np.array([2, 0, 1, 2, 1], np.int32)
    site, length = np.array([4], np.int32), np.array([2], np.int32)

    def row(order):
        return np.asarray(
            CONDITIONALS(x, np.asarray(inverse_permutation(np.array(order))), site, length)
        )

    np.testing.assert_allclose(row([0, 1, 2, 3, 4]), row([0, 1, 4, 3, 2]), atol=1e-5)
    assert np.abs(row([0, 1, 2, 3, 4]) - row([1, 0, 2, 3, 4])).max() > 1e-4  # depends_on_order


def test_sequence_log_probs_are_the_rows_of_the_autoregressive_query():
    x = np.array([1, 0, 2, 2, 0], np.int32)
    order = np.array([3, 0, 4, 1, 2], np.int32)
    steps = np.asarray(ORACLE.sequence_log_probs(x, order))
    ranks = np.asarray(inverse_permutation(order))
    for k in range(N):
        row = np.asarray(ORACLE.log_conditionals(x, ranks, order[k : k + 1], np.array([k])))
        np.testing.assert_allclose(steps[k], row[0, x[order[k]]], atol=1e-5)


def test_jit_takes_the_oracle_as_an_argument_and_hashes_it_by_identity():
    x, _, ranks, sites, lengths = random_query(np.random.default_rng(2))
    by_argument = jax.jit(lambda oracle, x: oracle.log_conditionals(x, ranks, sites, lengths))
    other = fresh_transformer(seed=4, num_layers=2)
    for oracle in (ORACLE, other):
        np.testing.assert_allclose(
            by_argument(oracle, x), oracle.log_conditionals(x, ranks, sites, lengths), atol=1e-5
        )
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(ORACLE))
    assert ORACLE == ORACLE and ORACLE != other and hash(ORACLE) != hash(other)


def test_rows_vmap_over_a_batch_of_queries():
    rng = np.random.default_rng(5)
    queries = [random_query(rng) for _ in range(4)]
    stacked = [np.stack(parts) for parts in zip(*queries, strict=True)]
    x, _, ranks, sites, lengths = stacked
    batched = np.asarray(jax.vmap(ORACLE.log_conditionals)(x, ranks, sites, lengths))
    for b in range(4):
        np.testing.assert_allclose(
            batched[b], ORACLE.log_conditionals(x[b], ranks[b], sites[b], lengths[b]), atol=1e-5
        )


def test_inverse_permutation_gives_the_ranks_of_an_order():
    order = np.array([3, 1, 4, 0, 2])
    ranks = np.asarray(inverse_permutation(order))
    assert np.array_equal(ranks[order], np.arange(5))
