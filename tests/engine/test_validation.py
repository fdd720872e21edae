"""Oracle answers are validated inside the compiled engine: the run stops at the first defect
and the error names the site, the row and the step; ``validate=False`` skips the checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec.engine import run
from numpyro_autospec.oracles import CurieWeissOracle, TableOracle
from numpyro_autospec.processes import AnyOrderProcess

N = 12
CW = CurieWeissOracle(N, beta=1.0)
KEYS = jax.random.split(jax.random.PRNGKey(0), 3)


def broken(defect):
    """Curie-Weiss whose answers get ``defect`` in row 3 once 5 sites are pinned."""

    def oracle(x, mask):
        out = CW(x, mask)
        return jnp.where(jnp.sum(mask) >= 5, defect(out), out)

    return oracle


@pytest.mark.parametrize(
    "defect, message",
    [
        (lambda out: out.at[3].set(jnp.nan), "broken.<locals>.oracle returned NaN in row 3"),
        (lambda out: out.at[3, 0].set(jnp.inf), "broken.<locals>.oracle returned \\+inf in row 3"),
        (
            lambda out: out.at[3].add(0.5),
            "broken.<locals>.oracle returned row 3 that is not normalized",
        ),
    ],
    ids=["nan", "posinf", "unnormalized"],
)
def test_defective_answers_raise_an_error_naming_site_row_and_step(defect, message):
    process = AnyOrderProcess(broken(defect), N, 2, name="spins")
    with pytest.raises(Exception, match=f"site 'spins': .*{message}.*query at step"):
        jax.block_until_ready(jax.jit(lambda k: run(process, k))(KEYS))


def test_validation_can_be_switched_off():
    process = AnyOrderProcess(broken(lambda out: out.at[3].add(0.5)), N, 2, name="spins")
    samples = jax.jit(lambda k: run(process, k, validate=False))(KEYS)
    assert samples.value.shape == (3, N)


def test_minus_infinity_is_a_legal_log_probability():
    """A table with impossible configurations: rows with -inf entries pass validation."""
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(2**4)).reshape((2,) * 4)
    probs[0, 0, :, :] = 0.0  # x0 = x1 = 0 is impossible
    with np.errstate(divide="ignore"):  # log 0 = -inf is the point
        oracle = TableOracle(np.log(probs / probs.sum()))
    samples = run(AnyOrderProcess(oracle, 4, 2), jax.random.split(jax.random.PRNGKey(1), 50))
    values = np.asarray(samples.value)
    assert not ((values[:, 0] == 0) & (values[:, 1] == 0)).any()
