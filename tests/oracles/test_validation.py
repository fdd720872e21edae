"""Oracle validation: every defect is detected, located and named; user inputs are checked."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numpyro_autospec.errors import (
    DEFECT_INFINITE,
    DEFECT_NAN,
    DEFECT_OK,
    DEFECT_UNNORMALIZED,
    OracleError,
    describe_defect,
    raise_if_defect,
)
from numpyro_autospec.oracles import (
    AnyOrderOracle,
    CurieWeissOracle,
    HopfieldOracle,
    IsingChainOracle,
    PerturbedOracle,
    TableOracle,
    validate_oracle,
)
from numpyro_autospec.oracles._validation import (
    check_oracle_signature,
    check_permutation,
    check_values_in_support,
    log_marginals_defect,
)
from numpyro_autospec.processes import AnyOrderProcess

N, Q = 4, 3
UNIFORM = np.full((N, Q), -np.log(Q), np.float32)
FREE = np.zeros(N, bool)


def uniform_oracle(x, mask):
    return jnp.full((N, Q), -jnp.log(float(Q)))


_jitted_defect = jax.jit(log_marginals_defect, static_argnames="atol")


def defect(log_probs, mask=FREE, **kwargs):
    code, row = _jitted_defect(jnp.asarray(log_probs), jnp.asarray(mask), **kwargs)
    return int(code), int(row)


def with_entry(row, column, value, base=UNIFORM):
    answer = base.copy()
    answer[row, column] = value
    return answer


# --- check_oracle_signature ----------------------------------------------------------------


def test_signature_accepts_a_correct_oracle():
    check_oracle_signature(uniform_oracle, N, Q)
    check_oracle_signature(CurieWeissOracle(5, beta=1.0), 5, 2)


@pytest.mark.parametrize(
    ("oracle", "pattern"),
    [
        (lambda x, mask: jnp.zeros((N, Q + 1)), r"shape \(4, 3\).*got shape \(4, 4\)"),
        (lambda x, mask: jnp.zeros(N), r"shape \(4, 3\).*got shape \(4,\)"),
        (lambda x, mask: jnp.zeros((N, Q), jnp.int32), r"floating dtype.*dtype int32"),
        (lambda x, mask: (jnp.zeros((N, Q)), 0.0), r"one array of shape \(4, 3\)"),
    ],
)
def test_signature_names_expected_and_actual_output(oracle, pattern):
    with pytest.raises(OracleError, match=pattern) as info:
        check_oracle_signature(oracle, N, Q, name="net")
    assert str(info.value).startswith("net must return")


def test_signature_wraps_tracing_errors_with_the_name():
    def python_branch(x, mask):
        if mask[0]:  # Python control flow on a traced value
            return jnp.zeros((N, Q))
        return jnp.zeros((N, Q))

    with pytest.raises(OracleError, match=r"^branchy could not be traced") as info:
        check_oracle_signature(python_branch, N, Q, name="branchy")
    assert isinstance(info.value.__cause__, Exception)


@pytest.mark.parametrize(("n", "q"), [(0, 2), (3, -1), (2.5, 2), (True, 2)])
def test_signature_rejects_bad_dimensions(n, q):
    with pytest.raises(OracleError, match="must be a positive integer"):
        check_oracle_signature(uniform_oracle, n, q)


def test_signature_rejects_non_callables():
    with pytest.raises(OracleError, match="must be callable"):
        check_oracle_signature(np.zeros((N, Q)), N, Q)


# --- log_marginals_defect --------------------------------------------------------------------


def test_defect_free_answer():
    assert defect(UNIFORM) == (DEFECT_OK, 0)
    impossible_value = np.array([[np.log(0.5), np.log(0.5), -np.inf]] * N, np.float32)
    assert defect(impossible_value) == (DEFECT_OK, 0)


@pytest.mark.parametrize(
    ("answer", "mask", "expected"),
    [
        (with_entry(2, 1, np.nan), FREE, (DEFECT_NAN, 2)),
        (with_entry(3, 0, np.nan), np.ones(N, bool), (DEFECT_NAN, 3)),  # pinned rows too
        (with_entry(1, 2, np.inf), FREE, (DEFECT_INFINITE, 1)),
        (with_entry(1, 2, np.inf), np.array([False, True, False, False]), (DEFECT_OK, 0)),
        (with_entry(2, 0, 0.0), FREE, (DEFECT_UNNORMALIZED, 2)),
        (with_entry(2, 0, 0.0), np.array([False, False, True, False]), (DEFECT_OK, 0)),
        (np.full((N, Q), -np.inf, np.float32), FREE, (DEFECT_UNNORMALIZED, 0)),
        (with_entry(0, 0, 5.0, with_entry(3, 1, np.nan)), FREE, (DEFECT_NAN, 3)),  # NaN first
        (with_entry(0, 0, 5.0, with_entry(3, 1, np.inf)), FREE, (DEFECT_INFINITE, 3)),
    ],
)
def test_defect_code_and_first_row(answer, mask, expected):
    assert defect(answer, mask) == expected


def test_all_neg_inf_row_is_unnormalized():
    answer = UNIFORM.copy()
    answer[1] = -np.inf
    assert defect(answer) == (DEFECT_UNNORMALIZED, 1)


def test_defect_tolerance():
    answer = UNIFORM + np.float32(1e-3)
    assert defect(answer)[0] == DEFECT_UNNORMALIZED
    assert defect(answer, atol=1e-2) == (DEFECT_OK, 0)


def test_defect_under_jit_and_vmap():
    answers = np.stack([UNIFORM, with_entry(1, 0, np.nan), with_entry(3, 2, 1.0)])
    masks = np.zeros((3, N), bool)
    codes, rows = jax.jit(jax.vmap(log_marginals_defect))(jnp.asarray(answers), masks)
    assert codes.dtype == jnp.int32 and rows.dtype == jnp.int32
    assert codes.tolist() == [DEFECT_OK, DEFECT_NAN, DEFECT_UNNORMALIZED]
    assert rows.tolist() == [0, 1, 3]


@given(
    seed=st.integers(0, 2**31 - 1),
    impossible=st.lists(st.booleans(), min_size=N * Q, max_size=N * Q),
    broken_row=st.integers(0, N - 1),
    shift=st.floats(0.01, 5.0) | st.floats(-5.0, -0.01),
)
def test_random_normalized_rows_pass_and_shifted_row_is_found(seed, impossible, broken_row, shift):
    rng = np.random.default_rng(seed)
    logits = np.where(np.reshape(impossible, (N, Q)), -np.inf, rng.normal(size=(N, Q)))
    logits[:, 0] = rng.normal(size=N)  # at least one possible value per row
    answer = (logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)).astype(np.float32)
    assert defect(answer) == (DEFECT_OK, 0)
    answer[broken_row] += np.float32(shift)
    assert defect(answer) == (DEFECT_UNNORMALIZED, broken_row)


# --- describe_defect and raise_if_defect ------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "pattern"),
    [
        (DEFECT_NAN, r"^z returned NaN in row 3$"),
        (DEFECT_INFINITE, r"^z returned \+inf in row 3; a log-probability is at most 0$"),
        (DEFECT_UNNORMALIZED, r"^z returned row 3 that is not normalized; "),
    ],
)
def test_raise_if_defect_names_row_and_problem(code, pattern):
    for code_like, row_like in [(code, 3), (np.int32(code), np.int64(3)), (jnp.int32(code), 3)]:
        with pytest.raises(OracleError, match=pattern):
            raise_if_defect(code_like, row_like, name="z")


def test_unnormalized_message_quotes_the_logsumexp():
    message = describe_defect(DEFECT_UNNORMALIZED, 3, name="x", log_normalizer=0.6931)
    assert message.startswith("x returned row 3 that is not normalized")
    assert "logsumexp=0.6931" in message
    with pytest.raises(OracleError, match=re.escape("(logsumexp=-inf)")):
        raise_if_defect(DEFECT_UNNORMALIZED, 0, log_normalizer=-np.inf)


def test_raise_if_defect_is_silent_without_defect():
    raise_if_defect(DEFECT_OK, 0)
    raise_if_defect(np.zeros(5, np.int32), np.zeros(5, np.int32))


def test_raise_if_defect_reports_the_first_batch_member():
    codes = np.array([DEFECT_OK, DEFECT_OK, DEFECT_INFINITE, DEFECT_NAN])
    rows = np.array([0, 0, 1, 2])
    with pytest.raises(OracleError, match=r"returned \+inf in row 1.*\(batch index 2\)$"):
        raise_if_defect(codes, rows)


def test_unknown_defect_code():
    with pytest.raises(ValueError, match="unknown defect code 7"):
        describe_defect(7, 0)
    with pytest.raises(ValueError, match="unknown defect code 7"):
        raise_if_defect(7, 0)


# --- validate_oracle ---------------------------------------------------------------------------


def small_oracles():
    table = TableOracle(np.log(np.random.default_rng(0).dirichlet(np.ones(Q**N))).reshape((Q,) * N))
    return {
        "table": (table, N, Q),
        "perturbed": (PerturbedOracle(table, 0.5, jax.random.PRNGKey(1)), N, Q),
        "curie-weiss": (CurieWeissOracle(6, beta=1.5, h=0.2), 6, 2),
        "ising": (IsingChainOracle.uniform(6, coupling=0.7, field=-0.3), 6, 2),
        "hopfield": (HopfieldOracle.random(jax.random.PRNGKey(2), 6, 3, beta=2.0), 6, 2),
        "plain function": (uniform_oracle, N, Q),
    }


@pytest.mark.parametrize("name", sorted(small_oracles()))
def test_validate_accepts_the_project_oracles(name):
    oracle, n, q = small_oracles()[name]
    validate_oracle(oracle, n, q, name=name, key=jax.random.PRNGKey(3), num_probes=6)


def test_validate_names_an_unnormalized_oracle_with_its_logsumexp():
    with pytest.raises(OracleError) as info:
        validate_oracle(lambda x, mask: jnp.zeros((N, Q)), N, Q, name="flat")
    message = str(info.value)
    assert message.startswith("flat returned row 0 that is not normalized")
    assert f"logsumexp={np.log(Q):.6g}" in message
    assert "probe 0: pinned sites []" in message


def test_validate_finds_nan_and_posinf():
    def nan_oracle(x, mask):
        return jnp.where(jnp.arange(N)[:, None] == 2, jnp.nan, uniform_oracle(x, mask))

    def posinf_oracle(x, mask):
        return uniform_oracle(x, mask).at[1, 1].set(jnp.inf)

    with pytest.raises(OracleError, match=r"^n returned NaN in row 2 "):
        validate_oracle(nan_oracle, N, Q, name="n")
    with pytest.raises(OracleError, match=r"^p returned \+inf in row 1"):
        validate_oracle(posinf_oracle, N, Q, name="p")


def test_validate_probes_nonempty_masks():
    """Wrong only once two sites are pinned: the empty mask alone would miss it."""

    def wrong_given_two(x, mask):
        scale = jnp.where(jnp.sum(mask) >= 2, 2.0, 1.0)
        return uniform_oracle(x, mask) * scale

    with pytest.raises(OracleError, match=r"is not normalized.*probe \d+: pinned sites \[\d+, \d+"):
        validate_oracle(wrong_given_two, N, Q, name="w", num_probes=16)


def test_validate_checks_the_signature_first():
    with pytest.raises(OracleError, match=r"shape \(4, 3\)"):
        validate_oracle(lambda x, mask: jnp.zeros((N, 2)), N, Q)


def test_validate_wraps_batching_failures():
    def not_batchable(x, mask):
        result = jax.pure_callback(
            lambda m: np.full((N, Q), -np.log(Q), np.float32),
            jax.ShapeDtypeStruct((N, Q), jnp.float32),
            mask,
        )
        return result

    with pytest.raises(OracleError, match=r"^cb failed under jax.jit\(jax.vmap"):
        validate_oracle(not_batchable, N, Q, name="cb")


def test_validate_rejects_no_probes():
    with pytest.raises(ValueError, match="num_probes"):
        validate_oracle(uniform_oracle, N, Q, num_probes=0)


# --- check_values_in_support -------------------------------------------------------------------


def test_values_in_support_accepts_valid_values():
    check_values_in_support(np.array([0, 2, 1], np.int32), 3, name="z")
    check_values_in_support(np.zeros((2, 2), np.uint8), 2, name="z")


@pytest.mark.parametrize(
    ("values", "pattern"),
    [
        (np.array([0, 1, 3]), r"site 'z': value 3 at index 2 is outside the support \[0, 3\)"),
        (np.array([0, -1, 1]), r"site 'z': value -1 at index 1 is outside the support \[0, 3\)"),
        (np.array([[0, 1], [5, 0]]), r"site 'z': value 5 at index \(1, 0\) is outside"),
        (np.array([0.0, 1.0]), r"site 'z': values must have an integer dtype, got float64"),
        (np.array([True, False]), r"site 'z': values must have an integer dtype, got bool"),
    ],
)
def test_values_in_support_names_site_index_and_value(values, pattern):
    with pytest.raises(ValueError, match=pattern):
        check_values_in_support(values, 3, name="z")


# --- check_permutation -------------------------------------------------------------------------


def test_permutation_accepts_permutations():
    check_permutation(np.array([3, 0, 2, 1]), 4)
    check_permutation(jnp.arange(5)[::-1], 5)


@pytest.mark.parametrize(
    ("order", "pattern"),
    [
        ([0, 1, 2], r"order of site 'z' must have shape \(4,\).*got \(3,\)"),
        ([0, 1, 1, 3], r"not a permutation of range\(4\): 1 appears 2 times and 2 is missing"),
        ([0, 1, 4, 3], r"not a permutation of range\(4\): value 4 is out of range"),
        ([0, -1, 2, 3], r"not a permutation of range\(4\): value -1 is out of range"),
        ([0.0, 1.0, 2.0, 3.0], r"must have an integer dtype, got float64"),
    ],
)
def test_permutation_errors_say_what_is_wrong(order, pattern):
    with pytest.raises(ValueError, match=pattern):
        check_permutation(np.array(order), 4, name="order of site 'z'")


class _UndeclaredBlockForm:
    """A set form with a block form of its own, but not declared as an AnyOrderOracle."""

    def __call__(self, x, mask):
        return jnp.full((4, 2), jnp.log(0.5))

    def log_conditionals(self, x, ranks, sites, prefix_lengths):
        return jnp.full((sites.shape[0], 2), jnp.log(0.5))


class _OverriddenBlockForm(AnyOrderOracle):
    """An AnyOrderOracle overriding log_conditionals without declaring scores_blocks."""

    num_positions, num_categories = 4, 2

    def log_marginals(self, x, mask):
        return jnp.full((4, 2), jnp.log(0.5))

    def log_conditionals(self, x, ranks, sites, prefix_lengths):
        return jnp.full((sites.shape[0], 2), jnp.log(0.5))


class _DeclaredBlockForm(_OverriddenBlockForm):
    scores_blocks = True


@pytest.mark.parametrize(
    "oracle, words",
    [
        (_UndeclaredBlockForm(), "defines log_conditionals but is not an AnyOrderOracle"),
        (_OverriddenBlockForm(), "does not declare scores_blocks = True"),
    ],
)
def test_an_undeclared_block_form_is_reported(oracle, words):
    with pytest.warns(UserWarning, match=words):
        process = AnyOrderProcess(oracle, 4, 2)
    assert not process.scores_blocks  # the set form runs, as the warning says


def test_a_declared_block_form_is_used_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        process = AnyOrderProcess(_DeclaredBlockForm(), 4, 2)
        AnyOrderProcess(lambda x, mask: jnp.full((4, 2), jnp.log(0.5)), 4, 2)
    assert process.scores_blocks
