"""``MCMC(AutospecKernel(model)).run`` raises the project's own exception (an
:class:`~numpyro_autospec.errors.OracleError` naming the site and the user's function) when an
oracle breaks in the middle of the run, with and without progress bar: the kernel carries the
failure in its state (:class:`numpyro_autospec._core.failures.Failure`) instead of aborting
NumPyro's
compiled loop."""

import jax
import jax.numpy as jnp
import numpyro
import pytest
from numpyro.infer import MCMC

from numpyro_autospec.errors import OracleError
from numpyro_autospec.infer import AnyOrderAR, AutospecKernel
from numpyro_autospec.oracles import CurieWeissOracle

N = 12
CURIE_WEISS = CurieWeissOracle(N, beta=1.0)
MESSAGE = r"site 'spins': spin_oracle returned NaN in row 3 \(query at step \d+\)"


def spin_oracle(x, mask):
    """Curie-Weiss, with NaN in row 3 once site 0 is pinned to 1 among 6 to 8 pinned sites
    (never on the probes of ``AutospecKernel.init``)."""
    answer = CURIE_WEISS(x, mask)
    pinned = jnp.sum(mask)
    broken = (pinned >= 6) & (pinned <= 8) & mask[0] & (x[0] == 1)
    return jnp.where(broken, answer.at[3].set(jnp.nan), answer)


def model():
    numpyro.sample("spins", AnyOrderAR(spin_oracle, N, 2))


@pytest.mark.parametrize("progress_bar", [True, False], ids=["progress_bar", "no_progress_bar"])
def test_mcmc_raises_oracle_error_naming_site_and_function(progress_bar):
    mcmc = MCMC(AutospecKernel(model), num_warmup=0, num_samples=10, progress_bar=progress_bar)
    with pytest.raises(OracleError, match=MESSAGE):
        mcmc.run(jax.random.PRNGKey(0))


def test_vectorized_chains_raise_oracle_error():
    mcmc = MCMC(
        AutospecKernel(model),
        num_warmup=0,
        num_samples=5,
        num_chains=2,
        chain_method="vectorized",
        progress_bar=False,
    )
    with pytest.raises(OracleError, match=MESSAGE):
        mcmc.run(jax.random.PRNGKey(0))


def test_a_healthy_run_carries_no_failure():
    def healthy():
        numpyro.sample("spins", AnyOrderAR(CURIE_WEISS, N, 2))

    mcmc = MCMC(AutospecKernel(healthy), num_warmup=0, num_samples=3, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0))
    assert not bool(mcmc.last_state.failure.failed)
    assert mcmc.get_samples()["spins"].shape == (3, N)


def test_the_kernels_step_has_no_host_callback():
    """The kernel carries failures as data, not through a callback, so that JAX's persistent
    compilation cache (which refuses programs with host callbacks) can keep its program."""
    kernel = AutospecKernel(model)
    state = kernel.init(jax.random.PRNGKey(0), 0, model_args=(), model_kwargs={})
    text = jax.jit(lambda state: kernel.sample(state, (), {})).lower(state).as_text()
    assert "callback" not in text
