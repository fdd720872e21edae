"""Compilation seen from NumPyro's ``MCMC``: a second ``run``, a run with new model arguments
and a restart from ``last_state`` compile nothing, and the progress bar says that the sampler
is compiling (and keeps the compile time out of its rates), while ``progress_bar=False`` stays
quiet.

Compilations are counted with JAX's backend-compile event (:mod:`jax.monitoring`), the event
:mod:`numpyro_autospec.infer._progress` listens to.
"""

import re

import jax
import numpy as np
import numpyro
import pytest
from jax import monitoring
from jax.experimental.compilation_cache import compilation_cache
from numpyro.infer import MCMC

from numpyro_autospec import AnyOrderAR, AutospecKernel
from numpyro_autospec.infer._progress import BACKEND_COMPILE_EVENT
from numpyro_autospec.oracles import CurieWeissOracle

COMPILED: list[str] = []


def _record(event, duration, **kwargs):
    if event == BACKEND_COMPILE_EVENT:
        COMPILED.append(kwargs.get("fun_name", "?"))


monitoring.register_event_duration_secs_listener(_record)


def model(n=8):
    numpyro.sample("x", AnyOrderAR(CurieWeissOracle(n, beta=1.0), n, 2))


def compilations(action) -> list[str]:
    """The programs XLA compiled while ``action()`` ran."""
    COMPILED.clear()
    action()
    return list(COMPILED)


@pytest.fixture
def progress_bar(monkeypatch):
    """NumPyro's default progress bar, which it turns off under these variables (then it
    re-jits its loop at every ``run``: see docs/numpyro.md)."""
    for variable in ("CI", "PYTEST_XDIST_WORKER"):
        monkeypatch.delenv(variable, raising=False)


def infilling_model(beta, window):
    """Curie-Weiss with ``beta`` a model argument and the window's first half observed."""
    mask = np.arange(8) < 4
    oracle = CurieWeissOracle(8, beta=beta)
    numpyro.sample("x", AnyOrderAR(oracle, 8, 2, observed=window, observed_mask=mask))


def test_a_second_run_new_model_arguments_and_a_restart_compile_nothing(progress_bar):
    """With ``jit_model_args=True`` the model's arguments are data: a second run, a run with a
    new ``beta`` and a new observed window (the model is inspected again, its oracle probed
    through a program compiled once per oracle structure and shapes,
    :func:`numpyro_autospec._core.parameters.jit_over_parameters`) and a restart from
    ``last_state`` compile nothing."""
    mcmc = MCMC(AutospecKernel(infilling_model), num_warmup=0, num_samples=2, jit_model_args=True)
    window = np.array([1, 0, 1, 1, 0, 0, 0, 0], np.int32)
    first = compilations(lambda: mcmc.run(jax.random.PRNGKey(0), 1.0, window))
    assert first, "the listener saw no compilation: the counts below would prove nothing"
    assert compilations(lambda: mcmc.run(jax.random.PRNGKey(1), 1.0, window)) == []
    window = np.array([0, 0, 1, 0, 1, 1, 1, 1], np.int32)
    assert compilations(lambda: mcmc.run(jax.random.PRNGKey(2), 0.5, window)) == []
    assert (np.asarray(mcmc.get_samples()["x"])[:, :4] == window[None, :4]).all()

    def restart():
        mcmc.post_warmup_state = mcmc.last_state
        mcmc.run(mcmc.post_warmup_state.rng_key, 0.5, window)

    assert compilations(restart) == []
    assert mcmc.get_samples()["x"].shape == (2, 8)


def test_the_progress_bar_says_it_is_compiling_and_keeps_it_out_of_the_rate(capfd, progress_bar):
    # without the suite's persistent cache the program compiles here, for seconds: the bar's
    # elapsed time can then be told apart from the compile time.  JAX decides once per process
    # whether it uses the cache, so the setting takes effect only after a reset (without it,
    # a second run of the suite loads the program that the first one stored, in 0.3 s)
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()
    try:
        mcmc = MCMC(AutospecKernel(model), num_warmup=0, num_samples=3)
        mcmc.run(jax.random.PRNGKey(0))
    finally:
        jax.config.update("jax_enable_compilation_cache", True)
        compilation_cache.reset_cache()
    err = capfd.readouterr().err
    assert "compiling the autospeculation sampler" in err
    seconds = re.search(r"compiled the autospeculation sampler in ([\d.]+) s", err)
    assert seconds is not None, err
    # it compiled (loading the program from a cache takes 0.3-0.4 s here, compiling it about 2 s)
    compiled = float(seconds.group(1))
    assert compiled >= 1.0, err
    # the bar's last elapsed time (whole seconds, truncated) counts the three draws, not the
    # compilation: one that counted it would show at least int(compiled) seconds
    minutes, secs = map(int, re.findall(r"\[(\d+):(\d+)<", err)[-1])
    assert 60 * minutes + secs < int(compiled), err


def test_no_progress_bar_no_message(capfd):
    mcmc = MCMC(AutospecKernel(lambda: model(6)), num_warmup=0, num_samples=2, progress_bar=False)
    assert compilations(lambda: mcmc.run(jax.random.PRNGKey(0)))  # it did compile
    captured = capfd.readouterr()
    assert "compil" not in captured.err + captured.out


def test_init_compiles_whole_oracle_probes_not_each_constant_operation():
    """``init`` inspects the model inside ``jax.ensure_compile_time_eval`` (the model's own
    values stay concrete when ``init`` is traced); the oracle checks stage the operations on
    constants of the functions they trace
    (:func:`numpyro_autospec._core.parameters.staged_constants`),
    so ``init`` compiles whole programs (the oracle probe) and the few eager operations of
    the inspection itself (keys, zeros: 19 programs in all here), not one program per
    operation on an oracle constant as well (70 before, about a second longer)."""
    n = 37  # a size no other test compiles, so no program comes from JAX's in-memory cache

    def model_37():
        numpyro.sample("x", AnyOrderAR(CurieWeissOracle(n, beta=1.0), n, 2))

    kernel = AutospecKernel(model_37)
    programs = compilations(lambda: kernel.init(jax.random.PRNGKey(0), 0))
    assert programs, "the listener saw no compilation: the count below would prove nothing"
    assert len(programs) <= 30, programs
