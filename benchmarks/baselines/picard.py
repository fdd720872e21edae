r"""ParaDiGMS-style Picard iteration of the Euler-Maruyama chain of stochastic localization.

Shih et al., *Parallel Sampling of Diffusion Models* (NeurIPS 2023) solve the sampling chain
by fixed-point (Picard) iteration over a sliding window of :math:`p` steps.  For the chain of
:class:`~numpyro_autospec.processes.DiffusionProcess` (docs/algorithm.md, section 2b),

.. math::

    y_{k+1} = y_k + h_k f(t_k, y_k) + \sqrt{h_k}\,\xi_k ,

with the window :math:`[a, a+p)` and the path :math:`y^{(i)}` of iteration :math:`i`, one
iteration evaluates the denoiser at the :math:`p` points of the window **in one batched
round** and replaces them by

.. math::

    y^{(i+1)}_{k+1} = y_a + \sum_{j=a}^{k} \big(h_j f(t_j, y^{(i)}_j) + \sqrt{h_j}\,\xi_j\big),
    \qquad a \le k < a + p .

Step :math:`k` has converged when :math:`\lVert y^{(i+1)}_{k+1} - y^{(i)}_{k+1} \rVert^2 / d
\le \text{tol}^2\,h_k` (the change per coordinate, relative to the step's noise variance
:math:`h_k`).  The window then slides past the leading converged steps and one more (whose
inputs had all converged), at least one step per iteration; new points start at the last
value of the window.  The noise :math:`\xi_k` is that of the sequential sampler
(:mod:`numpyro_autospec.engine._sequential`: step :math:`k` draws
``normal(fold_in(fold_in(k_run, 0), k), (d,))``), so the two are coupled draw for draw: at
``tolerance = 0`` a step is accepted only once it is a fixed point in floating point and the
output equals the sequential Euler chain's up to float rounding (the sums are taken in a
different order); a positive tolerance trades rounds for a bias that :func:`picard_run` against
:func:`~numpyro_autospec.engine.sequential_run` with the same keys measures directly.

Costs: ``rounds`` = iterations + 1 (the final denoising :math:`f(t_N, y_N)`), ``queries`` =
denoiser evaluations (the window's steps that lie before :math:`N`, per iteration, plus one).
Autospeculation (Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869) is
exact at every setting; Picard iteration is exact only in the limit ``tolerance -> 0``, where
it needs as many rounds as the chain's fixed point takes to propagate.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from numpyro_autospec.engine import Samples
from numpyro_autospec.engine._keys import engine_keys
from numpyro_autospec.errors import ConfigError, InputError, positive_integer
from numpyro_autospec.processes import DiffusionProcess

__all__ = ["picard_draw", "picard_run"]


class _Iteration(NamedTuple):
    """Carry of the Picard loop of one draw."""

    path: Array  # [N + 1 + p, d]: y_0..y_N, then p rows of padding
    start: Array  # int32: a, the first step of the window
    iterations: Array  # int32
    queries: Array  # int32


def _check(process, window_size, tolerance) -> int:
    if not isinstance(process, DiffusionProcess):
        raise InputError(f"Picard iteration needs a DiffusionProcess, got {type(process).__name__}")
    window_size = positive_integer(window_size, "window_size", ConfigError)
    if not isinstance(tolerance, jax.core.Tracer) and not (
        np.ndim(tolerance) == 0 and float(tolerance) >= 0
    ):
        raise ConfigError(f"tolerance must be a scalar >= 0 (inf allowed), got {tolerance!r}")
    return min(window_size, process.num_steps)


def picard_draw(
    process: DiffusionProcess, key: Array, window_size: int, tolerance
) -> tuple[Array, Array, Array]:
    """One Picard draw: ``(value, rounds, queries)``.

    :param process: a :class:`~numpyro_autospec.processes.DiffusionProcess`.
    :param key: one PRNG key (split as the sequential sampler splits it).
    :param window_size: :math:`p`, the steps evaluated per round (static; at most :math:`N`).
    :param tolerance: tol :math:`\\ge 0` (may be traced; ``inf`` accepts every window's first
        guess).

    Example: at tolerance 0 the draw is the Euler chain's, in fewer rounds than its steps.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> from numpyro_autospec.processes import DiffusionProcess
    >>> from numpyro_autospec.processes import default_times
    >>> from numpyro_autospec.engine._sequential import sequential_draw
    >>> process = DiffusionProcess(PointCloudDenoiser(jnp.eye(2)), 2, default_times(16, 100.0))
    >>> key = jax.random.PRNGKey(0)
    >>> value, rounds, queries = picard_draw(process, key, window_size=8, tolerance=0.0)
    >>> euler = sequential_draw(process, key)
    >>> bool(jnp.allclose(value, euler[0], atol=1e-4)), int(rounds) <= 17
    (True, True)
    """
    window = _check(process, window_size, tolerance)
    num_steps, dim = process.num_steps, process.dim
    k_init, k_run = jax.random.split(key)
    block_key = jax.random.fold_in(k_run, 0)  # the sequential sampler's root block
    noise = jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(block_key, k), (dim,)))(
        jnp.arange(num_steps)
    )
    step_sizes = jnp.concatenate([process.step_sizes, jnp.ones(window, jnp.float32)])
    noise_steps = jnp.concatenate(
        [jnp.sqrt(process.step_sizes)[:, None] * noise, jnp.zeros((window, dim), jnp.float32)]
    )
    times = jnp.concatenate([process.times, jnp.full(window, process.times[-1])])
    path = process.init(k_init).path
    path = jnp.concatenate([path, jnp.zeros((window, dim), path.dtype)])
    offsets = jnp.arange(window)
    rows = jnp.arange(path.shape[0])
    tolerance = jnp.asarray(tolerance, jnp.float32)

    def iterate(carry: _Iteration) -> _Iteration:
        start = carry.start
        steps = start + offsets
        valid = steps < num_steps
        points = jax.lax.dynamic_slice_in_dim(carry.path, start, window)
        drifts = jax.vmap(process.denoiser)(times[steps], points)  # one round, p queries
        increments = step_sizes[steps][:, None] * drifts + noise_steps[steps]
        increments = jnp.where(valid[:, None], increments, 0.0)
        new = carry.path[start][None, :] + jnp.cumsum(increments, axis=0)
        old = jax.lax.dynamic_slice_in_dim(carry.path, start + 1, window)
        error = jnp.mean((new - old) ** 2, axis=-1) / step_sizes[steps]
        converged = (error <= tolerance**2) | ~valid
        leading = jnp.where(jnp.all(converged), window, jnp.argmin(converged))
        num_valid = jnp.sum(valid.astype(jnp.int32))
        stride = jnp.minimum(leading + 1, num_valid)
        path = jax.lax.dynamic_update_slice_in_dim(carry.path, new, start + 1, axis=0)
        path = jnp.where((rows > start + window)[:, None], new[-1][None, :], path)
        return _Iteration(path, start + stride, carry.iterations + 1, carry.queries + num_valid)

    zero = jnp.zeros((), jnp.int32)
    done = jax.lax.while_loop(
        lambda carry: carry.start < num_steps, iterate, _Iteration(path, zero, zero, zero)
    )
    final = process.query(process.init(k_init)._replace(path=done.path[: num_steps + 1]), num_steps)
    value = process.output(None, final)
    return value, done.iterations + 1, done.queries + 1


def picard_run(
    process: DiffusionProcess, keys: Array, window_size: int = 64, tolerance=1e-3
) -> Samples:
    """``len(keys)`` Picard draws as :class:`~numpyro_autospec.engine.Samples` (``rounds``,
    ``queries`` as in the module docstring).  Draw ``i`` is coupled with
    ``sequential_run(process, keys)`` draw ``i`` (same noise).  Pure JAX (``jit``/``vmap``-able;
    ``process`` and ``window_size`` are static).

    :param process: a :class:`~numpyro_autospec.processes.DiffusionProcess`.
    :param keys: PRNG keys ``[D]`` (typed) or ``[D, 2]`` (raw).
    :param window_size: steps per round :math:`p`.
    :param tolerance: the convergence tolerance (module docstring); 0: the Euler chain.

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> from numpyro_autospec.processes import DiffusionProcess
    >>> from numpyro_autospec.processes import default_times
    >>> from numpyro_autospec.engine import sequential_run
    >>> denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    >>> process = DiffusionProcess(denoiser, 2, default_times(64, 200.0))
    >>> keys = jax.random.split(jax.random.PRNGKey(0), 4)
    >>> exact = picard_run(process, keys, window_size=16, tolerance=0.0)
    >>> euler = sequential_run(process, keys)
    >>> bool(jnp.allclose(exact.value, euler.value, atol=1e-4)), bool(jnp.all(exact.rounds < 65))
    (True, True)
    """
    keys = engine_keys(keys)
    value, rounds, queries = jax.vmap(
        lambda key: picard_draw(process, key, window_size, tolerance)
    )(keys)
    return Samples(value, rounds, queries, queries)
