r"""``AutospecGibbs``: posterior inference with exact autospeculation draws as a Gibbs block.

Models: parameters :math:`\theta` (NUTS or HMC), oracle sites :math:`x`
(:class:`~numpyro_autospec.infer.AnyOrderAR`, maybe with observed entries) whose oracle depends
on :math:`\theta`, and data :math:`y`.  The target is

.. math:: p(\theta, x_{\text{free}} \mid x_{\text{obs}}, y) \propto
    p(\theta)\, \mu_\theta(x)\, p(y \mid \theta, x),

with :math:`\mu_\theta(x)` the oracle's *joint* law: the observed entries are data drawn from
:math:`\mu_\theta`, so ``AnyOrderAR.log_prob`` (the law *given* them) would miss
:math:`\mu_\theta(x_{\text{obs}})`.  Each step sweeps two blocks (as ``HMCGibbs``):

1. **The oracle block.**  Each oracle site gets an exact draw
   :math:`x' \sim \mu_\theta(\cdot \mid x_{\text{obs}})` by the autospeculation engine (Anari
   et al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869, 2025), an independence
   proposal for :math:`\pi(x) \propto \mu_\theta(x)\, r(x)`, :math:`r(x) = p(y \mid \theta, x)`,
   accepted with :math:`\alpha = \min(1, r(x') / r(x))`.  With ``num_proposals = K > 1``,
   :math:`x'_J` is picked among :math:`K` draws with probability :math:`\propto r(x'_J)`:

   .. math:: \alpha = \min\Big(1, \frac{\sum_{j} r(x'_j)}
       {\sum_{j \ne J} r(x'_j) + r(x)}\Big),

   the independent multiple-try Metropolis step (Liu, Liang and Wong, *JASA* 95, 2000).
2. **The parameter block.**  The inner NUTS/HMC kernel on :math:`\theta` with :math:`x` fixed,
   scoring the site by :meth:`~numpyro_autospec.infer.AnyOrderAR.joint_log_prob` (so only
   oracles with an exact joint ``log_prob``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array
from numpyro import handlers
from numpyro.infer.gibbs import GIBBS_SITES_KWARG, Gibbs, prototype_trace
from numpyro.infer.hmc import HMC
from numpyro.infer.hmc_gibbs import HMCGibbs, HMCGibbsState
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import identity, is_prng_key

from numpyro_autospec._core.failures import Failure, FailureReports, carrying_failures
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import Capacity
from numpyro_autospec.errors import ConfigError
from numpyro_autospec.infer._distributions import AnyOrderAR, _oracle_label
from numpyro_autospec.infer._drawing import Placeholders, engine_draw_site, run_with, strong
from numpyro_autospec.infer._inspection import UnsupportedModelError
from numpyro_autospec.infer._joint import joint_model, log_acceptance_ratio, multiple_try
from numpyro_autospec.infer._progress import announce_compilation

__all__ = ["AutospecBlock", "AutospecBlockState", "AutospecGibbs", "AutospecGibbsState"]


class AutospecBlockState(NamedTuple):
    """State of :class:`AutospecBlock`: site values ``z``, the last update's costs and mean
    ``accept_prob``, the next ``rng_key`` and the first ``failure``, as data."""

    z: dict
    rounds: Array
    queries: Array
    accept_prob: Array
    rng_key: Array
    failure: Failure


def _check_site(name: str, site) -> None:
    """Refuse, naming the site, an oracle block site that cannot be updated exactly."""
    if site is None or site["type"] != "sample":
        raise UnsupportedModelError(f"AutospecGibbs: site {name!r} is not a sample site")
    if site["is_observed"]:
        raise UnsupportedModelError(f"AutospecGibbs: site {name!r} is observed, not latent")
    fn = site["fn"]
    if not isinstance(fn, AnyOrderAR):
        raise UnsupportedModelError(
            f"AutospecGibbs: site {name!r} is a {type(fn).__name__}, not an AnyOrderAR site "
            "(the block draws AnyOrderAR sites, unwrapped and outside plates; give the "
            "other latent sites to the inner kernel)"
        )
    if tuple(site["kwargs"].get("sample_shape", ())) or site.get("cond_indep_stack"):
        raise UnsupportedModelError(
            f"AutospecGibbs: site {name!r} is in a plate or has a sample_shape; the block "
            "draws one vector per site (write one site per vector)"
        )
    if not fn.has_joint_log_prob:
        raise UnsupportedModelError(
            f"AutospecGibbs: site {name!r}: oracle {_oracle_label(fn.oracle)} has no exact "
            "joint log_prob, and the update of the parameters needs the site's joint density "
            "given them (exact for TableOracle, CurieWeissOracle and IsingChainOracle)"
        )


class AutospecBlock(MCMCKernel):
    """The oracle block of :class:`AutospecGibbs`: updates ``sites`` by ``num_proposals`` exact
    engine draws each, accepted by the ratio of the model's other terms."""

    sample_field = "z"

    def __init__(
        self,
        model: Callable,
        sites: Sequence[str],
        *,
        config: SamplerConfig | None = None,
        capacity: Capacity | None = None,
        num_proposals: int = 1,
    ):
        if isinstance(num_proposals, bool) or not isinstance(num_proposals, int):
            raise ConfigError(f"num_proposals must be an int, got {num_proposals!r}")
        if num_proposals < 1:
            raise ConfigError(f"num_proposals must be at least 1, got {num_proposals}")
        self._block_model = model
        self.sites = tuple(sites)
        self.num_proposals = num_proposals
        self._config = (config or SamplerConfig()).validate()
        self._capacity = capacity
        self._failure_reports = FailureReports()
        self._update = carrying_failures(self._update_sites)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """Check the block's sites and return the initial state at ``init_params``."""
        model_kwargs = dict(model_kwargs or {})
        conditioning = model_kwargs.pop(GIBBS_SITES_KWARG, {})
        model_trace = prototype_trace(
            handlers.condition(self._block_model, data=conditioning),
            rng_key,
            model_args,
            model_kwargs,
        )
        for name in self.sites:
            _check_site(name, model_trace.get(name))
        init_params = init_params or {}
        z = {name: strong(init_params.get(name, model_trace[name]["value"])) for name in self.sites}
        zero = jnp.zeros((), jnp.int32)
        failure = Failure.none(self._failure_reports)
        return AutospecBlockState(z, zero, zero, jnp.ones((), jnp.float32), rng_key, failure)

    def _update_sites(self, state: AutospecBlockState, model_args, model_kwargs):
        model_kwargs = dict(model_kwargs or {})
        values = {**model_kwargs.pop(GIBBS_SITES_KWARG, {}), **state.z}
        rng_key, *site_keys = jax.random.split(state.rng_key, len(self.sites) + 1)
        rounds = jnp.zeros((), jnp.int32)
        queries = jnp.zeros((), jnp.int32)
        accept_probs = []
        draw_site = engine_draw_site(self._config, self._capacity)
        for name, key in zip(self.sites, site_keys, strict=True):
            key_site, key_draw, key_accept = jax.random.split(key, 3)
            others = {k: v for k, v in values.items() if k != name}
            model = handlers.condition(self._block_model, data=others)
            placeholders = Placeholders()
            run_with(model, placeholders, key_site, model_args, model_kwargs)
            _, base, _ = placeholders.sites[name]
            proposal, site_rounds, site_queries = draw_site(
                name, base, key_draw, (self.num_proposals,)
            )
            proposal = strong(proposal)
            log_ratios = jnp.broadcast_to(
                log_acceptance_ratio(
                    self._block_model, model_args, model_kwargs, values, name, proposal, self.sites
                ),
                (self.num_proposals,),
            )
            accept, index, log_alpha = multiple_try(key_accept, log_ratios)
            values[name] = jnp.where(accept, proposal[index], values[name])
            accept_probs.append(jnp.exp(jnp.minimum(log_alpha, 0.0)))
            rounds = rounds + site_rounds
            queries = queries + site_queries
        z = {name: strong(values[name]) for name in self.sites}
        accept_prob = jnp.mean(jnp.stack(accept_probs)).astype(jnp.float32)
        return state._replace(
            z=z,
            rounds=strong(rounds),
            queries=strong(queries),
            accept_prob=accept_prob,
            rng_key=rng_key,
        )

    def sample(self, state: AutospecBlockState, model_args, model_kwargs) -> AutospecBlockState:
        """One update of every site of the block."""
        return self._update(state, model_args, model_kwargs)

    def refresh(self, state, model_args, model_kwargs):
        """Identity: nothing is cached."""
        return state

    def get_constrain_fn(self, model_args, model_kwargs):
        """Identity: the values are already constrained."""
        return identity

    def get_diagnostics_str(self, state: AutospecBlockState) -> str:
        return f"{int(state.rounds)} rounds, acc. {float(state.accept_prob):.2f}"

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_update"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._update = carrying_failures(self._update_sites)


