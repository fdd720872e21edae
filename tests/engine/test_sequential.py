"""The compiled sequential sampler equals the reference's sequential sampler draw for draw."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec import reference
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine._sequential import sequential_draw, sequential_run
from numpyro_autospec.oracles import CurieWeissOracle, TableOracle
from numpyro_autospec.processes import AnyOrderProcess, uniform_times

SEQUENTIAL = SamplerConfig(method="sequential")


def _table(n=4, q=3, seed=0):
    return TableOracle(np.random.default_rng(seed).normal(size=(q,) * n))


def _processes():
    table = _table()
    mask = np.array([False, True, False, True])
    yield "table", AnyOrderProcess(table, 4, 3)
    yield (
        "table-infilling",
        AnyOrderProcess(table, 4, 3, observed_values=np.array([0, 2, 0, 1]), observed_mask=mask),
    )
    yield "table-fixed-order", AnyOrderProcess(table, 4, 3, order=np.array([2, 0, 3, 1]))
    yield "curie-weiss", AnyOrderProcess(CurieWeissOracle(12, beta=1.0), 12, 2)
    yield (
        "all-observed",
        AnyOrderProcess(
            table, 4, 3, observed_values=np.array([1, 2, 0, 1]), observed_mask=np.ones(4, bool)
        ),
    )


PROCESSES = dict(_processes())


@pytest.mark.parametrize("label", sorted(PROCESSES))
def test_equals_reference_draw_for_draw(label):
    """Draw for draw; the table's draws take typed keys (``jax.random.key``), the others raw
    ``uint32[2]`` keys, and both give the reference's draws for the same key data."""
    process = PROCESSES[label]
    keys = jax.random.split(jax.random.PRNGKey(3), 6)
    run_keys = jax.random.wrap_key_data(keys) if label == "table" else keys
    samples = jax.jit(lambda keys: sequential_run(process, keys))(run_keys)
    n = process.num_steps
    for i, key in enumerate(keys):
        draw = reference.sample(process, key, SEQUENTIAL)
        np.testing.assert_array_equal(np.asarray(samples.value[i]), np.asarray(draw.value))
        assert int(samples.rounds[i]) == draw.rounds == n
        assert int(samples.queries[i]) == draw.queries == n


def test_diffusion_equals_reference_with_final_query():
    diffusion = pytest.importorskip("numpyro_autospec.processes._diffusion")
    from numpyro_autospec.denoisers import PointCloudDenoiser

    denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    process = diffusion.DiffusionProcess(denoiser, 2, uniform_times(8, 20.0))
    keys = jax.random.split(jax.random.PRNGKey(5), 3)
    samples = sequential_run(process, keys)
    for i, key in enumerate(keys):
        draw = reference.sample(process, key, SEQUENTIAL)
        np.testing.assert_allclose(np.asarray(samples.value[i]), np.asarray(draw.value), atol=1e-6)
        assert int(samples.rounds[i]) == draw.rounds == 9  # N steps + the final query
        assert int(samples.queries[i]) == draw.queries == 9


def test_vmap_and_single_draw_agree():
    process = AnyOrderProcess(_table(), 4, 3)
    keys = jax.random.split(jax.random.PRNGKey(1), 5)
    batched = jax.vmap(lambda key: sequential_run(process, key[None]).value[0])(keys)
    draw = jax.jit(lambda key: sequential_draw(process, key)[0])
    single = jnp.stack([draw(key) for key in keys])
    np.testing.assert_array_equal(batched, single)


def test_rejects_a_single_key():
    process = AnyOrderProcess(_table(), 4, 3)
    with pytest.raises(ValueError, match=r"shape \[D, 2\]"):
        sequential_run(process, jax.random.PRNGKey(0))
