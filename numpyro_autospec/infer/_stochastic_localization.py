r"""A diffusion's output as a NumPyro distribution whose oracle is a denoiser (Anari et al.,
*Parallel Sampling via Autospeculation*, arXiv:2511.07869, 2025; docs/algorithm.md, section 2b)."""

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
    :math:`f(t_N, y_N)` (:class:`~numpyro_autospec.processes.DiffusionProcess`), which tends to
    the law of :math:`Y` as the grid refines and :math:`t_N \to \infty`.  ``log_prob`` raises
    :class:`NotImplementedError` (no tractable density).

    :param denoiser: JAX-traceable ``(t: float32[], y: float32[d]) -> float32[d]``.
    :param dim: :math:`d`.
    :param times: strictly increasing grid starting at 0; only its length is static (the
        values may be traced).
    :param speculation_variance: ``None`` (default): the paper's speculation (drift frozen
        over a block); a variance :math:`s^2 > 0`: *linear-response* speculation, exact for
        :math:`Y \sim \mathcal N(\mu, s^2 I)`; ``"posterior"``: the response of the posterior
        covariance from the denoiser's Jacobian (docs/diffusion.md).  Never changes the law.
    :param posterior_rank: with ``"posterior"``: ``None`` (default) for the whole Jacobian, or
        :math:`r < d` for a rank-:math:`r` estimate (:math:`3r` passes per query, not :math:`d`).
    :param validate_args: NumPyro's flag.

    >>> import jax, jax.numpy as jnp
    >>> from numpyro_autospec.denoisers import PointCloudDenoiser
    >>> from numpyro_autospec.processes._time_grids import uniform_times
    >>> denoiser = PointCloudDenoiser(jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
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
        #: ``speculation_variance="posterior"`` and its rank (static: they change shapes)
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
