r"""``AutospecGibbs``: posterior inference with exact autospeculation draws as a Gibbs block.

The models: continuous parameters :math:`\theta` (updated by NUTS or HMC), one or more oracle
sites :math:`x` (:class:`~numpyro_autospec.infer.AnyOrderAR`) whose oracle
depends on :math:`\theta`, possibly with observed entries (``observed``, ``observed_mask``),
and data :math:`y` that depend on :math:`\theta` and, optionally, on :math:`x`.  The target
is the posterior of :math:`\theta` and of the free entries of :math:`x`,

.. math:: p(\theta, x_{\text{free}} \mid x_{\text{obs}}, y) \propto
    p(\theta)\, \mu_\theta(x)\, p(y \mid \theta, x),

where :math:`\mu_\theta(x)` is the oracle's *joint* law of the whole vector: **the observed
entries of an oracle site are data drawn from** :math:`\mu_\theta` (the marginal
:math:`\mu_\theta(x_{\text{obs}})` carries the information they hold about :math:`\theta`).
This is not the density that ``AnyOrderAR(..., observed_mask=...).log_prob`` gives, which is
the law *given* the observed entries, :math:`\mu_\theta(x_{\text{free}} \mid
x_{\text{obs}})`: a plain ``HMCGibbs`` whose potential used it would miss the factor
:math:`\mu_\theta(x_{\text{obs}})` and sample the wrong posterior of :math:`\theta`.

Each MCMC step is a sweep of two blocks (NumPyro's :class:`~numpyro.infer.HMCGibbs`):

1. **The oracle block.**  For each oracle site, one exact draw
   :math:`x' \sim \mu_\theta(\cdot \mid x_{\text{obs}})` by the autospeculation engine
   (:func:`numpyro_autospec.engine.run`: recursive speculative rejection sampling, Anari et
   al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869, 2025; docs/algorithm.md),
   in :math:`\tilde O(\sqrt n)` rounds of oracle calls instead of :math:`n`.  It is an
   independence proposal for the site's conditional
   :math:`\pi(x) \propto \mu_\theta(x)\, r(x)` with :math:`r(x) = p(y \mid \theta, x)`
   (in general every model term but the site's own law), accepted with probability

   .. math:: \alpha = \min\Big(1, \frac{r(x')}{r(x)}\Big)

   (exact Metropolis-within-Gibbs).  Where :math:`y` does not depend on :math:`x` the ratio
   is 1: the update is an exact independent draw from the conditional.  With
   ``num_proposals = K > 1`` the block draws :math:`x'_1, \dots, x'_K` in one engine pool
   (they share its rounds), picks :math:`x'_J` with probability :math:`\propto r(x'_J)` and
   accepts it with

   .. math:: \alpha = \min\Big(1, \frac{\sum_{j} r(x'_j)}
       {\sum_{j \ne J} r(x'_j) + r(x)}\Big),

   the independent multiple-try Metropolis step (Liu, Liang and Wong, *JASA* 95, 2000;
   Martino, *Digital Signal Processing* 75, 2018), exact for every :math:`K`: informative
   data :math:`y` lower :math:`\alpha` and more proposals raise it, at :math:`K` times the
   oracle evaluations and about the same rounds.
2. **The parameter block.**  The inner NUTS/HMC kernel on :math:`\theta` with :math:`x` fixed,
   whose potential uses the joint :math:`\log \mu_\theta(x)`
   (:meth:`~numpyro_autospec.infer.AnyOrderAR.joint_log_prob`).  It needs an
   oracle with an exact joint ``log_prob``: ``TableOracle``, ``CurieWeissOracle`` and
   ``IsingChainOracle`` qualify; any other oracle (a plain function, ``PerturbedOracle``,
   ``HopfieldOracle``, a learned network) is refused with an
   :class:`~numpyro_autospec.errors.UnsupportedModelError` naming the site.

Both blocks leave the target invariant, so the sweep does.  The costs of the oracle block are
in the state: ``rounds`` and ``queries`` of its engine draws and ``accept_prob``, the mean
acceptance probability of its proposals (``extra_fields``, and ``arviz.from_numpyro``'s
``sample_stats``).
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
from numpyro_autospec.infer._joint import (
    joint_model,
    log_acceptance_ratio,
    multiple_try,
)
from numpyro_autospec.infer._progress import announce_compilation

__all__ = [
    "AutospecBlock",
    "AutospecBlockState",
    "AutospecGibbs",
    "AutospecGibbsState",
]


# -- the oracle block -------------------------------------------------------------------------
class AutospecBlockState(NamedTuple):
    """State of :class:`AutospecBlock`.

    :ivar z: ``{site: value}``, the current values of the block's oracle sites.
    :ivar rounds: int32, rounds of oracle calls of the last update's engine draws (summed over
        the block's sites).
    :ivar queries: int32, oracle evaluations of the last update's draws.
    :ivar accept_prob: float32, the mean over the block's sites of the last update's
        acceptance probability :math:`\\min(1, r(x') / r(x))` (1 where the data do not depend
        on the site).
    :ivar rng_key: PRNG key of the next update.
    :ivar failure: :class:`~numpyro_autospec._core.failures.Failure`, the first failure of the
        engine draws so far, as data.

    >>> import jax, jax.numpy as jnp
    >>> AutospecBlockState._fields
    ('z', 'rounds', 'queries', 'accept_prob', 'rng_key', 'failure')
    """

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
    """The oracle block of :class:`AutospecGibbs`: each site's update is one exact engine draw
    from its law given the observed entries and the current parameters, accepted by the
    ratio of the model's other terms (module docstring; ``_joint.log_acceptance_ratio``).  A
    block of :class:`~numpyro.infer.Gibbs` that reads the other sites' values from the
    conditioning keyword (it holds its model privately, unconditioned).

    :param model: the NumPyro model.
    :param sites: the ``AnyOrderAR`` sites the block updates, in order.
    :param config: :class:`~numpyro_autospec.config.SamplerConfig` of the engine.
    :param capacity: :class:`~numpyro_autospec.engine.Capacity` of the engine.
    :param num_proposals: proposals per update, drawn in one engine pool (multiple-try
        Metropolis, module docstring).

    >>> import numpyro, numpyro.distributions as dist
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> def model():
    ...     beta = numpyro.sample("beta", dist.Uniform(0.0, 2.0))
    ...     numpyro.sample("x", AnyOrderAR(CurieWeissOracle(8, beta=beta), 8, 2))
    >>> AutospecBlock(model, ["x"]).sites
    ('x',)
    """

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
        """Check the block's sites (refusing, naming the site, what cannot be updated
        exactly) and return the initial state at ``init_params`` (the values
        :class:`~numpyro.infer.Gibbs` hands its blocks)."""
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
            # the site's law at the current parameters, then its proposals in one pool
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
        """One update of every site of the block (module docstring)."""
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


# -- the kernel -------------------------------------------------------------------------------
class AutospecGibbsState(HMCGibbsState):
    """:class:`~numpyro.infer.hmc_gibbs.HMCGibbsState` of :class:`AutospecGibbs`, with the
    oracle block's costs as fields to collect: ``rounds``, ``queries`` and ``accept_prob``
    (:class:`AutospecBlockState`), besides ``hmc_state``.

    >>> AutospecGibbsState._fields
    ('z', 'block_states', 'rng_key')
    """

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
    r"""Posterior inference for models with oracle sites: exact autospeculation draws of the
    oracle sites within NUTS/HMC-within-Gibbs.

    See the module docstring for the models, the target (the observed entries of an oracle
    site are data: the parameter update scores the site by its *joint* density) and the two
    blocks.  Each step updates the ``gibbs_sites`` (``AnyOrderAR`` sites with an exact joint
    ``log_prob``) by exact engine draws accepted with the likelihood ratio, then every other
    latent site by ``inner_kernel``.

    :param inner_kernel: :class:`~numpyro.infer.NUTS` or :class:`~numpyro.infer.HMC` on the
        model; it updates every latent site that is not a Gibbs site.
    :param gibbs_sites: the ``AnyOrderAR`` sites drawn by the engine.
    :param method: ``"autospec"`` (default), ``"sequential"``, ``"assd"`` or ``"block"``, the
        engine's method (:class:`~numpyro_autospec.AutospecKernel`).
    :param config: :class:`~numpyro_autospec.config.SamplerConfig` (none of its knobs changes
        the law).
    :param capacity: :class:`~numpyro_autospec.engine.Capacity` of the engine.
    :param num_proposals: ``K``, the engine draws per update of a site: ``K = 1`` (default) is
        an independence Metropolis step, ``K > 1`` the independent multiple-try step (module
        docstring), whose acceptance rises with ``K`` where the data inform the site; the
        ``K`` draws share one pool, so its rounds barely grow and its evaluations are ``K``
        times those of one draw.

    Collected by default: ``z``, ``rounds``, ``queries`` and ``accept_prob`` of the oracle
    block (``mcmc.get_extra_fields()``, and ``sample_stats`` of ``arviz.from_numpyro``).
    ``chain_method`` ``"sequential"``, ``"parallel"`` and ``"vectorized"`` all work.  Errors of
    the model (a site that is not an ``AnyOrderAR``, an oracle without exact joint) are
    :class:`~numpyro_autospec.errors.UnsupportedModelError` naming the site, raised
    by ``MCMC.run``.

    >>> import jax, numpy as np, numpyro, numpyro.distributions as dist
    >>> from numpyro.infer import MCMC, NUTS
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> n, mask = 8, np.arange(8) < 4  # four spins observed up, four free
    >>> def model():
    ...     beta = numpyro.sample("beta", dist.Uniform(0.0, 2.0))
    ...     oracle = CurieWeissOracle(n, beta=beta)
    ...     numpyro.sample("x", AnyOrderAR(oracle, n, 2, observed=np.ones(n, np.int32),
    ...                                    observed_mask=mask))
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
            inner_kernel.model,
            sites,
            config=config,
            capacity=capacity,
            num_proposals=num_proposals,
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
        """:class:`~numpyro.infer.Gibbs`'s ``init``; a batch of keys
        (``chain_method="vectorized"``) gives a batch of states (the sweep is vmapped)."""
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
