"""The reference sampler (the executable specification): its costs and the draws it keeps.

Its law is tested through the engine, which is a second implementation of the same function
of the key: ``tests/engine/test_scheduler.py`` and ``tests/engine/test_block_form.py`` show the
engine's draws equal the reference's key for key (every method, a random table, an
inconsistent oracle with a fixed order and infilling) and that a starved pool's draws equal an
ample pool's (so they are the reference's function of the key too), and the engine's draws
pass goodness-of-fit against the exact laws at 20 000-40 000 draws there, where the reference,
a Python loop, would take minutes; the same files reject a deliberately wrong engine.
"""

import jax
import numpy as np

import numpyro_autospec.reference as reference
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.processes import AnyOrderProcess
from tests.tables import random_table

N, Q = 4, 3
PAPER = SamplerConfig(root_windows=False)
#: the default root's windows with a recursion block after a window that kept little
WINDOWS = SamplerConfig(window=2, min_window=1, floor=4, fallback=3)

#: one process for every test: the reference's jitted programs depend on the table (a
#: constant of every program), so one table means one set of compiled programs
TABLE_ORACLE = random_table(0)
TABLE_PROCESS = AnyOrderProcess(TABLE_ORACLE, N, Q)


def test_draws_do_not_depend_on_growth_rate():
    """The residual growth only sizes the batches of parallel trials (and so the cost), never
    the draw: the same keys give the same values at growth 1 and 1/4.  On the paper's recursion
    (``PAPER``); under ``WINDOWS`` at n = 4 a rejected block is short enough to draw its
    residual by enumeration, so no residual loop (and no growth) occurs there.  100 keys:
    about 7% of the draws reach a second batch of trials, which the cost check confirms."""
    costs_differ = 0
    for k in jax.random.split(jax.random.PRNGKey(6), 100):
        a = reference.sample(TABLE_PROCESS, k, PAPER._replace(growth=1.0))
        b = reference.sample(TABLE_PROCESS, k, PAPER._replace(growth=0.25))
        np.testing.assert_array_equal(a.value, b.value)
        costs_differ += (a.rounds, a.queries) != (b.rounds, b.queries)
    assert costs_differ > 0  # the growth did change the trial batches of some draws


def test_sequential_costs_n_rounds_and_queries():
    draw = reference.sample(
        TABLE_PROCESS, jax.random.PRNGKey(0), SamplerConfig(method="sequential")
    )
    assert (draw.rounds, draw.queries) == (N, N)
