r"""The sequential sampler (docs/algorithm.md, section 1), as one compiled loop: step
:math:`k = 0, \dots, N-1` queries the oracle on the prefix and draws from the target
conditional, one round and one query per step.  Key for key the draws are the reference's
(``SamplerConfig(method="sequential")``): ``k_init, k_run = split(key)``,
``x = process.init(k_init)``, step ``k`` uses ``fold_in(fold_in(k_run, 0), k)``, and processes
with ``final_query`` (diffusion) query once more after the last step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array

from numpyro_autospec.engine import Samples
from numpyro_autospec.engine._failure import carried_failure
from numpyro_autospec.engine._keys import engine_keys

__all__ = ["sequential_run", "sequential_draw"]


def sequential_draw(process, key: Array, validate: bool = False):
    """One draw from one key: ``(value, rounds, queries)``, ``rounds = queries = N`` (plus a
    final query where needed), and with ``validate`` the first defect ``(code, row, step)``
    (code 0: none)."""
    num_steps = int(process.num_steps)
    k_init, k_run = jax.random.split(key)
    block_key = jax.random.fold_in(k_run, 0)  # the reference's root block 0
    x = process.init(k_init)
    no_defect = jnp.zeros(3, jnp.int32)

    def checked(defect, x, k, answer):
        if not validate:
            return defect
        code, row = process.answer_defect(x, k, answer)
        found = jnp.stack([code, row, k]).astype(jnp.int32)
        return jnp.where((defect[0] == 0) & (code != 0), found, defect)

    def step(k, carry):
        x, defect = carry
        answer = process.query(x, k, 1)
        defect = checked(defect, x, k, answer)
        reduced = process.reduce(x, k, answer)
        return process.target_sample(jax.random.fold_in(block_key, k), x, k, reduced), defect

    x, defect = jax.lax.fori_loop(0, num_steps, step, (x, no_defect))
    final = None
    if process.final_query:
        final = process.query(x, num_steps, 1)
        defect = checked(defect, x, jnp.asarray(num_steps, jnp.int32), final)
    cost = jnp.asarray(num_steps + int(bool(process.final_query)), jnp.int32)
    if validate:
        return process.output(x, final), cost, cost, defect
    return process.output(x, final), cost, cost


def sequential_run(process, keys: Array, *, validate: bool = True) -> Samples:
    r"""Draw ``len(keys)`` samples from ``process`` with the sequential sampler.

    :func:`numpyro_autospec.engine.run` with ``SamplerConfig(method="sequential")``: draw ``i``
    equals ``reference.sample(process, keys[i], config).value`` with that config.  Pure JAX
    (``jit``/``vmap``-able; ``process`` is static); ``validate`` checks every answer and raises
    the same :class:`~numpyro_autospec.errors.OracleError` as ``run``.

    :param process: a :class:`~numpyro_autospec.processes.Process`.
    :param keys: PRNG keys of shape ``[D]`` (typed) or ``[D, 2]`` (raw ``uint32``).
    :param validate: check every oracle answer.
    :returns: :class:`~numpyro_autospec.engine.Samples` with leading axis ``D``.

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(8, beta=1.0), 8, 2)
    >>> samples = sequential_run(process, jax.random.split(jax.random.PRNGKey(0), 3))
    >>> samples.value.shape, samples.rounds.tolist()
    ((3, 8), [8, 8, 8])
    """
    keys = engine_keys(keys)
    if not validate:
        value, rounds, queries = jax.vmap(lambda key: sequential_draw(process, key))(keys)
        return Samples(value, rounds, queries)
    value, rounds, queries, defects = jax.vmap(
        lambda key: sequential_draw(process, key, validate=True)
    )(keys)
    draw = jnp.argmax(defects[:, 0] != 0).astype(jnp.int32)  # the first defective draw
    defect = jnp.concatenate([defects[draw], draw[None]])  # (code, row, step, draw)
    failure = carried_failure(process, defect, jnp.asarray(False))
    if failure is not None:
        failure.check()
    return Samples(value, rounds, queries, failure=failure)
