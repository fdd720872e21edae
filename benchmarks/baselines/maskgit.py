r"""MaskGIT-style parallel decoding: unmask ``k`` sites per round from the product of marginals.

What masked diffusion language models ship (Chang et al., *MaskGIT: Masked Generative Image
Transformer*, CVPR 2022): round :math:`r` makes **one** oracle evaluation
``log_marginals(x, pinned)`` on the current pinned set :math:`S_r`, draws *every* free site
:math:`i` independently from its marginal :math:`p(x_i \mid x_{S_r})`, and keeps the
:math:`k_r` of them chosen by ``order``:

* ``"confidence"``: the :math:`k_r` draws with the largest log-probability
  :math:`\log p(x_i = v_i \mid x_{S_r})` under their own marginal (ties broken uniformly at
  random), MaskGIT's rule without its annealed noise;
* ``"random"``: the next :math:`k_r` sites of a uniformly random order (the process's
  order), i.e. autospeculation's speculation :math:`\nu_S` accepted without correction.

The schedule :math:`(k_1, \dots, k_R)` is static and sums to the number of free sites, so a
draw costs exactly :math:`R` rounds and :math:`R` queries.  The output law is the product of
marginals within each round, **not** the target :math:`\mu`: it is biased whenever two sites
unmasked in the same round are dependent given :math:`x_{S_r}`.  With one site per round and
``order="random"`` it is sequential any-order sampling, hence exact (and as slow: :math:`n`
rounds); with ``order="confidence"`` it is biased even then (the site is chosen after seeing
its value).  Autospeculation (Anari et al., *Parallel Sampling via Autospeculation*,
arXiv:2511.07869; docs/algorithm.md section 3) uses the same speculation but corrects it, which
is what makes it exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec.engine import Samples
from numpyro_autospec.engine._keys import engine_keys
from numpyro_autospec.errors import ConfigError, InputError, positive_integer
from numpyro_autospec.processes import AnyOrderProcess

__all__ = ["ORDERS", "cosine_schedule", "maskgit_draw", "maskgit_run", "uniform_schedule"]

#: how the sites unmasked in a round are chosen among the free ones
ORDERS = ("confidence", "random")


def uniform_schedule(num_steps: int, num_rounds: int) -> tuple[int, ...]:
    """:math:`R` rounds unmasking :math:`\\lfloor n/R \\rfloor` or :math:`\\lceil n/R \\rceil`
    sites each (the larger ones first).

    >>> uniform_schedule(10, 4)
    (3, 3, 2, 2)
    """
    num_steps, num_rounds = _check_sizes(num_steps, num_rounds)
    base, extra = divmod(num_steps, num_rounds)
    return tuple(base + (1 if r < extra else 0) for r in range(num_rounds))


def cosine_schedule(num_steps: int, num_rounds: int) -> tuple[int, ...]:
    r"""MaskGIT's cosine schedule: after round :math:`r` of :math:`R` a fraction
    :math:`\cos(\frac{\pi}{2}\frac{r}{R})` of the :math:`n` sites is still masked, so few sites
    are unmasked first and many last; every round unmasks at least one site.

    >>> cosine_schedule(16, 4)
    (2, 3, 5, 6)
    >>> sum(cosine_schedule(1000, 12))
    1000
    """
    num_steps, num_rounds = _check_sizes(num_steps, num_rounds)
    ratio = np.arange(num_rounds + 1) / num_rounds
    unmasked = [num_steps - math.floor(num_steps * math.cos(math.pi / 2 * t)) for t in ratio]
    unmasked[0], unmasked[-1] = 0, num_steps
    for r in range(1, num_rounds + 1):  # at least one site per round, from the front ...
        unmasked[r] = max(unmasked[r], unmasked[r - 1] + 1)
    for r in range(num_rounds - 1, 0, -1):  # ... and room for the rounds left, from the back
        unmasked[r] = min(unmasked[r], unmasked[r + 1] - 1)
    return tuple(int(b - a) for a, b in zip(unmasked[:-1], unmasked[1:], strict=True))


def _check_sizes(num_steps, num_rounds) -> tuple[int, int]:
    num_steps = positive_integer(num_steps, "num_steps", ConfigError)
    num_rounds = positive_integer(num_rounds, "num_rounds", ConfigError)
    if num_rounds > num_steps:
        raise ConfigError(f"num_rounds = {num_rounds} exceeds num_steps = {num_steps}")
    return num_steps, num_rounds


def _check(process, schedule: Sequence[int], order: str) -> np.ndarray:
    if not isinstance(process, AnyOrderProcess):
        raise InputError(f"MaskGIT decoding needs an AnyOrderProcess, got {type(process).__name__}")
    if process.oracle.depends_on_order:
        raise ConfigError(
            f"site {process.name!r}: MaskGIT decoding needs the set form log_marginals; "
            f"{process.oracle_name} depends on the order of the prefix"
        )
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {ORDERS}, got {order!r}")
    counts = np.asarray(schedule)
    if counts.ndim != 1 or counts.size == 0 or not np.issubdtype(counts.dtype, np.integer):
        raise ConfigError(f"schedule must be a non-empty sequence of integers, got {schedule!r}")
    if np.any(counts < 1) or int(counts.sum()) != process.num_steps:
        raise ConfigError(
            f"site {process.name!r}: the schedule must unmask at least one site per round and "
            f"{process.num_steps} free sites in all, got {counts.tolist()} (sum {counts.sum()})"
        )
    return counts.astype(np.int32)


def maskgit_draw(
    process: AnyOrderProcess,
    key: Array,
    schedule: Sequence[int],
    order: Literal["confidence", "random"] = "confidence",
) -> tuple[Array, Array, Array]:
    """One MaskGIT draw: ``(value, rounds, queries)`` with ``rounds = queries = len(schedule)``.

    :param process: an :class:`~numpyro_autospec.processes.AnyOrderProcess` (observed sites
        stay pinned; the random order of :meth:`~AnyOrderProcess.init` serves
        ``order="random"``).
    :param key: one PRNG key.
    :param schedule: static positive integers :math:`k_r`, summing to ``process.num_steps``.
    :param order: ``"confidence"`` or ``"random"`` (module docstring).

    Example: four rounds of one query each on a Curie-Weiss model of 8 spins.

    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(8, beta=1.0), 8, 2)
    >>> value, rounds, queries = maskgit_draw(process, jax.random.PRNGKey(0), (2, 2, 2, 2))
    >>> value.shape, int(rounds), int(queries)
    ((8,), 4, 4)
    """
    counts = _check(process, schedule, order)
    n = process.num_positions
    k_init, k_run = jax.random.split(key)
    state = process.init(k_init)
    start = process.num_observed + np.concatenate([[0], np.cumsum(counts)[:-1]])

    def one_round(carry, inputs):
        values, pinned = carry
        round_key, first, count = inputs
        draw_key, tie_key = jax.random.split(round_key)
        log_marginals = process.oracle.log_marginals(values, pinned)  # the round's one query
        drawn = jax.random.categorical(draw_key, log_marginals, axis=-1).astype(jnp.int32)
        if order == "random":
            chosen = (state.rank >= first) & (state.rank < first + count)
        else:
            confidence = jnp.take_along_axis(log_marginals, drawn[:, None], axis=-1)[:, 0]
            confidence = jnp.where(pinned, -jnp.inf, confidence)
            ties = jax.random.uniform(tie_key, (n,))
            best_first = jnp.lexsort((ties, -confidence))  # by confidence, ties at random
            place = jnp.zeros(n, jnp.int32).at[best_first].set(jnp.arange(n, dtype=jnp.int32))
            chosen = (place < count) & ~pinned
        return (jnp.where(chosen, drawn, values), pinned | chosen), None

    # the first round's query is the same constant for every draw: keep XLA from folding it
    # (a one-round schedule under vmap otherwise spends minutes in constant folding)
    values, pinned = jax.lax.optimization_barrier(
        (state.values, jnp.asarray(process.observed_mask))
    )
    round_keys = jax.random.split(k_run, counts.size)
    inputs = (round_keys, jnp.asarray(start, jnp.int32), jnp.asarray(counts))
    (values, _), _ = jax.lax.scan(one_round, (values, pinned), inputs)
    cost = jnp.asarray(counts.size, jnp.int32)
    return values, cost, cost


def maskgit_run(
    process: AnyOrderProcess,
    keys: Array,
    schedule: Sequence[int],
    order: Literal["confidence", "random"] = "confidence",
) -> Samples:
    """``len(keys)`` MaskGIT draws, as :class:`~numpyro_autospec.engine.Samples` (``rounds``:
    sequential oracle calls; ``queries``: oracle evaluations, one ``log_marginals`` per round;
    ``conditionals``: rows returned, :math:`n` per query).  Pure JAX (``jit``/``vmap``-able;
    ``process``, ``schedule`` and ``order`` are static).

    :param process: an :class:`~numpyro_autospec.processes.AnyOrderProcess`.
    :param keys: PRNG keys ``[D]`` (typed) or ``[D, 2]`` (raw).
    :param schedule: sites unmasked per round (:func:`cosine_schedule`,
        :func:`uniform_schedule`).
    :param order: ``"confidence"`` (MaskGIT) or ``"random"``.

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(64, beta=1.0), 64, 2)
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 3)
    >>> samples = maskgit_run(process, keys, cosine_schedule(64, 8))
    >>> samples.value.shape, samples.rounds.tolist(), samples.queries.tolist()
    ((3, 64), [8, 8, 8], [8, 8, 8])
    """
    keys = engine_keys(keys)
    value, rounds, queries = jax.vmap(lambda key: maskgit_draw(process, key, schedule, order))(keys)
    return Samples(value, rounds, queries, queries * process.num_positions)