class AutospecGibbsState(HMCGibbsState):
    """``HMCGibbsState`` with the oracle block's ``rounds``, ``queries`` and ``accept_prob``."""

    __slots__ = ()

    @property
    def rounds(self) -> Array:
        return self.block_states[0].rounds

    @property
    def queries(self) -> Array:
        return self.block_states[0].queries

    @property
    def accept_prob(self) -> Array:
        return self.block_states[0].accept_prob


class AutospecGibbs(HMCGibbs):
    r"""Posterior inference: exact autospeculation draws of oracle sites in HMC-within-Gibbs.

    Each step updates the ``gibbs_sites`` by exact engine draws accepted with the likelihood
    ratio, then the other latent sites by ``inner_kernel``, which scores the oracle sites by
    their *joint* density (derivation: :mod:`numpyro_autospec.infer._gibbs`).

    :param inner_kernel: :class:`~numpyro.infer.NUTS` or :class:`~numpyro.infer.HMC` on the
        model; it updates every latent site that is not a Gibbs site.
    :param gibbs_sites: the ``AnyOrderAR`` sites (exact joint ``log_prob``) drawn by the engine.
    :param method: ``"autospec"`` (default), ``"sequential"``, ``"assd"`` or ``"block"``, the
        engine's method (:class:`~numpyro_autospec.AutospecKernel`).
    :param config: :class:`~numpyro_autospec.config.SamplerConfig`; ``capacity`` the engine's
        :class:`~numpyro_autospec.engine.Capacity`.
    :param num_proposals: ``K``, engine draws per update of a site, in one pool: ``K > 1``
        (multiple-try) raises the acceptance at ``K`` times the evaluations.

    Collected by default: ``z``, ``rounds``, ``queries`` and ``accept_prob``.  ``MCMC.run``
    raises :class:`~numpyro_autospec.errors.UnsupportedModelError`, naming the site, for a site
    that is not an ``AnyOrderAR`` or an oracle without an exact joint.

    >>> import jax, numpy as np, numpyro, numpyro.distributions as dist
    >>> from numpyro.infer import MCMC, NUTS
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> def model():  # four spins observed up, four free
    ...     beta = numpyro.sample("beta", dist.Uniform(0.0, 2.0))
    ...     numpyro.sample("x", AnyOrderAR(CurieWeissOracle(8, beta=beta), 8, 2,
    ...                    observed=np.ones(8, np.int32), observed_mask=np.arange(8) < 4))
    >>> kernel = AutospecGibbs(NUTS(model), gibbs_sites=["x"], method="sequential")
    >>> mcmc = MCMC(kernel, num_warmup=10, num_samples=5, progress_bar=False)
    >>> mcmc.run(jax.random.PRNGKey(0))
    >>> mcmc.get_samples()["x"].shape, mcmc.get_extra_fields()["rounds"].tolist()
    ((5, 8), [4, 4, 4, 4, 4])
    >>> mcmc.get_extra_fields()["accept_prob"].tolist()  # no data depend on x
    [1.0, 1.0, 1.0, 1.0, 1.0]
    """

    _state_cls = AutospecGibbsState

    def __init__(
        self,
        inner_kernel: HMC,
        gibbs_sites: Sequence[str],
        *,
        method: str | None = None,
        config: SamplerConfig | None = None,
        capacity: Capacity | None = None,
        num_proposals: int = 1,
    ):
        if not isinstance(inner_kernel, HMC):
            raise TypeError(
                f"inner_kernel must be numpyro's HMC or NUTS, got {type(inner_kernel).__name__}"
            )
        if inner_kernel.model is None:
            raise TypeError("inner_kernel must be built on a model, not a potential function")
        if isinstance(gibbs_sites, str) or not gibbs_sites:
            raise TypeError(f"gibbs_sites must be a non-empty list of names, got {gibbs_sites!r}")
        config = config or SamplerConfig()
        if method is not None:  # checked with the rest of the config
            config = config._replace(method=method)
        sites = tuple(gibbs_sites)
        block = AutospecBlock(
            inner_kernel.model, sites, config=config, capacity=capacity, num_proposals=num_proposals
        )
        inner = inner_kernel.wrap_model(lambda model: joint_model(model, sites))
        Gibbs.__init__(self, [(block, sites), (inner, None)])
        self.inner_kernel = self._kernels[1]
        self._gibbs_fn = None
        self._gibbs_sites = sites
        self._user_model = inner_kernel.model

    @property
    def default_fields(self) -> tuple[str, ...]:
        return ("z", "rounds", "queries", "accept_prob")

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        """``Gibbs.init``; a batch of keys gives a batch of states."""
        if is_prng_key(rng_key):
            return Gibbs.init(self, rng_key, num_warmup, init_params, model_args, model_kwargs)

        def init_one(key, params):
            return Gibbs.init(self, key, num_warmup, params, model_args, model_kwargs)

        states = jax.vmap(init_one)(rng_key, init_params)
        self._sample_fn = jax.vmap(self._sample_one, in_axes=(0, None, None))
        return states

    def sample(self, state, model_args, model_kwargs):
        if isinstance(state.rng_key, jax.core.Tracer):  # traced: a compilation follows
            announce_compilation("the autospeculation Gibbs sampler")
        return super().sample(state, model_args, model_kwargs)

    def get_diagnostics_str(self, state) -> str:
        block, hmc = self._kernels
        return f"{block.get_diagnostics_str(state.block_states[0])} | " + hmc.get_diagnostics_str(
            state.block_states[1]
        )
