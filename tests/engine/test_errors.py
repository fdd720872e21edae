"""Errors found inside the compiled engine reach the caller as the project's own exceptions
(:mod:`numpyro_autospec._core.failures`), naming the site and the user's function, carried as data
(``Samples.failure``) with no host callback in the program.

The oracles below answer well on the host-side probes of ``validate_oracle`` and break only in
the middle of a run (a given site pinned to 1 with 6 to 8 sites pinned; a denoiser at small
times), so only the checks inside the compiled program can see them.
"""

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec._core import failures as errors
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.denoisers import PointCloudDenoiser
from numpyro_autospec.engine import run, sequential_run
from numpyro_autospec.errors import DenoiserError, OracleError
from numpyro_autospec.oracles import CurieWeissOracle, validate_oracle
from numpyro_autospec.processes import AnyOrderProcess, DiffusionProcess, default_times

N = 12
CURIE_WEISS = CurieWeissOracle(N, beta=1.0)
KEYS = jax.random.split(jax.random.PRNGKey(0), 64)
MESSAGE = r"site 'spins': spin_oracle returned NaN in row 3 \(query at step \d+\) \(draw \d+\)"


def spin_oracle(x, mask):
    """Curie-Weiss, with NaN in row 3 once site 0 is pinned to 1 among 6 to 8 pinned sites."""
    answer = CURIE_WEISS(x, mask)
    pinned = jnp.sum(mask)
    broken = (pinned >= 6) & (pinned <= 8) & mask[0] & (x[0] == 1)
    return jnp.where(broken, answer.at[3].set(jnp.nan), answer)


PROCESS = AnyOrderProcess(spin_oracle, N, 2, name="spins")
CLOUD = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], jnp.float32))


def cloud_denoiser(t, y):
    """The point cloud's denoiser, NaN at times past 2 (the middle of the grid)."""
    return jnp.where(t > 2.0, jnp.nan, CLOUD(t, y))


DIFFUSION = DiffusionProcess(cloud_denoiser, 2, default_times(8, 30.0), name="cloud")


def test_the_broken_oracle_passes_the_host_side_probes():
    validate_oracle(spin_oracle, N, 2, name="spins")


def test_engine_run_called_eagerly_raises_oracle_error_naming_the_function():
    with pytest.raises(OracleError, match=MESSAGE):
        jax.block_until_ready(run(PROCESS, KEYS))


def test_under_your_own_jit_the_returned_samples_raise_oracle_error():
    program = jax.jit(lambda keys: run(PROCESS, keys))
    with pytest.raises(OracleError, match=MESSAGE):
        jax.block_until_ready(program(KEYS))
    # the failure is data: the program's output carries the record, the values are there too
    values = jax.jit(lambda keys: run(PROCESS, keys).failure.record)(KEYS)
    assert int(values[0]) == 1 and int(values[1]) == 1  # run 1 failed, code 1 (NaN)


def test_under_vmap_over_pools_the_failing_pool_raises():
    """Two pools in one program, the defect in one of them: the batched record names it."""
    program = jax.jit(jax.vmap(lambda keys: run(PROCESS, keys)))
    with pytest.raises(OracleError, match=MESSAGE):
        jax.block_until_ready(program(KEYS.reshape(2, 32, 2)))


def test_no_host_callback_in_the_program():
    """No callback anywhere in the engine's program (JAX's persistent compilation cache does
    not keep programs with callbacks), nor in the sequential sampler's."""
    process = AnyOrderProcess(CURIE_WEISS, N, 2, name="spins")

    def primitives(jaxpr):
        for equation in jaxpr.eqns:
            yield equation.primitive.name
            for sub in jax.extend.core.jaxprs_in_params(equation.params):
                yield from primitives(sub)

    for sampler in (run, sequential_run):
        jaxpr = jax.make_jaxpr(lambda k, sampler=sampler: sampler(process, k))(KEYS[:2]).jaxpr
        names = set(primitives(jaxpr))
        assert names & {"while", "scan"}
        assert not {name for name in names if "callback" in name}, names


def test_sequential_run_validates_answers():
    program = jax.jit(lambda keys: sequential_run(PROCESS, keys))
    with pytest.raises(OracleError, match=MESSAGE):
        jax.block_until_ready(program(KEYS))
    values = jax.jit(lambda keys: sequential_run(PROCESS, keys, validate=False).value)(KEYS)
    assert values.shape == (64, N)


@pytest.mark.parametrize("method", ["autospec", "sequential"])
def test_diffusion_raises_denoiser_error_naming_the_denoiser(method):
    config = SamplerConfig(method=method)
    if method == "sequential":
        program = jax.jit(lambda keys: sequential_run(DIFFUSION, keys))
    else:
        program = jax.jit(lambda keys: run(DIFFUSION, keys, config))
    message = r"site 'cloud': denoiser cloud_denoiser returned NaN at t=\d"
    with pytest.raises(DenoiserError, match=message):
        jax.block_until_ready(program(KEYS[:2]))


def test_a_failure_raises_where_it_is_rebuilt_on_the_host():
    reports = errors.FailureReports()
    reports.reporters = (
        lambda defect, incomplete: None,
        lambda defect, incomplete: OracleError(f"site 'x': code {defect[0]} in row {defect[1]}"),
    )
    record = np.zeros((2, errors.RECORD_SIZE), np.int32)
    record[1] = [2, 1, 3, 0, 0, 0]  # the second batch entry: run 2, NaN (code 1) in row 3
    leaves, treedef = jax.tree.flatten(errors.Failure(jnp.asarray(record), reports))
    with pytest.raises(OracleError, match="site 'x': code 1 in row 3"):
        jax.tree.unflatten(treedef, leaves)
    # a failure-free record, and any failure under a transformation, is a container
    fine = jax.tree.map(lambda leaf: leaf, errors.Failure.none(reports, (2,)))
    assert np.array_equal(fine.record, np.zeros((2, errors.RECORD_SIZE)))
    traced = jax.jit(lambda failure: failure)(errors.Failure.none(reports))
    assert not bool(traced.failed)
