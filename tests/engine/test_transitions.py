"""Which fields each per-slot transition moves (``engine.transitions``).

A phase writes back only the fields its transition changed (an unchanged field is the gathered
array itself), so a transition that leaves the state alone costs no copy of it: the local
transitions that only move a task's bookkeeping (a finished block's next block, a new block's
start) must leave the state ``x`` untouched, and a leaf step must change one step of it.  The
draws these transitions make are tested against the reference sampler in
``tests/engine/test_scheduler.py`` and ``tests/engine/test_diffusion.py``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.denoisers import PointCloudDenoiser
from numpyro_autospec.engine.plan import Capacity, plan
from numpyro_autospec.engine.pool import Status, gather
from numpyro_autospec.engine.state import initial_state, make_context
from numpyro_autospec.engine.transitions import is_leaf_step, is_local, leaf_step, local_step
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess, DiffusionProcess
from numpyro_autospec.processes.time_grids import default_times

KEY = jax.random.PRNGKey(0)
NUM_STEPS = 16


def processes():
    return {
        "diffusion": DiffusionProcess(
            PointCloudDenoiser(jnp.eye(3)), 3, default_times(NUM_STEPS, 50.0)
        ),
        "any-order": AnyOrderProcess(CurieWeissOracle(NUM_STEPS, beta=1.0), NUM_STEPS, 2),
    }


def context_and_slot(process):
    """A context of one draw and its slot 0, a root task on ``[0, N)`` with a drawn state."""
    context = make_context(process, plan(process, SamplerConfig(), Capacity(), 1, KEY), KEY[None])
    slot = gather(initial_state(context).pool, 0)
    return context, slot._replace(
        x=process.init(KEY),
        start=jnp.int32(0),
        stop=jnp.int32(process.num_steps),
        parent=jnp.int32(-1),
    )


@pytest.mark.parametrize("name", ["diffusion", "any-order"])
@pytest.mark.parametrize("status", [Status.START, Status.BLOCK_DONE])
def test_local_transitions_leave_the_state_alone(name, status):
    context, slot = context_and_slot(processes()[name])
    slot = slot._replace(status=jnp.int32(status), block_start=jnp.int32(0), block_end=jnp.int32(4))
    slot = slot._replace(cursor=jnp.int32(4) if status == Status.BLOCK_DONE else slot.cursor)
    assert bool(is_local(jax.tree.map(lambda leaf: leaf[None], slot))[0])
    moved = local_step(context, slot)
    assert int(moved.status) != status  # it did move the task
    for before, after in zip(jax.tree.leaves(slot.x), jax.tree.leaves(moved.x), strict=True):
        assert after is before  # not even a copy: the phase writes nothing back


@pytest.mark.parametrize("name", ["diffusion", "any-order"])
def test_a_leaf_step_draws_one_step(name):
    process = processes()[name]
    context, slot = context_and_slot(process)
    step = 5
    slot = slot._replace(
        status=jnp.int32(Status.LEAF),
        block_start=jnp.int32(step),
        block_end=jnp.int32(step + 1),
        cursor=jnp.int32(step),
        answer=process.query(slot.x, step, context.plan.answer_rows),
        has_answer=jnp.bool_(True),
    )
    assert bool(is_leaf_step(jax.tree.map(lambda leaf: leaf[None], slot))[0])
    moved = leaf_step(context, slot)
    assert int(moved.status) == Status.BLOCK_DONE and int(moved.cursor) == step + 1
    assert not bool(moved.has_answer) and np.isfinite(float(moved.log_mu_block))
    changed = [
        np.flatnonzero(np.any(np.asarray(a != b).reshape(len(a), -1), axis=1))
        for a, b in zip(jax.tree.leaves(slot.x), jax.tree.leaves(moved.x), strict=True)
        if np.ndim(a)
    ]
    # one step of the state: the diffusion's row step + 1, the any-order value and mask of
    # the site placed at position ``step`` of the order
    assert any(len(rows) for rows in changed)
    assert all(len(rows) <= 1 for rows in changed), changed
