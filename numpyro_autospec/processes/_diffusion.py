r"""Denoising diffusion (stochastic localization) as a process (docs/algorithm.md, section 2b).

The oracle is a denoiser :math:`f(t, y) = \mathbb{E}[Y \mid tY + W_t = y]`
(:mod:`numpyro_autospec.denoisers`), :math:`W` a standard Brownian motion in
:math:`\mathbb{R}^d`.  The observation process :math:`y_t = tY + W_t` solves
:math:`dy_t = f(t, y_t)\,dt + dB_t` from :math:`y_0 = 0`, and :math:`f(t, y_t) \to Y` as
:math:`t \to \infty`.  On a grid :math:`0 = t_0 < t_1 < \dots < t_N`, with
:math:`h_k = t_{k+1} - t_k`, the process is its Euler-Maruyama chain

.. math::

    y_{k+1} = y_k + h_k f(t_k, y_k) + \sqrt{h_k}\,\xi_k, \qquad \xi_k \sim \mathcal{N}(0, I_d),

and the sample is the denoised point :math:`f(t_N, y_N)`.  Step :math:`k` writes
:math:`y_{k+1}`; ``query(x, k)`` is the drift :math:`f(t_k, y_k)`.

* target: :math:`\mathcal{N}(y_{k+1};\, y_k + h_k f(t_k, y_k),\, h_k I)`;
* speculation for the block :math:`S = [a, a+m)`: the drift frozen at :math:`O_a = f(t_a, y_a)`,
  :math:`\nu_S = \prod_{k=a}^{a+m-1} \mathcal{N}(y_{k+1};\, y_k + h_k O_a,\, h_k I)`, a random
  walk drawn in one shot as a cumulative sum; optionally (``speculation_variance``) the
  *linear-response* speculation (:mod:`~numpyro_autospec.processes._linear_response`).

The output has exactly the law of the sequential chain on the same grid; fine grids are where
autospeculation pays.  Reference: Anari et al., *Parallel Sampling via Autospeculation*,
arXiv:2511.07869 (2025).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from numpyro_autospec._core.prefix_sums import prefix_sum
from numpyro_autospec.denoisers._validation import check_denoiser_signature, check_time_grid
from numpyro_autospec.errors import DenoiserError, InputError, describe_defect, nonfinite_defect
from numpyro_autospec.processes import _linear_response as linear_response
from numpyro_autospec.processes._linear_response import check_speculation_variance
from numpyro_autospec.processes._posterior_covariance import (
    POSTERIOR,
    check_posterior_rank,
    is_posterior,
    low_rank_covariance,
    probes,
    whole_covariance,
)

__all__ = [
    "POSTERIOR",
    "DiffusionProcess",
    "DiffusionState",
    "check_posterior_rank",
    "is_posterior",
]


class DiffusionState(NamedTuple):
    """State of one diffusion draw: ``path[k]`` is :math:`y_k` (once step :math:`k-1` is
    done), ``float32[N + 1, d]``, ``path[0] = 0``.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> from numpyro_autospec.processes._time_grids import uniform_times
    >>> process = DiffusionProcess(PointCloudDenoiser(jnp.eye(1)), 1, uniform_times(4, 1.0))
    >>> x = process.init(jax.random.PRNGKey(0))
    >>> x = process.target_sample(jax.random.PRNGKey(1), x, 0, process.query(x, 0))  # y_1
    >>> x.path.shape, bool(x.path[1, 0] != 0.0), x.path[2:, 0].tolist()
    ((5, 1), True, [0.0, 0.0, 0.0])
    """

    path: Array


class DiffusionProcess:
    r"""Stochastic localization with denoiser ``denoiser`` on the grid ``times``.

    :meth:`output` is the denoised point :math:`f(t_N, y_N)` (queried after the last step),
    :meth:`final_state` is :math:`y_N`; log-densities are normalized Gaussian ones.

    Parameters
    ----------
    denoiser:
        the oracle, a JAX-traceable ``(t: float32[], y: float32[d]) -> float32[d]`` returning
        :math:`\mathbb{E}[Y \mid tY + W_t = y]`.
    dim:
        the dimension :math:`d`.
    times:
        a strictly increasing grid :math:`0 = t_0 < \dots < t_N` (for example
        :func:`~numpyro_autospec.processes.default_times`); only its length is static.
    name:
        site name used in error messages.
    speculation_variance:
        ``None`` (default): the speculation freezes the drift at :math:`O_a` (the paper).  A
        variance :math:`s^2 > 0` (may be traced): the *linear-response* speculation, drift
        :math:`O_a + c_k z_k` at step :math:`k` with

        .. math::

            c_k = \frac{s^2}{1 + s^2 t_k}, \qquad z_k = y_k - y_a - (t_k - t_a) O_a,

        the exact drift of :math:`Y \sim \mathcal{N}(\mu, s^2 I)` (suits Gaussian mixtures,
        docs/diffusion.md section 5; keep ``None`` for a point cloud).  ``"posterior"``: the
        response of the posterior covariance :math:`\Sigma_a = \nabla_y f(t_a, y_a)`,
        :math:`C_k = \Sigma_a (I + (t_k - t_a) \Sigma_a)^{-1}`, read at each block's start
        (queries then return :math:`(f, \lambda, U)`, ``[d + d + d * d]``, for :math:`d`
        forward-mode passes).  Every choice keeps the law exact; it only changes the
        acceptance.
    posterior_rank:
        with ``"posterior"`` only: ``None`` (default) or :math:`r \ge d` reads the whole
        Jacobian; :math:`r < d` a rank-:math:`r` estimate with an isotropic rest
        (:math:`3r` forward-mode passes, answers :math:`(f, \lambda, \sigma^2, U)`,
        ``[d + r + 1 + d * r]``).

    Example
    -------
    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> from numpyro_autospec.processes._time_grids import default_times
    >>> from numpyro_autospec.reference import sample
    >>> denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    >>> process = DiffusionProcess(denoiser, 2, default_times(16, 200.0))
    >>> x = process.init(jax.random.PRNGKey(0))
    >>> x.path.shape, [round(float(v), 4) for v in process.query(x, 0)]  # f(0, 0) = E[Y]
    ((17, 2), [0.3333, 0.3333])
    >>> draw = sample(process, jax.random.PRNGKey(1))
    >>> bool(jnp.min(jnp.sum((denoiser.points - draw.value[None, :]) ** 2, axis=-1)) < 1e-6)
    True
    """

    final_query = True
    scores_blocks = False
    batched_queries = True
    bounded_speculation = True
    discrete_steps = False

    def __init__(
        self,
        denoiser: Callable[[Array, Array], Array],
        dim: int,
        times: ArrayLike,
        *,
        name: str = "y",
        speculation_variance: float | str | None = None,
        posterior_rank: int | None = None,
    ) -> None:
        check_denoiser_signature(denoiser, dim, name=f"denoiser of site {name!r}")
        grid = check_time_grid(times, site=name)
        self.denoiser = denoiser
        self.dim = int(dim)
        self.name = name
        self.num_steps = int(grid.shape[0]) - 1
        if isinstance(grid, np.ndarray):  # concrete: step sizes in float64 on the host
            step_sizes = np.diff(grid.astype(np.float64))
            sqrt_step_sizes, log_step_sizes = np.sqrt(step_sizes), np.log(step_sizes)
        else:  # traced (only the length is static): the same in the program
            step_sizes = jnp.diff(grid)
            sqrt_step_sizes, log_step_sizes = jnp.sqrt(step_sizes), jnp.log(step_sizes)
        self.times = jnp.asarray(grid, dtype=jnp.float32)
        self.step_sizes = jnp.asarray(step_sizes, dtype=jnp.float32)
        self._sqrt_step_sizes = jnp.asarray(sqrt_step_sizes, dtype=jnp.float32)
        # log normalizer of N(., ., h I) in d dimensions: -(d/2) log(2 pi h)
        self._log_normalizers = jnp.asarray(
            -0.5 * self.dim * (np.log(2.0 * np.pi) + log_step_sizes), dtype=jnp.float32
        )
        self.speculation_variance = speculation_variance
        self.posterior_response = is_posterior(speculation_variance)
        #: the rank of the posterior covariance's estimate (``None``: the whole Jacobian)
        self.posterior_rank = check_posterior_rank(
            posterior_rank, speculation_variance, self.dim, site=name
        )
        self._posterior_columns = self.dim if self.posterior_rank is None else self.posterior_rank
        if self.posterior_rank is not None:  # fixed: a query is a function of (t, y) alone
            self._probes = probes(self.dim, self.posterior_rank)
        if speculation_variance is not None and not self.posterior_response:
            variance = check_speculation_variance(speculation_variance, site=name)
            # c_k = s^2 / (1 + s^2 t_k) and L_k = sum_{i<k} log(1 + h_i c_i), k = 0..N
            self._responses, self._log_growths = linear_response.given_variance_tables(
                variance, self.times, self.step_sizes
            )

    def init(self, key: Array) -> DiffusionState:
        """:math:`y_0 = 0` (the key is not used)."""
        del key
        return DiffusionState(path=jnp.zeros((self.num_steps + 1, self.dim), jnp.float32))

    def final_state(self, x: DiffusionState) -> Array:
        """:math:`y_N`, shape ``[d]``."""
        return x.path[self.num_steps]

    @staticmethod
    def _in_block(a: Array, m: Array, steps: Array) -> Array:
        """Which of ``steps`` lie in the block ``[a, a + m)``."""
        return (steps >= a) & (steps < a + m)

    def _increment_log_density(self, increment, drift, step_size, log_normalizer) -> Array:
        """:math:`\\log \\mathcal{N}(\\Delta;\\, h\\,\\text{drift},\\, h I)`, per step."""
        residual = increment - step_size[..., None] * drift
        return log_normalizer - 0.5 * jnp.sum(residual**2, axis=-1) / step_size

    def _evaluate(self, t: Array, y: Array) -> Array:
        r"""The answer at :math:`(t, y)`: :math:`f(t, y)`, with ``"posterior"`` followed by the
        eigendecomposition of :math:`\nabla_y f(t, y)` (whole or low-rank)."""
        if not self.posterior_response:
            return self.denoiser(t, y)
        if self.posterior_rank is not None:
            return low_rank_covariance(self.denoiser, t, y, self._probes)
        return whole_covariance(self.denoiser, t, y)

    def query(self, x: DiffusionState, k: Array, num_rows: int = 1) -> Array:
        """The drift :math:`f(t_k, y_k)`, ``[d]`` (``"posterior"``: followed by the
        eigendecomposition); ``num_rows`` is not used."""
        del num_rows
        return self._evaluate(self.times[k], x.path[k])

    def reduce(self, x: DiffusionState, k: Array, answer: Array) -> Array:
        """The drift."""
        return answer[..., : self.dim]

    def query_batch(self, states: DiffusionState, slot: Array, k: Array) -> Array:
        """``query(states[slot[i]], k[i])`` for every ``i``, reading only :math:`y_k`."""
        return jax.vmap(self._evaluate)(self.times[k], states.path[slot, k])

    def score_batch(
        self, states: DiffusionState, slot: Array, k: Array, answers: Array
    ) -> tuple[Array, Array]:
        """``(reduce, target_logp)`` of step ``k[i]`` of ``states[slot[i]]`` for every ``i``."""
        drifts = answers[:, : self.dim]
        log_densities = jax.vmap(self.step_log_density)(
            k, states.path[slot, k], states.path[slot, k + 1], drifts
        )
        return drifts, log_densities

    def target_logp(self, x: DiffusionState, k: Array, reduced: Array) -> Array:
        """:math:`\\log \\mathcal{N}(y_{k+1};\\, y_k + h_k f(t_k, y_k),\\, h_k I)`."""
        return self.step_log_density(k, x.path[k], x.path[k + 1], reduced)

    def step_log_density(self, k: Array, y: Array, y_next: Array, drift: Array) -> Array:
        """:math:`\\log \\mathcal{N}(y_{k+1};\\, y_k + h_k f,\\, h_k I)`, the target of
        :meth:`target_logp` and :meth:`score_batch`."""
        return self._increment_log_density(
            y_next - y, drift, self.step_sizes[k], self._log_normalizers[k]
        )

    def target_sample(self, key: Array, x: DiffusionState, k: Array, reduced: Array):
        """One Euler-Maruyama step: :math:`y_{k+1} = y_k + h_k f + \\sqrt{h_k}\\,\\xi`."""
        noise = jax.random.normal(key, (self.dim,), jnp.float32)
        step = self.step_sizes[k] * reduced + self._sqrt_step_sizes[k] * noise
        return x._replace(path=x.path.at[k + 1].set(x.path[k] + step))

    def _window(self, a: Array, max_length: int | None) -> tuple[Array, Array]:
        """``(start, steps)``: the ``L = max_length`` (default ``N``) steps from
        ``start = min(a, N - L)``."""
        length = self.num_steps if max_length is None else int(max_length)
        if not 1 <= length <= self.num_steps:
            raise InputError(
                f"site {self.name!r}: max_length must be in [1, {self.num_steps}], got {length}"
            )
        start = jnp.clip(a, 0, self.num_steps - length)
        return start, start + jnp.arange(length)

    def _noise(self, key: Array, steps: Array) -> Array:
        """Standard normal noise of ``steps``, row ``k`` from ``fold_in(key, k)`` (window-free)."""
        return jax.vmap(
            lambda k: jax.random.normal(jax.random.fold_in(key, k), (self.dim,), jnp.float32)
        )(steps)

    def spec_sample(
        self,
        key: Array,
        x: DiffusionState,
        a: Array,
        m: Array,
        answer: Array,
        max_length: int | None = None,
    ):
        """Rows ``a+1 .. a+m`` of the path drawn from the speculation in one cumulative sum
        (frozen drift, or the linear response of
        :mod:`~numpyro_autospec.processes._linear_response`); ``max_length`` (static,
        ``>= m``) bounds the work without changing the draw."""
        start, steps = self._window(a, max_length)
        rows = jax.lax.dynamic_slice_in_dim(x.path, start + 1, steps.shape[0])
        in_block = self._in_block(a, m, steps)[:, None]
        noise = self._noise(key, steps)
        sqrt_step_sizes = self._sqrt_step_sizes[steps][:, None]
        if self.speculation_variance is None:
            increments = self.step_sizes[steps][:, None] * answer[None, :] + sqrt_step_sizes * noise
            walk = x.path[a][None, :] + prefix_sum(jnp.where(in_block, increments, 0.0), axis=0)
        else:
            deviation = linear_response.sample_deviation(
                self._response(a, answer, steps),
                noise,
                sqrt_step_sizes,
                in_block,
                with_rest=self.posterior_rank is not None,
            )
            elapsed = self.times[steps + 1] - self.times[a]
            walk = x.path[a][None, :] + elapsed[:, None] * answer[None, : self.dim] + deviation
        rows = jnp.where(in_block, walk, rows)
        return x._replace(path=jax.lax.dynamic_update_slice_in_dim(x.path, rows, start + 1, 0))

    def _response(self, a: Array, answer: Array, steps: Array) -> linear_response.Response:
        """The linear response of a block starting at ``a`` on the window ``steps``."""
        if not self.posterior_response:
            return linear_response.given_variance_response(
                self._responses, self._log_growths, a, steps
            )
        return linear_response.posterior_response(
            answer,
            self.dim,
            self._posterior_columns,
            self.posterior_rank is not None,
            self.times,
            self.step_sizes,
            a,
            steps,
        )

    def spec_logp(
        self,
        x: DiffusionState,
        a: Array,
        m: Array,
        answer: Array,
        max_length: int | None = None,
    ) -> Array:
        """:math:`\\sum_{k=a}^{a+m-1} \\log \\mathcal{N}(y_{k+1};\\, y_k + h_k b_k,\\, h_k I)`
        with :math:`b_k = O_a` (frozen) or :math:`O_a + C_k z_k` (linear response);
        ``max_length`` as in :meth:`spec_sample`."""
        start, steps = self._window(a, max_length)
        path = jax.lax.dynamic_slice_in_dim(x.path, start, steps.shape[0] + 1)
        drift = answer[None, : self.dim]
        if self.speculation_variance is not None:
            elapsed = self.times[steps] - self.times[a]
            deviation = path[:-1] - x.path[a][None, :] - elapsed[:, None] * drift
            drift = linear_response.response_drift(
                drift,
                self._response(a, answer, steps),
                deviation,
                with_rest=self.posterior_rank is not None,
            )
        log_densities = self._increment_log_density(
            path[1:] - path[:-1],
            drift,
            self.step_sizes[steps],
            self._log_normalizers[steps],
        )
        return jnp.sum(jnp.where(self._in_block(a, m, steps), log_densities, 0.0))

    def output(self, x: DiffusionState, final_answer: Array | None = None) -> Array:
        """The denoised point :math:`f(t_N, y_N)` (``final_answer``)."""
        if final_answer is None:
            raise InputError(f"site {self.name!r}: output needs final_answer = query(x, num_steps)")
        return final_answer[..., : self.dim]

    defect_error = DenoiserError

    def answer_defect(self, x: DiffusionState, k: Array, answer: Array) -> tuple[Array, Array]:
        """``(code, entry)`` of the first NaN or infinity of a denoiser answer (0: none)."""
        return nonfinite_defect(answer)

    def describe_defect(self, code: int, row: int, step: int) -> str:
        """Host side: the message for a defect found by :meth:`answer_defect`."""
        denoiser = getattr(self.denoiser, "__qualname__", type(self.denoiser).__name__)
        t = None
        if not isinstance(self.times, jax.core.Tracer):
            t = f"{float(self.times[min(int(step), self.num_steps)]):g}"
        message = describe_defect(code, name=f"denoiser {denoiser}", t=t)
        entry = f"entry {row}"
        if self.posterior_response and row >= self.dim:
            entry = f"entry {row}, of its Jacobian's eigendecomposition"
        return f"site {self.name!r}: {message} ({entry}, query at step {step})"

    def __repr__(self) -> str:
        traced = isinstance(self.times, jax.core.Tracer)
        t_max = "traced" if traced else f"{float(self.times[-1]):g}"
        return (
            f"DiffusionProcess(name={self.name!r}, dim={self.dim}, num_steps={self.num_steps}, "
            f"t_max={t_max})"
        )
