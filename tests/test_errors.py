"""Bad input raises the package's own exception types (:mod:`numpyro_autospec.errors`).

Every family of bad input -- a sampler's knobs, the data handed to a sampler, an oracle, a model
the kernel cannot draw -- raises an :class:`~numpyro_autospec.AutospecError` of the right
family, with a message that names the site, the parameter, the shape or the value, and stays
a :class:`ValueError` for code written against the builtin type.  None of these cases compiles
an engine program: the checks run before any tracing of the sampler.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from benchmarks.baselines.picard import picard_draw
from numpyro_autospec import AnyOrderAR, AutospecError, AutospecKernel, SamplerConfig
from numpyro_autospec.denoisers import PointCloudDenoiser
from numpyro_autospec.engine import Capacity
from numpyro_autospec.engine._keys import engine_keys
from numpyro_autospec.engine._plan import plan
from numpyro_autospec.errors import (
    ConfigError,
    DenoiserError,
    InputError,
    OracleError,
    ShardingError,
    TimeGridError,
)
from numpyro_autospec.infer._inspection import UnsupportedModelError, inspect_model
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess, DiffusionProcess, default_times

from support.training import check_training_data

ORACLE = CurieWeissOracle(4, beta=1.0)
PROCESS = AnyOrderProcess(ORACLE, 4, 2)


def traced_mask_process():
    """``AnyOrderProcess`` built inside ``jit`` with a traced observed mask."""

    def build(mask):
        AnyOrderProcess(ORACLE, 4, 2, observed_mask=mask, observed_values=jnp.zeros(4, int))
        return mask

    jax.jit(build)(jnp.array([True, False, False, False]))


def regression():
    mean = numpyro.sample("mean", dist.Normal(0.0, 1.0))
    numpyro.sample("y", dist.Normal(mean, 1.0), obs=0.5)


def out_of_support():
    numpyro.sample("x", AnyOrderAR(ORACLE, 4, 2), obs=np.array([0, 1, 2, 0]))


#: (what is wrong, the call, the family, words the message must contain)
CASES = [
    ("negative growth", lambda: SamplerConfig(growth=-1.0).validate(), ConfigError, "growth"),
    (
        "unknown method",
        lambda: SamplerConfig(method="gibbs").validate(),
        ConfigError,
        "method must be one of",
    ),
    (
        "no query capacity",
        lambda: plan(PROCESS, SamplerConfig(), Capacity(max_queries=0), 1, jax.random.PRNGKey(0)),
        ConfigError,
        "capacity.max_queries",
    ),
    (
        "an empty oracle call",
        lambda: plan(PROCESS, SamplerConfig(), Capacity(chunk_size=0), 1, jax.random.PRNGKey(0)),
        ConfigError,
        "capacity.chunk_size must be a positive integer, got 0",
    ),
    (
        "a mesh that is not one",
        lambda: plan(PROCESS, SamplerConfig(), Capacity(mesh="gpu"), 1, jax.random.PRNGKey(0)),
        ShardingError,
        "mesh",
    ),
    (
        "kernel method",
        lambda: AutospecKernel(lambda: None, method="gibbs"),
        ConfigError,
        "method",
    ),
    (
        "Picard on an any-order process",
        lambda: picard_draw(PROCESS, jax.random.PRNGKey(0), window_size=4, tolerance=0.0),
        InputError,
        "DiffusionProcess",
    ),
    (
        "observed mask of the wrong shape",
        lambda: AnyOrderProcess(
            ORACLE, 4, 2, observed_mask=np.ones(3, bool), observed_values=np.zeros(4, int)
        ),
        InputError,
        "site 'x': observed_mask must be a bool array of shape (4,)",
    ),
    ("traced observed mask", traced_mask_process, InputError, "observed_mask must be concrete"),
    (
        "observed value outside the support",
        lambda: inspect_model(out_of_support),
        InputError,
        "site 'x': value 2 at index 2",
    ),
    (
        "order that is not a permutation",
        lambda: AnyOrderProcess(ORACLE, 4, 2, order=np.array([0, 1, 1, 3])),
        InputError,
        "permutation",
    ),
    ("empty time grid", lambda: default_times(0), InputError, "num_steps"),
    (
        "time grid that repeats a time, given to a diffusion site",
        lambda: DiffusionProcess(PointCloudDenoiser(np.eye(2)), 2, [0.0, 1.0, 1.0], name="y"),
        InputError,
        "site 'y': times must be strictly increasing",
    ),
    (
        "keys that are not a batch",
        lambda: engine_keys(jax.random.PRNGKey(0)),
        InputError,
        "keys must be a batch",
    ),
    (
        "training data outside the categories",
        lambda: check_training_data([[0, 3]], 2, 3),
        InputError,
        "value 3 at index (0, 1)",
    ),
    ("NaN oracle parameter", lambda: CurieWeissOracle(4, beta=float("nan")), OracleError, "beta"),
    (
        "a site that needs inference",
        lambda: inspect_model(regression),
        UnsupportedModelError,
        "mean",
    ),
]


@pytest.mark.parametrize(("wrong", "call", "family", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_the_package_error_of_its_family(wrong, call, family, words):
    with pytest.raises(family) as caught:
        call()
    assert isinstance(caught.value, AutospecError) and isinstance(caught.value, ValueError)
    assert words in str(caught.value), (wrong, str(caught.value))


def test_the_families_share_one_base():
    families = (ConfigError, InputError, OracleError, ShardingError, UnsupportedModelError)
    assert all(issubclass(family, AutospecError) for family in families)
    assert issubclass(ShardingError, ConfigError)
    assert issubclass(AutospecError, ValueError)


@pytest.mark.parametrize(
    "call",
    [
        lambda: default_times(0),
        lambda: DiffusionProcess(PointCloudDenoiser(np.eye(2)), 2, [0.1, 1.0]),
    ],
    ids=["grid constructor", "grid given to a process"],
)
def test_every_bad_time_grid_raises_one_type_that_both_families_catch(call):
    """A bad grid is a :class:`TimeGridError`, whether a grid constructor or a diffusion
    process finds it: an ``InputError`` (it is data) and a ``DenoiserError`` (the type the
    process's checks raised before)."""
    for family in (TimeGridError, InputError, DenoiserError):
        with pytest.raises(family, match="times must start at 0|num_steps must be"):
            call()
