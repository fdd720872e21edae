"""``AutospecGibbs``: the chains' posterior against the enumerated posterior, and wrong block
updates rejected by the same tests.

The model: Curie-Weiss spins, ``n = 12``, the first six observed up, the coupling
``beta ~ Uniform(0, 2.5)``, and noisy observations ``y`` (all down) of the six free spins, each
flipped with probability ``eps``.  Two cases, run by one compiled program (``eps`` is a traced
model argument):

* ``independent``, ``eps = 0.5``: ``y`` does not depend on the spins; the block update is an
  exact independent draw (acceptance exactly 1), and the observed spins inform ``beta`` only
  through their marginal ``mu_beta(x_obs)``;
* ``noisy``, ``eps = 0.3``: the draws are accepted with the likelihood ratio, three proposals
  an update (the multiple-try step, ``num_proposals=3``).

The exact posterior is enumerated: the 64 configurations of the free spins times a midpoint grid of
4000 values of ``beta``. Statistics: the posterior means of ``beta`` and of the free spins' count,
and the 0.25 and 0.75 quantiles of ``beta``; ``z`` = (chain estimate - exact) / MCSE
(``arviz.mcse`` over 2 chains x 2500 draws, the first 50 of each dropped). Threshold ``|z| < 4.5``
for the right kernel (four statistics in two cases: a false alarm has probability about 5e-5 under
normal errors, within the suite's 1e-4; the noisy case mixes slowly, ESS of ``beta`` about 10% of
the draws, hence 2500) and ``max |z| > 8`` for each wrong update. The wrong updates run through the
same kernel with one piece broken: the parameter block scoring the spins by their law *given* the
observed entries (``AnyOrderAR.log_prob``: the marginal of the observed spins is lost; run on the
independent case, where it is the only error), the block update accepting every draw (the
likelihood ratio skipped; on the noisy case), and the picked proposal accepted with its own ratio
instead of the multiple-try ratio of the weight sums (on the noisy case). They use the sequential
engine (the same law, a cheaper program to compile). Fixed seeds; NUTS without warmup (a fixed step
size), so each kernel is one compiled program. Power: a bias of 6.8 MCSE in one statistic is caught
at power 0.99 (4.5 + 2.33); each wrong update must reach 8.
"""

import itertools
import math

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, NUTS

from numpyro_autospec import AutospecError
from numpyro_autospec.errors import ConfigError, UnsupportedModelError
from numpyro_autospec.infer import AnyOrderAR, AutospecGibbs
from numpyro_autospec.infer import _gibbs as gibbs_module
from numpyro_autospec.oracles import CurieWeissOracle, HopfieldOracle

N, FREE, BETA_MAX = 12, 6, 2.5
MASK = np.arange(N) < N - FREE
OBSERVED = np.ones(N, np.int32)
Y = np.zeros(FREE, np.int32)  # every free spin seen down
NUM_CHAINS, NUM_SAMPLES, BURN_IN = 2, 2500, 50
Z_RIGHT, Z_WRONG = 4.5, 8.0
#: proposals per block update: the multiple-try step, whose K = 1 case is the plain
#: independence Metropolis step
NUM_PROPOSALS = 3


CASES = {"independent": 0.5, "noisy": 0.3}  # flip probability of y; at 0.5 y says nothing


def model(observed, y, eps):
    beta = numpyro.sample("beta", dist.Uniform(0.0, BETA_MAX))
    oracle = CurieWeissOracle(N, beta=beta)
    spins = numpyro.sample("spins", AnyOrderAR(oracle, N, 2, observed=observed, observed_mask=MASK))
    probs = jnp.where(spins[N - FREE :] == 1, 1 - eps, eps)
    numpyro.sample("y", dist.Bernoulli(probs=probs).to_event(1), obs=y)


