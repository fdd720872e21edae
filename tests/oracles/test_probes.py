"""The oracle probes of ``AutospecKernel.init`` (:mod:`numpyro_autospec.oracles._probes`): one
compilation per oracle structure and shapes, whatever the parameter values, and nothing kept
alive for an oracle that closes over data (``parameters.jit_over_parameters``).

Compilations are counted with JAX's backend-compile event (:mod:`jax.monitoring`); the
``compiled_once`` checks can fail: the first probe of a structure must compile.
"""

import gc
import weakref

import jax.numpy as jnp
import numpy as np
from jax import monitoring

from numpyro_autospec.infer._progress import BACKEND_COMPILE_EVENT
from numpyro_autospec.oracles import CurieWeissOracle, IsingChainOracle, validate_oracle
from numpyro_autospec.oracles._probes import validate_log_conditionals

COMPILED: list[str] = []


def _record(event, duration, **kwargs):
    if event == BACKEND_COMPILE_EVENT:
        COMPILED.append(kwargs.get("fun_name", "?"))


monitoring.register_event_duration_secs_listener(_record)


def compilations(action) -> list[str]:
    COMPILED.clear()
    action()
    return list(COMPILED)


def test_set_form_probe_compiles_once_for_new_parameter_values():
    """Curie-Weiss n = 7 and an Ising chain n = 7 (shapes no other test probes): the first
    probe of each compiles, a second oracle of the same structure with other values does not."""
    assert compilations(lambda: validate_oracle(CurieWeissOracle(7, beta=0.5), 7, 2))
    assert compilations(lambda: validate_oracle(CurieWeissOracle(7, beta=1.5), 7, 2)) == []
    rng = np.random.default_rng(0)

    def chain():
        return IsingChainOracle(rng.normal(size=6), rng.normal(size=7))

    first, second = chain(), chain()
    assert compilations(lambda: validate_oracle(first, 7, 2))
    assert compilations(lambda: validate_oracle(second, 7, 2)) == []


def test_block_form_probe_compiles_once_for_new_parameter_values():
    assert compilations(lambda: validate_log_conditionals(CurieWeissOracle(9, beta=0.5), 9))
    assert compilations(lambda: validate_log_conditionals(CurieWeissOracle(9, beta=2.0), 9)) == []


def test_an_oracle_closing_over_data_is_probed_but_not_kept_alive():
    """A plain function that closes over an array is probed through a fresh program (as
    before the programs were shared), so no cache keeps the array alive afterwards."""

    class Weights:  # a weak-referenceable holder of the closed-over data
        def __init__(self, logits):
            self.logits = logits

    def closing_over(weights):
        return lambda x, mask: weights.logits

    weights = Weights(jnp.log(jnp.full((5, 3), 1.0 / 3.0)))
    reference = weakref.ref(weights)
    oracle = closing_over(weights)
    validate_oracle(oracle, 5, 3)
    validate_oracle(oracle, 5, 3)
    del weights, oracle
    gc.collect()
    assert reference() is None
