"""Batch bucket sizes chosen by cost (``engine.buckets.buckets``, ``SPLIT_BATCH_BYTES``): a batch
that moves little is compiled in one size; large batches keep their smaller sizes; processes
with batched forms keep every single-step size.  Buckets never change draws
(``tests/engine/test_scheduler.py::test_capacities_do_not_change_draws``)."""

import jax

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine.buckets import SPLIT_BATCH_BYTES, buckets
from numpyro_autospec.engine.plan import Capacity, plan
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess

KEY = jax.random.key_data(jax.random.PRNGKey(0))


def test_buckets_stop_at_the_first_cheap_size():
    assert buckets(1000, 4) == (4, 15, 62, 250, 1000)  # no cost given: every power of 4
    item = 1024
    sizes = buckets(1000, 4, item_bytes=item)
    assert sizes == (250, 1000)
    assert sizes[0] * item <= SPLIT_BATCH_BYTES < sizes[1] * item
    assert buckets(10, 4, item_bytes=item) == (10,)


def test_a_small_problem_compiles_one_size_per_query_shape():
    process = AnyOrderProcess(CurieWeissOracle(32, beta=1.0), 32, 2)
    sizes = plan(process, SamplerConfig(), Capacity(), 8, KEY)
    for shape in (sizes.lane_buckets, sizes.query_buckets, sizes.block_buckets):
        assert shape == (sizes.num_slots,)
    assert sizes.window_buckets == (sizes.verify_lanes,)


def test_a_large_problem_keeps_smaller_sizes():
    process = AnyOrderProcess(CurieWeissOracle(4096, beta=1.0), 4096, 2)
    sizes = plan(process, SamplerConfig(), Capacity(), 8, KEY)
    assert len(sizes.lane_buckets) >= 3 and sizes.lane_buckets[-1] == sizes.num_slots
