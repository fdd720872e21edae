"""Query batches across devices (``Capacity(mesh=...)``, :mod:`numpyro_autospec.engine._sharding`):
the same draws, rounds, queries and conditionals as on one device, the oracle batch actually
split, and a clear error for a bad mesh.

The suite's ``conftest.py`` gives every test process one host device, so the sharded runs are
made in a subprocess with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
(:func:`sharded_runs`), and compared array for array with the same runs on one device in this
process.  Three paths, one case each:

* ``network``: a masked MLP oracle (:class:`~numpyro_autospec.learned.MaskedMLP`) through
  :func:`numpyro_autospec.engine.run` under ``jit``; its compiled program is also read, every
  matrix product of the oracle must have a quarter of the lanes of a call (the SPMD partitioner
  split the batch);
* ``diffusion``: stochastic localization (the batched single-step form ``query_batch``, which
  reads the pool in place);
* ``kernel``: ``MCMC(AutospecKernel(model, capacity=Capacity(mesh=mesh)))`` on Curie-Weiss,
  whose oracle scores blocks (block-form calls), two chains sharing one pool.

Several hosts: two processes of 2 host devices each, connected by :func:`jax.distributed.initialize`
(CPU collectives over Gloo), run the ``network`` case on a global mesh of 4 devices, its keys
made inside the jitted function from a seed as docs/scaling.md shows; each process must read the
draws of the run on one device (``slow``; the one-device program is the ``network`` case's,
already compiled in this process).

A deliberately wrong sharded sampler (its oracle answers routed to the neighbouring lane, the
typical bug of hand-written sharding) is run on the ``network`` case too: the comparison must
reject it.  Equal draws carry the exactness of the engine over (tests/engine/test_scheduler.py,
tests/engine/test_diffusion.py).  CPU cost: seven engine programs
are compiled (about 20 s of CPU each, 30 s for the kernel's), three in this process and four in
the subprocess (the wrong sampler's included), plus one in each of the ``slow`` test's two
processes.
"""

from __future__ import annotations

import functools
import math
import os
import re
import socket
import subprocess
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from numpyro.infer import MCMC

from numpyro_autospec import AnyOrderAR, SamplerConfig
from numpyro_autospec.denoisers import PointCloudDenoiser
from numpyro_autospec.engine import Capacity, Samples, run
from numpyro_autospec.engine import _plan as engine_plan
from numpyro_autospec.engine import _round as engine_rounds
from numpyro_autospec.engine._sharding import ShardingError, sharded_batch
from numpyro_autospec.infer import AutospecKernel
from numpyro_autospec.learned import LearnedOracle, MaskedMLP
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess, DiffusionProcess, default_times
from tests.fresh_process import SUITE_EMITTERS, run_python

DEVICES = 4
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: layer widths 40 and n q = 22: no batch size of the run (4, 6, 24, 16, 32) nor its quarters
NETWORK_WIDTHS = (40, 22)
NETWORK = AnyOrderProcess(
    LearnedOracle(MaskedMLP(11, 2, hidden_size=40, depth=1, key=jax.random.PRNGKey(3))), 11, 2
)
NETWORK_CAPACITY = Capacity(num_slots=24, max_queries=32)
DIFFUSION = DiffusionProcess(
    PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.4]])),
    dim=2,
    times=default_times(8),
)
CURIE_WEISS = CurieWeissOracle(16, beta=1.0)


def curie_weiss_model():
    numpyro.sample("x", AnyOrderAR(CURIE_WEISS, 16, 2))


def mesh_or_none(devices: int | None):
    return None if devices is None else jax.make_mesh((devices,), ("batch",))


@functools.cache
def compiled_engine(process, capacity, config, num_draws):
    """The engine's program for ``num_draws`` keys, compiled once (runs and its text)."""
    keys = jax.random.split(jax.random.PRNGKey(7), num_draws)
    return jax.jit(lambda keys: run(process, keys, config, capacity)).lower(keys).compile()


