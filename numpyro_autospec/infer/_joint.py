r"""The target of ``AutospecGibbs`` and its oracle block's acceptance step (derivation in
:mod:`numpyro_autospec.infer._gibbs`; Anari et al., arXiv:2511.07869)."""

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
    r"""Score the ``AnyOrderAR`` sites ``sites`` by their joint :math:`\log \mu_\theta(x)`
    (``joint_log_prob``) instead of their law given the observed entries; the site ``excluded``
    is scored 0.  Inside it, a model's log density is the target of ``AutospecGibbs``."""

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
    """``model`` under :class:`JointDensities`: the model of the parameter block."""
    return _JointModel(model, tuple(sites))


class _JointModel:
    """``model`` under :class:`JointDensities` (a class: equal wrappings compare equal and
    pickle)."""

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
    r"""``float[K]``, :math:`\log r(x') - \log r(x)` for each row :math:`x'` of ``proposal``
    at :math:`x` = ``values[site]``, :math:`r` being the model's density without the site's own
    law (the other ``sites`` by their joint), e.g. :math:`p(y \mid \theta, x)`."""
    scored = JointDensities(model, sites, excluded=site)

    def log_rest(value):
        return log_density(scored, model_args, model_kwargs, {**values, site: value})[0]

    return jax.vmap(log_rest)(proposal) - log_rest(values[site])


def multiple_try(key: Array, log_ratios: Array) -> tuple[Array, Array, Array]:
    r"""Independent multiple-try Metropolis given ``log_ratios[j]`` :math:`= \log r(x'_j) -
    \log r(x)` (NaN counts as :math:`-\infty`): ``(accept, J, log_alpha)``, proposal ``J``
    drawn with probability :math:`\propto r(x'_J)`."""
    log_ratios = jnp.where(jnp.isnan(log_ratios), -jnp.inf, log_ratios)
    key_pick, key_accept = jax.random.split(key)
    log_total = jax.nn.logsumexp(log_ratios)
    finite = jnp.isfinite(log_total)
    index = jnp.where(finite, jax.random.categorical(key_pick, log_ratios), 0)
    log_reference = jax.nn.logsumexp(log_ratios.at[index].set(0.0))
    log_alpha = jnp.where(finite, log_total - log_reference, -jnp.inf)
    accept = jnp.log(jax.random.uniform(key_accept)) < log_alpha
    return accept, index, log_alpha
