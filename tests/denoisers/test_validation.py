"""Every check of the denoiser contract fires, with a message naming the problem."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec.denoisers import (
    Denoiser,
    GaussianMixtureDenoiser,
    PointCloudDenoiser,
    validate_denoiser,
)
from numpyro_autospec.denoisers._validation import (
    check_denoiser_signature,
    check_time_grid,
    denoiser_defect,
)
from numpyro_autospec.errors import (
    DEFECT_INFINITE,
    DEFECT_NAN,
    DEFECT_OK,
    DEFECT_TIME,
    DenoiserError,
    raise_if_defect,
)

DIM = 3


@pytest.fixture(scope="module")
def point_cloud() -> PointCloudDenoiser:
    return PointCloudDenoiser(np.arange(12.0).reshape(4, DIM) / 12.0)


def test_exact_denoisers_satisfy_the_protocol(point_cloud: PointCloudDenoiser) -> None:
    mixture = GaussianMixtureDenoiser.isotropic(jnp.ones(2), jnp.zeros((2, DIM)), 1.0)
    assert isinstance(point_cloud, Denoiser)
    assert isinstance(mixture, Denoiser)
    assert not isinstance(lambda t, y: y, Denoiser)  # no `dim`


def test_denoiser_error_is_a_value_error() -> None:
    assert issubclass(DenoiserError, ValueError)


# --- check_denoiser_signature ----------------------------------------------------------------


def test_signature_accepts_exact_denoisers_and_plain_functions(
    point_cloud: PointCloudDenoiser,
) -> None:
    check_denoiser_signature(point_cloud, DIM)
    check_denoiser_signature(lambda t, y: t * y, DIM)


def test_signature_rejects_wrong_output_shape() -> None:
    with pytest.raises(DenoiserError, match=r"must return float32\[3\].*got float32\[2\]"):
        check_denoiser_signature(lambda t, y: y[:2], DIM, name="my_denoiser")
    with pytest.raises(DenoiserError, match=r"my_denoiser must return float32\[3\]"):
        check_denoiser_signature(lambda t, y: y[:2], DIM, name="my_denoiser")


def test_signature_rejects_batched_output() -> None:
    with pytest.raises(DenoiserError, match=r"shape \(1, 3\)"):
        check_denoiser_signature(lambda t, y: y[None, :], DIM)


def test_signature_rejects_wrong_dtype() -> None:
    with pytest.raises(DenoiserError, match=r"got int32\[3\]"):
        check_denoiser_signature(lambda t, y: y.astype(jnp.int32), DIM)


def test_signature_rejects_several_outputs() -> None:
    with pytest.raises(DenoiserError, match=r"one array of shape \(3,\), got PyTreeDef"):
        check_denoiser_signature(lambda t, y: (y, y), DIM)


def test_signature_reports_trace_failures() -> None:
    def needs_concrete_time(t: jax.Array, y: jax.Array) -> jax.Array:
        return y if t > 0 else -y  # Python control flow on a traced value

    with pytest.raises(DenoiserError, match="could not be traced with t: float32"):
        check_denoiser_signature(needs_concrete_time, DIM)


def test_signature_rejects_mismatched_dim(point_cloud: PointCloudDenoiser) -> None:
    with pytest.raises(DenoiserError, match=r"denoiser.dim is 3 but the process expects dim=5"):
        check_denoiser_signature(point_cloud, 5)


@pytest.mark.parametrize("dim", [0, -1, 2.0, True, "3"])
def test_signature_rejects_invalid_dim(dim: object) -> None:
    with pytest.raises(DenoiserError, match="dim must be a positive integer"):
        check_denoiser_signature(lambda t, y: y, dim)  # type: ignore[arg-type]


def test_signature_rejects_non_callable() -> None:
    with pytest.raises(DenoiserError, match="must be callable"):
        check_denoiser_signature(np.zeros(3), DIM)  # type: ignore[arg-type]


# --- denoiser_defect and raise_if_defect -----------------------------------------------------


@pytest.mark.parametrize(
    ("output", "t", "expected"),
    [
        ([0.0, 1.0], 0.5, DEFECT_OK),
        ([0.0, 1.0], 0.0, DEFECT_OK),
        ([0.0, np.nan], 0.5, DEFECT_NAN),
        ([np.inf, 1.0], 0.5, DEFECT_INFINITE),
        ([-np.inf, np.nan], 0.5, DEFECT_NAN),
        ([0.0, 1.0], -0.5, DEFECT_TIME),
        ([0.0, 1.0], np.inf, DEFECT_TIME),
        ([0.0, 1.0], np.nan, DEFECT_TIME),
        ([np.nan, 1.0], -1.0, DEFECT_TIME),  # the time defect takes precedence
    ],
)
def test_denoiser_defect_codes(output: list[float], t: float, expected: int) -> None:
    code = denoiser_defect(jnp.asarray(output, dtype=jnp.float32), jnp.float32(t))
    assert code.dtype == jnp.int32
    assert code.shape == ()
    assert int(code) == expected


def test_denoiser_defect_under_jit_and_vmap() -> None:
    outputs = jnp.array([[0.0, 1.0], [np.nan, 0.0], [np.inf, 0.0], [0.0, 0.0]])
    times = jnp.array([1.0, 1.0, 1.0, -1.0])
    codes = jax.jit(jax.vmap(denoiser_defect))(outputs, times)
    np.testing.assert_array_equal(codes, [DEFECT_OK, DEFECT_NAN, DEFECT_INFINITE, DEFECT_TIME])


def test_raise_if_defect_is_silent_without_defect() -> None:
    raise_if_defect(jnp.int32(DEFECT_OK), name="f")
    raise_if_defect(jnp.zeros(5, dtype=jnp.int32), name="f", t=jnp.ones(5))


@pytest.mark.parametrize(
    ("code", "pattern"),
    [
        (DEFECT_NAN, r"^score returned NaN at t=0\.25$"),
        (DEFECT_INFINITE, r"^score returned an infinite value at t=0\.25$"),
        (DEFECT_TIME, r"^score was called with t=0\.25: t must be finite and non-negative$"),
    ],
)
def test_raise_if_defect_messages(code: int, pattern: str) -> None:
    with pytest.raises(DenoiserError, match=pattern):
        raise_if_defect(jnp.int32(code), name="score", t=0.25, error=DenoiserError)


def test_raise_if_defect_names_negative_time() -> None:
    code = denoiser_defect(jnp.zeros(2), -2.0)
    with pytest.raises(DenoiserError, match=r"called with t=-2\.0: t must be finite and non-neg"):
        raise_if_defect(code, name="denoiser", t=-2.0, error=DenoiserError)


def test_raise_if_defect_reports_first_batch_member() -> None:
    codes = jnp.array([DEFECT_OK, DEFECT_INFINITE, DEFECT_NAN], dtype=jnp.int32)
    times = jnp.array([0.0, 0.5, 1.0])
    with pytest.raises(DenoiserError, match=r"infinite value at t=0\.5 \(batch index 1\)"):
        raise_if_defect(codes, name="denoiser", t=times, error=DenoiserError)


def test_raise_if_defect_rejects_unknown_codes() -> None:
    with pytest.raises(ValueError, match="unknown defect code 7"):
        raise_if_defect(jnp.int32(7))


# --- check_time_grid -------------------------------------------------------------------------


def test_time_grid_valid_is_returned_as_float32() -> None:
    grid = check_time_grid(jnp.linspace(0.0, 2.0, 5))
    assert grid.dtype == np.float32
    np.testing.assert_allclose(grid, [0.0, 0.5, 1.0, 1.5, 2.0])
    np.testing.assert_array_equal(check_time_grid([0, 1, 3]), [0.0, 1.0, 3.0])


def test_time_grid_must_start_at_zero() -> None:
    with pytest.raises(DenoiserError, match=r"times must start at 0, got times\[0\] = 0\.1"):
        check_time_grid([0.1, 0.5, 1.0])


def test_time_grid_must_be_strictly_increasing() -> None:
    with pytest.raises(
        DenoiserError, match=r"strictly increasing: times\[3\] = 0\.5 <= times\[2\] = 0\.7"
    ):
        check_time_grid([0.0, 0.3, 0.7, 0.5, 1.0])
    with pytest.raises(DenoiserError, match=r"times\[2\] = 0\.3 <= times\[1\] = 0\.3"):
        check_time_grid([0.0, 0.3, 0.3])


def test_time_grid_must_be_increasing_in_float32() -> None:
    grid = np.array([0.0, 1.0, 1.0 + 1e-12, 2.0])  # distinct in float64 only
    with pytest.raises(DenoiserError, match=r"strictly increasing in float32: times\[2\]"):
        check_time_grid(grid)


def test_time_grid_must_be_finite() -> None:
    with pytest.raises(DenoiserError, match=r"grid\[2\] = nan is not finite"):
        check_time_grid([0.0, 1.0, np.nan, 2.0], name="grid")
    with pytest.raises(DenoiserError, match=r"times\[1\] = inf is not finite"):
        check_time_grid([0.0, np.inf])


@pytest.mark.parametrize(
    ("times", "pattern"),
    [
        (np.zeros((2, 2)), r"one-dimensional, got shape \(2, 2\)"),
        (np.array(0.0), r"one-dimensional, got shape \(\)"),
        (np.array([0.0]), "at least two times"),
        (np.array([0.0, 1.0 + 1.0j]), "real"),
        (np.array([False, True]), "real"),
    ],
)
def test_time_grid_rejects_bad_shapes_and_dtypes(times: np.ndarray, pattern: str) -> None:
    with pytest.raises(DenoiserError, match=pattern):
        check_time_grid(times)


def test_traced_time_grid_passes_through_as_float32() -> None:
    grid = jax.jit(check_time_grid)(jnp.asarray([0, 1, 3], jnp.int32))
    assert grid.dtype == jnp.float32
    np.testing.assert_array_equal(grid, [0.0, 1.0, 3.0])


@pytest.mark.parametrize(
    ("times", "pattern"),
    [
        (jnp.zeros((2, 2)), r"^site 'y': times must be one-dimensional, got shape \(2, 2\)"),
        (jnp.zeros(1), r"^site 'y': times must hold at least two times"),
        (jnp.zeros(3, bool), r"^site 'y': times must be a real \(float\) array, got dtype bool"),
    ],
)
def test_traced_time_grid_still_has_its_shape_and_dtype_checked(times, pattern) -> None:
    with pytest.raises(DenoiserError, match=pattern):
        jax.jit(lambda grid: check_time_grid(grid, site="y"))(times)


# --- validate_denoiser -----------------------------------------------------------------------


def test_validate_accepts_exact_denoisers(point_cloud: PointCloudDenoiser) -> None:
    validate_denoiser(point_cloud, DIM)
    validate_denoiser(point_cloud, DIM, times=np.linspace(0.0, 10.0, 1001))
    mixture = GaussianMixtureDenoiser.isotropic(jnp.ones(2), jnp.eye(2, DIM), 0.5)
    validate_denoiser(mixture, DIM, times=[0.0, 1e-3, 1.0, 1e4], key=jax.random.key(3))


def test_validate_reports_nan_output() -> None:
    with pytest.raises(DenoiserError, match=r"^tweedie returned NaN at t=0\.0 \(batch index 0\)"):
        validate_denoiser(lambda t, y: y / t, DIM, name="tweedie")


def test_validate_reports_nan_at_a_later_grid_time() -> None:
    def breaks_after_one(t: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.where(t > 1.0, jnp.nan, 1.0) * y

    with pytest.raises(DenoiserError, match=r"returned NaN at t=2\.0 \(batch index 2\)"):
        validate_denoiser(breaks_after_one, DIM, times=[0.0, 1.0, 2.0, 3.0])


def test_validate_reports_infinite_output() -> None:
    with pytest.raises(DenoiserError, match="returned an infinite value"):
        validate_denoiser(lambda t, y: y + jnp.log(t), DIM)


def test_validate_reports_wrong_shape() -> None:
    with pytest.raises(DenoiserError, match=r"must return float32\[3\]"):
        validate_denoiser(lambda t, y: jnp.concatenate([y, y]), DIM)


def test_validate_reports_bad_grid(point_cloud: PointCloudDenoiser) -> None:
    with pytest.raises(DenoiserError, match="times must start at 0"):
        validate_denoiser(point_cloud, DIM, times=[1.0, 2.0])
    with pytest.raises(DenoiserError, match=r"strictly increasing: times\[2\] = 0\.5"):
        validate_denoiser(point_cloud, DIM, times=[0.0, 1.0, 0.5])


def test_validate_reports_failure_under_vmap() -> None:
    def host_only(t: jax.Array, y: jax.Array) -> jax.Array:
        # A callback without a batching rule traces fine but cannot be vmapped.
        return jax.pure_callback(
            lambda value: np.asarray(value), jax.ShapeDtypeStruct(y.shape, y.dtype), y
        )

    with pytest.raises(DenoiserError, match=r"failed under jax.jit\(jax.vmap"):
        validate_denoiser(host_only, DIM)
