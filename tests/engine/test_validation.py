"""Oracle answers are validated inside the compiled engine: the run stops at the first defect
and the error names the site, the row and the step; ``validate=False`` skips the checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from numpyro_autospec._core.parameters import register_parameters
from numpyro_autospec.engine import run
from numpyro_autospec.errors import OracleError
from numpyro_autospec.oracles import CurieWeissOracle, TableOracle
from numpyro_autospec.processes import AnyOrderProcess
from tests.engine.programs import compiled_run

N = 12
CW = CurieWeissOracle(N, beta=1.0)
KEYS = jax.random.split(jax.random.PRNGKey(0), 3)


@register_parameters(data_fields=("offset",), static_fields=())
class Broken:
    """Curie-Weiss whose answers get ``offset`` (``[N, 2]``: a NaN, an infinity or a shift of
    row 3) added once 5 sites are pinned.  The offset is data: the defects share one compiled
    program."""

    def __init__(self, offset):
        self.offset = offset

    def __call__(self, x, mask):
        out = CW(x, mask)
        return jnp.where(jnp.sum(mask) >= 5, out + self.offset, out)


def broken(row_3):
    """:class:`Broken` with row 3 of its offset set to ``row_3``."""
    return Broken(jnp.zeros((N, 2)).at[3].set(jnp.asarray(row_3, jnp.float32)))


@pytest.mark.parametrize(
    "row_3, message",
    [
        ([np.nan, np.nan], "Broken returned NaN in row 3"),
        ([np.inf, 0.0], "Broken returned \\+inf in row 3"),
        ([0.5, 0.5], "Broken returned row 3 that is not normalized"),
    ],
    ids=["nan", "posinf", "unnormalized"],
)
def test_defective_answers_raise_an_error_naming_site_row_and_step(row_3, message):
    with pytest.raises(OracleError, match=f"site 'spins': .*{message}.*query at step"):
        jax.block_until_ready(compiled_run(N, 2, name="spins")(broken(row_3), KEYS))


def test_healthy_answers_pass_the_same_program():
    """The same compiled program with a zero offset: no error (the checks above fire on the
    defects, not on the program)."""
    samples = compiled_run(N, 2, name="spins")(broken([0.0, 0.0]), KEYS)
    assert samples.value.shape == (3, N)


def test_validation_can_be_switched_off():
    samples = compiled_run(N, 2, validate=False, name="spins")(broken([0.5, 0.5]), KEYS)
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
