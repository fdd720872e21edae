r"""The target of :class:`~numpyro_autospec.infer.AutospecGibbs` and its oracle block's
acceptance step.

The observed entries of an oracle site are data drawn from the oracle's joint law
:math:`\mu_\theta`, so the posterior's density scores the whole vector by
:math:`\log \mu_\theta(x)` (:class:`JointDensities`), not by the law given the observed
entries that ``AnyOrderAR(..., observed_mask=...).log_prob`` gives.  A proposal :math:`x'` of
the oracle block is an exact draw from :math:`\mu_\theta(\cdot \mid x_{\text{obs}})`, so its
Metropolis ratio keeps only the other terms of the model, :math:`r(x') / r(x)`
(:func:`log_acceptance_ratio`); :func:`multiple_try` is the independent multiple-try
Metropolis step over ``K`` such proposals (Liu, Liang and Wong, *JASA* 95, 2000).  The
derivation is in :mod:`numpyro_autospec.infer._gibbs`'s docstring (Anari et al., *Parallel
Sampling via Autospeculation*, arXiv:2511.07869).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jax import Array
from numpyro.distributions import Distribution
from numpyro.infer.util import log_density
from numpyro.primitives import Messenger

from numpyro_autospec.infer._distributions import AnyOrderAR

__all__ = ["JointDensities", "joint_model", "log_acceptance_ratio", "multiple_try"]


class _JointDensity(Distribution):
    """An ``AnyOrderAR`` site scored by its joint :math:`\\log \\mu(x)` (same support and
    sampler)."""

    pytree_data_fields = ("base",)

    def __init__(self, base: AnyOrderAR):
        self.base = base
        super().__init__(batch_shape=(), event_shape=base.event_shape)

    @property
    def support(self):
        return self.base.support

    def sample(self, key, sample_shape=()):
        return self.base.sample(key, sample_shape)

    def log_prob(self, value):
        return self.base.joint_log_prob(value)


class _NoDensity(_JointDensity):
    """A site left out of a log density (its term is the proposal's own law)."""

    def log_prob(self, value):
        return jnp.zeros(jnp.shape(value)[:-1])


class JointDensities(Messenger):
    r"""Score the oracle sites ``sites`` by their joint :math:`\log \mu_\theta(x)`, observed
    entries included (:meth:`~numpyro_autospec.infer.AnyOrderAR.joint_log_prob`),
    instead of their law given the observed entries; ``excluded`` is scored 0 (left out).

    Inside it, a model's log density is the target of :class:`AutospecGibbs`,
    :math:`\log p(\theta) + \log \mu_\theta(x) + \log p(y \mid \theta, x)`.

    :param fn: the model.
    :param sites: names of ``AnyOrderAR`` sites with an exact joint.
    :param excluded: a site of ``sites`` to leave out of the density, or ``None``.

    >>> import numpy as np, numpyro, numpyro.distributions as dist
    >>> from numpyro.infer.util import log_density
    >>> from numpyro_autospec.oracles import TableOracle
    >>> oracle = TableOracle(np.log([[0.4, 0.1], [0.2, 0.3]]))
    >>> def model():
    ...     numpyro.sample("x", AnyOrderAR(oracle, 2, 2, observed=np.array([1, 0]),
    ...                                    observed_mask=np.array([True, False])))
    >>> value = {"x": np.array([1, 1])}
    >>> given, _ = log_density(model, (), {}, value)  # mu(x_1 = 1 | x_0 = 1)
    >>> joint, _ = log_density(JointDensities(model, ["x"]), (), {}, value)  # mu(1, 1)
    >>> round(float(np.exp(given)), 3), round(float(np.exp(joint)), 3)
    (0.6, 0.3)
    """

    def __init__(self, fn=None, sites: Sequence[str] = (), excluded: str | None = None):
        self.sites = tuple(sites)
        self.excluded = excluded
        super().__init__(fn)

    def process_message(self, msg) -> None:
        if msg["type"] != "sample" or msg["name"] not in self.sites:
            return
        if isinstance(msg["fn"], AnyOrderAR):
            wrapper = _NoDensity if msg["name"] == self.excluded else _JointDensity
            msg["fn"] = wrapper(msg["fn"])


def joint_model(model: Callable, sites: Sequence[str]) -> Callable:
    """``model`` with the oracle sites ``sites`` scored by their joint (:class:`JointDensities`):
    the model of the parameter block."""
    return _JointModel(model, tuple(sites))


class _JointModel:
    """``model`` under :class:`JointDensities` (a class, so two wrappings of one model by the
    same sites compare equal and the kernel pickles)."""

    def __init__(self, model: Callable, sites: tuple[str, ...]):
        self.model, self.sites = model, sites

    def __call__(self, *args, **kwargs):
        with JointDensities(sites=self.sites):
            return self.model(*args, **kwargs)

    def __eq__(self, other) -> bool:
        return isinstance(other, _JointModel) and (other.model, other.sites) == (
            self.model,
            self.sites,
        )

    def __hash__(self) -> int:
        return hash((_JointModel, self.model, self.sites))


def log_acceptance_ratio(
    model: Callable,
    model_args: tuple,
    model_kwargs: dict,
    values: dict,
    site: str,
    proposal: Array,
    sites: Sequence[str],
) -> Array:
    r""":math:`\log r(x') - \log r(x)` for each proposal :math:`x'` of oracle site ``site``
    (the rows of ``proposal``, leading axis ``K``) at current value :math:`x` =
    ``values[site]``: :math:`r` is the model's density with the site's own law left out (every
    other oracle site of ``sites`` by its joint), e.g. :math:`p(y \mid \theta, x)`.  Exactly 0
    when no other term depends on the site.  Returns ``float[K]``.

    :param values: the current value of every latent site.
    :param proposal: ``[K, *event_shape]``, the proposals :math:`x'_1, \dots, x'_K`.
    :param sites: the oracle sites scored by their joint (:class:`JointDensities`).
    """
    scored = JointDensities(model, sites, excluded=site)

    def log_rest(value):
        return log_density(scored, model_args, model_kwargs, {**values, site: value})[0]

    return jax.vmap(log_rest)(proposal) - log_rest(values[site])


def multiple_try(key: Array, log_ratios: Array) -> tuple[Array, Array, Array]:
    r"""The independent multiple-try Metropolis step (module docstring) given
    ``log_ratios[j]`` :math:`= \log r(x'_j) - \log r(x)`: returns ``(accept, J, log_alpha)``,
    whether proposal ``J`` (drawn with probability :math:`\propto r(x'_J)`) replaces the
    current value, and :math:`\log \alpha`.  NaN ratios count as :math:`-\infty` (a proposal
    the model rules out); with ``K = 1`` it is the Metropolis-Hastings test of the ratio.

    >>> import jax, jax.numpy as jnp
    >>> accept, index, log_alpha = multiple_try(jax.random.PRNGKey(0), jnp.array([0.0]))
    >>> bool(accept), int(index), float(log_alpha)  # r(x') = r(x): always accepted
    (True, 0, 0.0)
    >>> _, _, log_alpha = multiple_try(jax.random.PRNGKey(0), jnp.log(jnp.array([0.5, 0.5])))
    >>> round(float(jnp.exp(log_alpha)), 4)  # (0.5 + 0.5) / (0.5 + 1)
    0.6667
    """
    log_ratios = jnp.where(jnp.isnan(log_ratios), -jnp.inf, log_ratios)
    key_pick, key_accept = jax.random.split(key)
    log_total = jax.nn.logsumexp(log_ratios)
    finite = jnp.isfinite(log_total)
    index = jnp.where(finite, jax.random.categorical(key_pick, log_ratios), 0)
    log_reference = jax.nn.logsumexp(log_ratios.at[index].set(0.0))
    log_alpha = jnp.where(finite, log_total - log_reference, -jnp.inf)
    accept = jnp.log(jax.random.uniform(key_accept)) < log_alpha
    return accept, index, log_alpha
