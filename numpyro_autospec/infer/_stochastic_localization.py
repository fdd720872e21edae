r"""The NumPyro distribution of a diffusion's output: :class:`StochasticLocalization`, an
:class:`~numpyro_autospec.infer.OracleDistribution` whose oracle is a denoiser
(docs/algorithm.md, section 2b).  :class:`~numpyro_autospec.infer.AutospecKernel`
draws its sites with the autospeculation engine (Anari et al., *Parallel Sampling via
Autospeculation*, arXiv:2511.07869, 2025).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array
from numpyro.distributions import constraints

from numpyro_autospec.errors import positive_integer
from numpyro_autospec.infer._distributions import OracleDistribution, parameters_probe

__all__ = ["StochasticLocalization"]


class StochasticLocalization(OracleDistribution):
    r"""The law of the denoised output of stochastic localization on a time grid.

    Given a denoiser :math:`f(t, y) = \mathbb{E}[Y \mid tY + W_t = y]` and a grid
    :math:`0 = t_0 < \dots < t_N`, a draw runs the Euler-Maruyama chain
    :math:`y_{k+1} = y_k + h_k f(t_k, y_k) + \sqrt{h_k}\,\xi_k` from :math:`y_0 = 0` and returns
    :math:`f(t_N, y_N)` (docs/algorithm.md, section 2b;
    :class:`~numpyro_autospec.processes.DiffusionProcess`).  As the grid refines and
    :math:`t_N \to \infty` this law tends to the law of :math:`Y`; autospeculation samples the
    chain on the given grid exactly.

    ``log_prob`` raises :class:`NotImplementedError`: the output is the image of a Gaussian
    path under the nonlinear denoiser, a law without a tractable density (for a finite point
    cloud it is not even absolutely continuous in the limit).

    :param denoiser: JAX-traceable ``(t: float32[], y: float32[d]) -> float32[d]``.
    :param dim: :math:`d`.
    :param times: strictly increasing grid starting at 0; only its length is static (the
        values may be traced: a model argument under ``jit``, or computed in the model).
    :param speculation_variance: ``None`` (default) for the paper's speculation, which
        freezes the drift over a block; a variance :math:`s^2 > 0` (may be traced) for the
        *linear-response* speculation, exact for :math:`Y \sim \mathcal N(\mu, s^2 I)` and
        far fewer rounds when the target is a mixture of components of about that variance;
        ``"posterior"`` for the response of the posterior covariance itself, read from the
        denoiser's Jacobian at each block's start (exact for any Gaussian; no variance to
        know; each query costs the Jacobian and its eigendecomposition)
        (:class:`~numpyro_autospec.processes.DiffusionProcess`,
        docs/diffusion.md).  It changes the rounds, never the law.
    :param posterior_rank: with ``"posterior"`` only: ``None`` (default) for the whole
        Jacobian, an integer :math:`r < d` for a rank-:math:`r` estimate of the posterior
        covariance and an isotropic rest (:math:`3r` forward-mode passes per query instead of
        :math:`d`), for denoisers of large :math:`d`.
    :param validate_args: NumPyro's flag.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> from numpyro_autospec.processes._time_grids import uniform_times
    >>> points = jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> denoiser = PointCloudDenoiser(points)
    >>> d = StochasticLocalization(denoiser, dim=2, times=uniform_times(32, 100.0))
    >>> d.sample(jax.random.PRNGKey(0), (4,)).shape
    (4, 2)
    """

    pytree_data_fields = ("times", "denoiser", "speculation_variance")
    pytree_oracle_fields = ("denoiser",)
    pytree_aux_fields = ("denoiser", "dim", "posterior_response", "posterior_rank")

    def __init__(
        self,
        denoiser,
        dim: int,
        times,
        speculation_variance=None,
        posterior_rank=None,
        validate_args=None,
    ):
        from numpyro_autospec.denoisers._validation import check_denoiser_signature, check_time_grid
        from numpyro_autospec.processes._linear_response import check_speculation_variance
        from numpyro_autospec.processes._posterior_covariance import (
            check_posterior_rank,
            is_posterior,
        )

        d = positive_integer(dim, "dim")
        self.times = check_time_grid(times)
        check_denoiser_signature(denoiser, d)
        self.denoiser = denoiser
        self.dim = d
        #: ``speculation_variance="posterior"`` and its rank (static: they change the answers'
        #: shape)
        self.posterior_response = is_posterior(speculation_variance)
        self.posterior_rank = check_posterior_rank(posterior_rank, speculation_variance, d)
        self.speculation_variance = (
            None
            if speculation_variance is None or self.posterior_response
            else check_speculation_variance(speculation_variance)
        )
        super().__init__(batch_shape=(), event_shape=(d,), validate_args=validate_args)

    support = constraints.real_vector

    def make_process(self, name: str):
        """The :class:`~numpyro_autospec.processes.DiffusionProcess` on the grid."""
        from numpyro_autospec.processes._diffusion import POSTERIOR, DiffusionProcess

        return DiffusionProcess(
            self.denoiser,
            self.dim,
            self.times,
            name=name,
            speculation_variance=(
                POSTERIOR if self.posterior_response else self.speculation_variance
            ),
            posterior_rank=self.posterior_rank,
        )

    def validate_oracle(self, name: str) -> None:
        from numpyro_autospec.denoisers._validation import validate_denoiser

        validate_denoiser(self.denoiser, self.dim, self.times, name=f"denoiser of site {name!r}")

    def dependency_probe(self) -> Array:
        t_max = jnp.asarray(self.times[-1], jnp.float32)
        probe = parameters_probe(
            self.denoiser, lambda: jnp.sum(self.denoiser(t_max, jnp.zeros(self.dim)))
        )
        return probe + 0.0 * jnp.sum(self.times)

    def log_prob(self, value: Array) -> Array:
        raise NotImplementedError(
            "StochasticLocalization.log_prob: the law of the denoised output has no tractable "
            "density (sampling does not need it; score data with an ELBO of the diffusion model)"
        )