def engine_case(process, capacity, config, num_draws, mesh) -> dict[str, np.ndarray]:
    keys = jax.random.split(jax.random.PRNGKey(7), num_draws)
    samples = compiled_engine(process, capacity._replace(mesh=mesh), config, num_draws)(keys)
    fields = samples._asdict()
    del fields["failure"]
    return {name: np.asarray(value) for name, value in fields.items()}


def kernel_case(mesh) -> dict[str, np.ndarray]:
    mcmc = MCMC(
        AutospecKernel(curie_weiss_model, capacity=Capacity(mesh=mesh)),
        num_warmup=0,
        num_samples=3,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    mcmc.run(jax.random.PRNGKey(5), extra_fields=("rounds", "queries"))
    extra = mcmc.get_extra_fields()
    return {
        "value": np.asarray(mcmc.get_samples()["x"]),
        "rounds": np.asarray(extra["rounds"]),
        "queries": np.asarray(extra["queries"]),
    }


CASES = {
    "network": functools.partial(engine_case, NETWORK, NETWORK_CAPACITY, None, 6),
    "diffusion": functools.partial(
        engine_case, DIFFUSION, Capacity(), SamplerConfig(block_size=None), 3
    ),
    "kernel": kernel_case,
}


def lane_misrouting_batch(mesh, function, *batched):
    """A wrong sharded batch: lane ``i`` receives the answer of lane ``i + 1``."""
    return jax.tree.map(
        lambda leaf: jnp.roll(leaf, -1, axis=0), sharded_batch(mesh, function, *batched)
    )


def product_lanes(hlo: str) -> set[int]:
    """The batch sizes of the oracle's matrix products in a compiled program: the dimensions of
    each product's output that are not a layer width (the oracle's are the program's only
    products; XLA writes a product on one lane as a matrix-vector product ``[width, 1]``)."""
    lanes = set()
    for line in hlo.splitlines():
        product = re.search(r"= f32\[(\d+),(\d+)\]\{[\d,]*\} dot\(", line)
        if product:
            lanes |= {int(size) for size in product.groups()} - set(NETWORK_WIDTHS)
    return lanes


def sharded_runs(path: str) -> None:
    """Run in a process with ``DEVICES`` host devices: every case on a mesh of all of them, the
    wrong sampler, and the compiled program of the ``network`` case; saved to ``path``."""
    assert jax.device_count() == DEVICES, jax.devices()
    mesh = mesh_or_none(DEVICES)
    results = {
        f"{case}/{name}": value for case in CASES for name, value in CASES[case](mesh).items()
    }
    hlo = compiled_engine(NETWORK, NETWORK_CAPACITY._replace(mesh=mesh), None, 6).as_text()
    results["network/product_lanes"] = np.array(sorted(product_lanes(hlo)))
    results["network/num_partitions"] = np.array(
        int(re.search(r"num_partitions=(\d+)", hlo).group(1))
    )
    engine_rounds.sharded_batch = lane_misrouting_batch
    compiled_engine.cache_clear()
    for name, value in CASES["network"](mesh).items():
        results[f"wrong/{name}"] = value
    np.savez(path, **results)


@pytest.fixture(scope="module")
def sharded():
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "sharded.npz")
        environment = dict(
            os.environ,
            JAX_PLATFORMS="cpu",
            XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES} {SUITE_EMITTERS}",
            PYTHONPATH=ROOT,
        )
        code = f"from tests.engine.test_sharding import sharded_runs; sharded_runs({path!r})"
        run_python(code, cwd=ROOT, env=environment, timeout=900)
        with np.load(path) as stored:
            yield dict(stored)


def assert_same_runs(expected: dict, actual: dict, case: str) -> None:
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[f"{case}/{name}"], value, err_msg=f"{case}: {name}")


@pytest.mark.parametrize("case", list(CASES))
def test_sharded_run_equals_one_device_run(sharded, case):
    assert_same_runs(CASES[case](None), sharded, case)


def test_comparison_rejects_a_lane_misrouting_sampler(sharded):
    expected = CASES["network"](None)
    with pytest.raises(AssertionError, match="wrong: "):
        assert_same_runs(expected, sharded, "wrong")


