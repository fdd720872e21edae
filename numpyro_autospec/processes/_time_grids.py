r"""Time grids of the diffusion process (:mod:`numpyro_autospec.processes._diffusion`):
:math:`0 = t_0 < t_1 < \dots < t_N`, float32.

* :func:`uniform_times`: :math:`t_k = k\,t_{\max}/N`;
* :func:`default_times`: uniform in :math:`\log(1 + \sigma^2 t)`, for bounded targets.

Reference: Anari et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869 (2025).
"""

from __future__ import annotations

import math

import numpy as np

from numpyro_autospec.denoisers._validation import check_time_grid
from numpyro_autospec.errors import TimeGridError, positive_integer

__all__ = ["DEFAULT_DATA_VARIANCE", "DEFAULT_T_MAX", "default_times", "uniform_times"]

#: End time of :func:`default_times` for data in :math:`[0, 1]^d`.
DEFAULT_T_MAX = 1000.0
#: :math:`\sigma^2` of :func:`default_times`: the largest variance on :math:`[0, 1]`.
DEFAULT_DATA_VARIANCE = 0.25


def uniform_times(num_steps: int, t_max: float) -> np.ndarray:
    """The uniform grid :math:`t_k = k\\,t_{\\max}/N`, float32 ``[N + 1]``.

    Example
    -------
    >>> uniform_times(4, 2.0).tolist()
    [0.0, 0.5, 1.0, 1.5, 2.0]
    """
    num_steps = _check_num_steps(num_steps)
    t_max = _check_t_max(t_max)
    return check_time_grid(np.linspace(0.0, t_max, num_steps + 1))


def default_times(
    num_steps: int,
    t_max: float = DEFAULT_T_MAX,
    *,
    data_variance: float = DEFAULT_DATA_VARIANCE,
) -> np.ndarray:
    r"""A grid for targets with bounded support: uniform in :math:`s = \log(1 + \sigma^2 t)`,

    .. math::

        t_k = \frac{\exp\!\big(\tfrac{k}{N}\log(1 + \sigma^2 t_{\max})\big) - 1}{\sigma^2},
        \qquad k = 0, \dots, N,

    with :math:`\sigma^2` = ``data_variance``: about :math:`1/\sigma^2`-uniform while
    :math:`t \lesssim 1/\sigma^2`, geometric (:math:`h_k \propto t_k`) after.

    **Why.**  Freezing the drift over a stretch :math:`h` costs
    :math:`\mathrm{KL} \approx \tfrac14\,h^2\,\mathbb{E}\operatorname{tr}\Sigma_t^2`, with
    :math:`\Sigma_t = \operatorname{Cov}(Y \mid y_t) = \nabla_y f`.  For a Gaussian proxy,
    :math:`\Sigma_t = \sigma^2/(1 + \sigma^2 t)\,I`, the cost is equal along the grid when
    :math:`h(t) \propto 1/\sigma^2 + t`, i.e. uniform in :math:`\log(1 + \sigma^2 t)`: the chain
    costs :math:`\approx d\,\log(1 + \sigma^2 t_{\max})^2 / (4N)` against
    :math:`d\,\sigma^2 t_{\max}/N` for the uniform grid.  :math:`\sigma^2 = 1/4` bounds the
    variance of a :math:`[0, 1]`-valued coordinate (Popoviciu).

    **End time.**  A point cloud's output is within :math:`\varepsilon` of a data point once
    :math:`t\,\delta_{\min}^2/2 \gtrsim \log(M/\varepsilon)`: :math:`t \approx 300` for the
    digits in :math:`[0, 1]^{64}` (:func:`~numpyro_autospec.denoisers.digits_point_cloud`),
    hence :math:`t_{\max} = 1000`.

    **Numerical check** (2000 sequential draws of the digits, :math:`N = 64`; see
    ``tests/processes/test_diffusion.py``): 77%, 99.7% and 100% of draws within
    :math:`10^{-3}` of an image at :math:`t_{\max} = 30, 100, 1000`; the uniform grid collapses
    onto 496 distinct images at :math:`t_{\max} = 1000` (1206 expected).

    Example
    -------
    >>> times = default_times(8, 100.0)
    >>> float(times[0]), float(times[-1])
    (0.0, 100.0)
    >>> bool(np.all(np.diff(times) > 0)) and bool(np.diff(times)[-1] > np.diff(times)[0])
    True
    """
    num_steps = _check_num_steps(num_steps)
    t_max = _check_t_max(t_max)
    if not (data_variance > 0 and math.isfinite(data_variance)):
        raise TimeGridError(f"data_variance must be positive and finite, got {data_variance}")
    span = math.log1p(data_variance * t_max)
    grid = np.expm1(np.linspace(0.0, span, num_steps + 1)) / data_variance
    grid[0], grid[-1] = 0.0, t_max
    return check_time_grid(grid)


def _check_num_steps(num_steps) -> int:
    return positive_integer(num_steps, "num_steps", TimeGridError)


def _check_t_max(t_max) -> float:
    t_max = float(t_max)
    if not (t_max > 0 and math.isfinite(t_max)):
        raise TimeGridError(f"t_max must be positive and finite, got {t_max}")
    return t_max