def enumerated_posterior(eps: float, grid: int = 4000) -> dict:
    """Exact posterior statistics: free configurations x a midpoint grid of beta."""
    betas = (np.arange(grid) + 0.5) / grid * BETA_MAX
    ups = np.arange(N + 1)
    log_binomials = np.array(
        [math.lgamma(N + 1) - math.lgamma(k + 1) - math.lgamma(N - k + 1) for k in ups]
    )
    log_z = np.logaddexp.reduce(
        log_binomials + betas[:, None] / (2 * N) * (2 * ups - N) ** 2, axis=1
    )
    configurations = np.array(list(itertools.product([0, 1], repeat=FREE)))
    count = configurations.sum(1)
    magnetization = 2 * (int(OBSERVED[MASK].sum()) + count) - N
    log_mu = betas[:, None] / (2 * N) * magnetization[None] ** 2 - log_z[:, None]
    log_likelihood = np.where(configurations == Y, np.log1p(-eps), np.log(eps)).sum(1)
    log_weights = log_mu + log_likelihood
    weights = np.exp(log_weights - log_weights.max())
    weights /= weights.sum()
    beta_law, count_law = weights.sum(1), weights.sum(0)
    cdf = np.cumsum(beta_law)
    return {
        "beta mean": float(beta_law @ betas),
        "count mean": float(count_law @ count),
        "beta q25": float(np.interp(0.25, cdf, betas + 0.5 * BETA_MAX / grid)),
        "beta q75": float(np.interp(0.75, cdf, betas + 0.5 * BETA_MAX / grid)),
    }


def z_scores(samples: dict, eps: float) -> dict:
    """``(chain estimate - exact) / MCSE`` of the four statistics."""
    exact = enumerated_posterior(eps)
    beta = np.asarray(samples["beta"])[:, BURN_IN:]
    count = np.asarray(samples["spins"])[:, BURN_IN:, N - FREE :].sum(-1).astype(float)
    estimates = {
        "beta mean": (beta.mean(), az.mcse(beta, method="mean")),
        "count mean": (count.mean(), az.mcse(count, method="mean")),
        "beta q25": (np.quantile(beta, 0.25), az.mcse(beta, method="quantile", prob=0.25)),
        "beta q75": (np.quantile(beta, 0.75), az.mcse(beta, method="quantile", prob=0.75)),
    }
    return {k: float((value - exact[k]) / float(mcse)) for k, (value, mcse) in estimates.items()}


def run_cases(method: str, cases=tuple(CASES), chain_method: str = "vectorized") -> dict:
    """``{case: (z-scores, extra fields grouped by chain, samples, idata)}``, every case run
    by one compiled program (``eps`` is a traced model argument), with ``NUM_PROPOSALS``
    proposals per update."""
    kernel = AutospecGibbs(
        NUTS(model, step_size=0.7, adapt_step_size=False, adapt_mass_matrix=False),
        gibbs_sites=["spins"],
        method=method,
        num_proposals=NUM_PROPOSALS,
    )
    mcmc = MCMC(
        kernel,
        num_warmup=0,
        num_samples=NUM_SAMPLES,
        num_chains=NUM_CHAINS,
        chain_method=chain_method,
        progress_bar=False,
        jit_model_args=True,
    )
    results = {}
    for seed, case in enumerate(cases):
        mcmc.run(jax.random.PRNGKey(seed), OBSERVED, Y, CASES[case])
        samples = mcmc.get_samples(group_by_chain=True)
        results[case] = (
            z_scores(samples, CASES[case]),
            mcmc.get_extra_fields(group_by_chain=True),
            samples,
            az.from_numpyro(mcmc),
        )
    return results


@pytest.fixture(scope="module")
def right():
    return run_cases("autospec")


@pytest.fixture(scope="module")
def wrong_target():
    """The parameter block scores the spins by ``AnyOrderAR.log_prob`` (their law given the
    observed entries) instead of their joint."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gibbs_module, "joint_model", lambda model, sites: model)
        return run_cases("sequential", ("independent",))


@pytest.fixture(scope="module")
def no_ratio():
    """The block update accepts every engine draw (the likelihood ratio skipped); its chains
    run one after another (``chain_method="sequential"``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gibbs_module, "log_acceptance_ratio", lambda *args: jnp.zeros(()))
        return run_cases("sequential", ("noisy",), chain_method="sequential")


def own_ratio_only(key, log_ratios):
    """A wrong multiple-try rule: the proposal picked by its likelihood is accepted with its own
    ratio ``r(x'_J) / r(x)`` (a Metropolis test that ignores the selection among K)."""
    key_pick, key_accept = jax.random.split(key)
    index = jax.random.categorical(key_pick, log_ratios)
    log_alpha = jnp.minimum(log_ratios[index], 0.0)
    return jnp.log(jax.random.uniform(key_accept)) < log_alpha, index, log_alpha