def test_oracle_products_run_on_a_quarter_of_each_batch(sharded):
    """Every oracle call of a round evaluates ``chunk`` queries (the network is set form: one
    query per unit); split over the mesh, each device computes a quarter of them."""
    resolved = engine_plan.plan(
        NETWORK, SamplerConfig(), NETWORK_CAPACITY, 6, jax.random.PRNGKey(0)
    )
    assert not resolved.block_mode
    assert int(sharded["network/num_partitions"]) == DEVICES
    assert set(sharded["network/product_lanes"].tolist()) == {math.ceil(resolved.chunk / DEVICES)}
    # on one device, the same products run on whole calls
    hlo = compiled_engine(NETWORK, NETWORK_CAPACITY, None, 6).as_text()
    assert set(product_lanes(hlo)) == {resolved.chunk}


@pytest.mark.parametrize(
    "mesh, named",
    [
        (jax.devices(), "list"),
        ("batch", "'batch'"),
        (jax.sharding.AbstractMesh((1,), ("batch",)), "AbstractMesh"),
    ],
)
def test_bad_mesh_is_refused_by_name(mesh, named):
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    with pytest.raises(ShardingError, match=re.escape(named)):
        run(NETWORK, keys, capacity=Capacity(mesh=mesh))


def test_bad_mesh_is_refused_through_the_kernel():
    mcmc = MCMC(
        AutospecKernel(curie_weiss_model, capacity=Capacity(mesh=tuple(jax.devices()))),
        num_warmup=0,
        num_samples=1,
        progress_bar=False,
    )
    with pytest.raises(ShardingError, match="capacity.mesh must be a jax.sharding.Mesh"):
        mcmc.run(jax.random.PRNGKey(0))


HOSTS = 2
#: the several-hosts run draws the ``network`` case (its keys made inside the jitted function):
#: its one-device draws are those of the program already compiled for that case
HOST_DRAWS = 6
HOST_SEED = 7


def host_draws(capacity: Capacity) -> Samples:
    """The documented multi-host call: keys made inside the jitted function from a seed (the
    keys of :func:`engine_case`)."""
    keys = lambda seed: jax.random.split(jax.random.PRNGKey(seed), HOST_DRAWS)  # noqa: E731
    return jax.jit(lambda seed: run(NETWORK, keys(seed), None, capacity))(HOST_SEED)


#: a host's program: connect (before anything initializes JAX's backend, such as importing
#: this module), then :func:`host_run`
HOST_PROGRAM = """
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize("127.0.0.1:{port}", num_processes={hosts}, process_id={index})
from tests.engine.test_sharding import host_run
host_run({path!r})
"""


def host_run(path: str) -> None:
    """One of ``HOSTS`` connected processes (2 host devices each): a global mesh over every
    process's devices; the replicated draws are read on this host and saved to ``path``."""
    assert jax.device_count() == 2 * HOSTS and jax.local_device_count() == 2
    mesh = jax.make_mesh((jax.device_count(),), ("batch",))
    samples = host_draws(NETWORK_CAPACITY._replace(mesh=mesh))
    fields = samples._asdict()
    del fields["failure"]
    np.savez(path, **{name: jax.device_get(value) for name, value in fields.items()})


@pytest.mark.slow
def test_several_hosts_give_the_draws_of_one_device():
    with socket.socket() as probe:  # a free port for the coordinator
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"--xla_force_host_platform_device_count=2 {SUITE_EMITTERS}",
        PYTHONPATH=ROOT,
    )
    with tempfile.TemporaryDirectory() as directory:
        paths = [os.path.join(directory, f"host{index}.npz") for index in range(HOSTS)]
        hosts = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    HOST_PROGRAM.format(port=port, hosts=HOSTS, index=index, path=paths[index]),
                ],
                cwd=ROOT,
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for index in range(HOSTS)
        ]
        outputs = [host.communicate(timeout=900)[0] for host in hosts]
        for host, output in zip(hosts, outputs, strict=True):
            assert host.returncode == 0, output[-3000:]
        expected = CASES["network"](None)  # the same keys, on one device
        for path in paths:
            with np.load(path) as stored:
                for name, value in expected.items():
                    np.testing.assert_array_equal(stored[name], value, err_msg=name)
