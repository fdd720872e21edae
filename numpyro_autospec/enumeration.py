"""The residual of a small block, sampled exactly by enumeration.

When the speculation :math:`x' \\sim \\nu_S` of a recursion block :math:`S = [a, a+m)` is
rejected, the paper samples the residual law

.. math::

    r_S(y) = \\frac{(\\mu_S(y) - \\nu_S(y))_+}{\\mathrm{TV}(\\mu_S, \\nu_S)}

by a loop of trials :math:`y \\sim \\mu_S` (each an exact recursive draw of the block), the
first trial kept with probability :math:`\\max(0, 1 - \\nu_S(y)/\\mu_S(y))` being output
(docs/algorithm.md, section 3).  A rejected block of small total variation therefore costs
about :math:`1/\\mathrm{TV}` trials: rare, but it is what makes the cost of a draw
heavy-tailed (docs/benchmarks.md, "The cost of one draw is heavy-tailed": on Curie-Weiss
``n = 4096`` a 2-step block whose speculation differs from its target only by the pair's
correlation runs about 430 trials).

When the block's steps take few values, :math:`r_S` can be computed outright.
:math:`\\mu_S(y) = \\prod_j \\mu(y_j \\mid \\text{prefix}, y_{<j})` needs the target rows of the
steps ``a+1..a+m-1`` under every value of the steps before them: one block-scoring call per
*prefix configuration* :math:`(y_0, \\dots, y_{m-2}) \\in [q]^{m-1}` (the row of step ``a`` is
in the speculation answer :math:`O_a`), all of them in **one round**.  Then
:math:`y \\sim r_S` is drawn by a single categorical draw over the :math:`q^m` blocks.  The
output law is the paper's (the residual is the same distribution; only the way of sampling it
changes), in one round and :math:`q^{m-1}` oracle evaluations instead of about
:math:`1/\\mathrm{TV}` trials.  Both samplers (:mod:`numpyro_autospec.reference` and the
engine) call :func:`sample_residual` with the same static ``size``, so they draw the same
block from the same key.

Configurations are numbered little-endian: configuration ``c`` sets step ``a + j`` to digit
``j`` of ``c`` in base ``q``, so the configurations of a block of ``m <= size`` steps are the
first :math:`q^{m-1}` (the later digits are 0), and the engine runs blocks of every size in
one static shape.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec.rejection import residual_log_accept_prob

__all__ = ["Enumeration", "configurations", "enumeration_size", "sample_residual"]


def enumeration_size(limit: int, num_categories: int) -> int:
    """The largest block size ``m >= 2`` whose prefix configurations number at most ``limit``
    (:math:`q^{m-1} \\le` ``limit``), or 0 when even a 2-step block has more.

    >>> enumeration_size(16, 2), enumeration_size(16, 4), enumeration_size(16, 17)
    (5, 3, 0)
    >>> enumeration_size(0, 2)
    0
    """
    q = int(num_categories)
    if q < 1 or limit < q:
        return 0
    if q == 1:
        return 2
    size = 1
    while q**size <= limit:
        size += 1
    return size


def configurations(num_categories: int, size: int) -> np.ndarray:
    """``[q^(size-1), size-1]`` digits: row ``c`` holds configuration ``c`` of the steps
    ``a..a+size-2``, digit ``j`` being :math:`\\lfloor c / q^j \\rfloor \\bmod q`.

    >>> configurations(2, 3).tolist()
    [[0, 0], [1, 0], [0, 1], [1, 1]]
    """
    q, width = int(num_categories), int(size) - 1
    index = np.arange(q**width)[:, None]
    return ((index // q ** np.arange(width)[None, :]) % q).astype(np.int32)


class Enumeration(NamedTuple):
    """The outcome of :func:`sample_residual`: the state with the block drawn from the
    residual, its target log-density, and what the oracle answered (for validation).

    >>> Enumeration._fields[:3], Enumeration._fields[-2:]
    (('x', 'log_mu', 'rows'), ('evaluations', 'conditionals'))
    """

    x: object  # the state with steps a..a+m-1 drawn from r_S
    log_mu: Array  # log mu_S of the drawn block
    rows: Array  # [C, size - 1, q]: target rows of steps a+1..a+size-1 under each
    valid: Array  # bool[C]: configurations of the block (c < q^(m-1))
    evaluations: Array  # int: oracle evaluations made for the block
    conditionals: Array  # int: rows of conditionals the block used


def target_rows(process, x, first: Array, num_rows: int, block_scoring: bool) -> Array:
    """The target rows of the steps ``first..first+num_rows-1``, each given its own prefix:
    one ``score_block`` call, or one single-step query per step."""
    if block_scoring:
        return process.score_block(x, first, num_rows)
    last = process.num_steps - 1
    steps = jnp.minimum(first + jnp.arange(num_rows), last)
    answers = jax.vmap(process.query, (None, 0, None))(x, steps, 1)
    return jax.vmap(process.reduce, (None, 0, 0))(x, steps, answers)


def sample_residual(
    process, key: Array, x, a: Array, m: Array, answer, size: int, block_scoring: bool
) -> Enumeration:
    """A draw of the block ``[a, a+m)`` from :math:`(\\mu_S - \\nu_S)_+` (normalized), for
    ``2 <= m <= size`` (``size`` static, ``m`` may be traced), given the speculation answer
    ``answer`` = :math:`O_a` of the block; ``process`` has discrete steps
    (:class:`~numpyro_autospec.processes.base.DiscreteStepProcess`).

    One categorical draw from ``key`` over the :math:`q^{m}` blocks, with log-weights
    :math:`\\log\\mu_S(y) + \\log\\max(0, 1 - \\nu_S(y)/\\mu_S(y))`.  Should rounding leave no
    block with :math:`\\mu_S > \\nu_S` (the speculation was then rejected with probability
    about 0), the block is drawn from :math:`\\mu_S` itself.

    Example: two sites equal with probability 0.8 (fair marginals), speculated from the
    answer at the start as independent fair coins: :math:`(\\mu - \\nu)_+` is 0.15 on each
    equal pair and 0 on the others, so the residual draws equal pairs only.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.oracles import TableOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> table = jnp.log(jnp.array([[0.4, 0.1], [0.1, 0.4]]))
    >>> process = AnyOrderProcess(TableOracle(table), 2, 2)
    >>> x = process.init(jax.random.PRNGKey(0))
    >>> answer = process.query(x, 0, 2)  # O_0: both marginals, given nothing
    >>> def draw(key):
    ...     return sample_residual(process, key, x, 0, 2, answer, 2, True).x.values
    >>> blocks = jax.vmap(draw)(jax.random.split(jax.random.PRNGKey(1), 2000))
    >>> int(jnp.sum(blocks[:, 0] != blocks[:, 1])), round(float(blocks.mean()), 1)
    (0, 0.5)
    """
    q = int(process.num_categories)
    digits = jnp.asarray(configurations(q, size))  # [C, size - 1]
    width = size - 1
    valid = jnp.arange(digits.shape[0]) < q ** (m - 1)

    def configure(row):
        """``x`` with steps ``a..a+m-2`` set to the configuration (later steps untouched)."""
        state = x
        for j in range(width):
            step = a + jnp.minimum(j, m - 1)
            value = jnp.where(j < m - 1, row[j], process.step_value(state, step))
            state = process.set_step_value(state, step, value)
        return state

    # one vmap for the configuration and its scoring: what a configuration does not change
    # (an any-order draw's order and ranks) stays unbatched, not copied C times
    rows = jax.vmap(lambda row: target_rows(process, configure(row), a + 1, width, block_scoring))(
        digits
    )  # [C, width, q]
    first = process.reduce(x, a, answer)  # [q]: step a, from O_a
    speculation = jax.vmap(process.spec_reduce, (None, None, 0, None))(
        x, a, a + jnp.minimum(jnp.arange(size), m - 1), answer
    )  # [size, q]

    # log mu and log nu of the block (configuration c, last value v), [C, q]
    inner = jnp.arange(width)
    inside = inner < m - 1  # steps a..a+m-2 (the configuration's own)
    taken_rows = jnp.take_along_axis(rows[:, : width - 1], digits[:, 1:, None], axis=2)[..., 0]
    middle = jnp.sum(jnp.where(inner[1:] < m - 1, taken_rows, 0.0), axis=1) if width > 1 else 0.0
    last_row = jnp.take(rows, m - 2, axis=1)  # [C, q]: step a+m-1 under each configuration
    log_mu = (first[digits[:, 0]] + middle)[:, None] + last_row
    spec_taken = jnp.take_along_axis(speculation[:width][None], digits[:, :, None], axis=2)[..., 0]
    spec_prefix = jnp.sum(jnp.where(inside, spec_taken, 0.0), axis=1)
    log_nu = spec_prefix[:, None] + jnp.take(speculation, m - 1, axis=0)[None, :]

    log_weight = log_mu + residual_log_accept_prob(log_mu, log_nu)
    log_weight = jnp.where(valid[:, None], log_weight, -jnp.inf)
    fallback = jnp.where(valid[:, None], log_mu, -jnp.inf)
    log_weight = jnp.where(jnp.any(log_weight > -jnp.inf), log_weight, fallback)
    index = jax.random.categorical(key, log_weight.reshape(-1))
    chosen, value = index // q, index % q
    drawn = process.set_step_value(configure(digits[chosen]), a + m - 1, value.astype(jnp.int32))
    evaluations = q ** (m - 1) * (1 if block_scoring else m - 1)
    return Enumeration(
        x=drawn,
        log_mu=log_mu[chosen, value],
        rows=rows,
        valid=valid,
        evaluations=evaluations,
        conditionals=q ** (m - 1) * (m - 1),
    )