@pytest.fixture(scope="module")
def wrong_multiple_try():
    """The block update with :func:`own_ratio_only` instead of the multiple-try step."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gibbs_module, "multiple_try", own_ratio_only)
        return run_cases("sequential", ("noisy",), chain_method="sequential")


@pytest.mark.parametrize("case", CASES)
def test_posterior_matches_enumeration(right, case):
    z, extra, _, _ = right[case]
    assert max(abs(v) for v in z.values()) < Z_RIGHT, z
    assert np.all(extra["rounds"] >= 1) and np.all(extra["queries"] >= extra["rounds"])
    assert np.mean(extra["rounds"]) < FREE  # fewer rounds than the sequential sampler's
    if case == "independent":  # y does not depend on the spins: every draw accepted
        assert np.all(extra["accept_prob"] == 1.0)
    else:
        assert 0.1 < np.mean(extra["accept_prob"]) < 0.9


def test_joint_of_the_observed_entries_is_needed(wrong_target):
    z = wrong_target["independent"][0]
    assert max(abs(v) for v in z.values()) > Z_WRONG, z


def test_likelihood_ratio_is_needed(no_ratio):
    z, extra, samples, _ = no_ratio["noisy"]
    assert max(abs(v) for v in z.values()) > Z_WRONG, z
    assert np.all(extra["accept_prob"] == 1.0)
    assert np.all(extra["rounds"] == FREE)  # the sequential engine: one round per free spin


def test_multiple_try_acceptance_is_needed(wrong_multiple_try):
    z = wrong_multiple_try["noisy"][0]
    assert max(abs(v) for v in z.values()) > Z_WRONG, z


def test_arviz_and_observed_entries(right, no_ratio):
    _, extra, samples, idata = right["noisy"]
    stats = idata.sample_stats
    for field, stat in (("rounds",) * 2, ("queries",) * 2, ("accept_prob", "acceptance_rate")):
        assert stats[stat].shape == (NUM_CHAINS, NUM_SAMPLES)
        np.testing.assert_array_equal(stats[stat].values, np.asarray(extra[field]))
    assert set(idata.posterior.data_vars) >= {"beta", "spins"}
    for run in (samples, no_ratio["noisy"][2]):  # observed entries in place, chains distinct
        spins = np.asarray(run["spins"])
        assert np.all(spins[..., MASK] == 1)
        assert not np.array_equal(spins[0], spins[1])


def _oracle_model(oracle):
    def model():
        beta = numpyro.sample("beta", dist.Uniform(0.0, 1.0))
        numpyro.sample(
            "pixels",
            AnyOrderAR(
                oracle(beta), 4, 2, observed=np.ones(4, np.int32), observed_mask=np.arange(4) < 2
            ),
        )

    return model


@pytest.mark.parametrize(
    "oracle, label",
    [
        (lambda beta: HopfieldOracle(np.ones((1, 4)), beta=beta), "HopfieldOracle"),
        (lambda beta: lambda x, mask: jnp.full((4, 2), -jnp.log(2.0)) + 0 * beta, "<lambda>"),
    ],
)
def test_oracle_without_joint_is_refused(oracle, label):
    kernel = AutospecGibbs(NUTS(_oracle_model(oracle)), gibbs_sites=["pixels"])
    mcmc = MCMC(kernel, num_warmup=0, num_samples=1, progress_bar=False)
    with pytest.raises(
        UnsupportedModelError, match=rf"site 'pixels': oracle {label}\S* has no exact joint"
    ):
        mcmc.run(jax.random.PRNGKey(0))


def test_site_that_is_not_an_oracle_site_is_refused():
    def model():
        beta = numpyro.sample("beta", dist.Uniform(0.0, 1.0))
        numpyro.sample("coin", dist.Bernoulli(beta))

    mcmc = MCMC(
        AutospecGibbs(NUTS(model), gibbs_sites=["coin"]),
        num_warmup=0,
        num_samples=1,
        progress_bar=False,
    )
    with pytest.raises(AutospecError, match="site 'coin' is a BernoulliProbs, not an AnyOrderAR"):
        mcmc.run(jax.random.PRNGKey(0))


@pytest.mark.parametrize("num_proposals", [0, 1.5, True])
def test_bad_number_of_proposals_is_refused(num_proposals):
    with pytest.raises(ConfigError, match="num_proposals must be"):
        AutospecGibbs(NUTS(model), gibbs_sites=["spins"], num_proposals=num_proposals)
