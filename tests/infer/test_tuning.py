"""Warmup tunes the speculation (:mod:`numpyro_autospec.infer._tuning`): the configuration
chosen from the warmup draws differs from the given one where its window is off, and the draws
after warmup are still exact (a goodness-of-fit test against the exact law).  The same test
rejects a broken sampler run through warmup, tuning and sampling: a speculation whose draws do
not follow the rows it reports (on this product law the speculation is the target, so a broken
verifier or residual alone would not change the draws); and, a wrong-law comparison, the right
draws edited to move 2% of the probability.

Each candidate configuration is a compiled program, so the kernel's run fixes the two knobs
that only the ``"cautious"`` and ``"paper"`` candidates vary (the fallback threshold, at its
default for ``N = 64``, and the recursion block size, unused with root windows): warmup then
compares the default window with ``"wide"`` (two compilations, not four), by the same code
that measures every candidate; which candidates a configuration gets is checked without
compiling in ``test_candidates_keep_the_knobs_the_user_set``."""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
from numpyro.infer import MCMC

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.infer import AnyOrderAR, AutospecKernel
from numpyro_autospec.infer._tuning import (
    MIN_DRAWS_PER_CANDIDATE,
    Candidate,
    candidate_configs,
    choose,
)
from numpyro_autospec.processes import AnyOrderProcess
from tests.engine.broken import tempered_spec_sample
from tests.gof import assert_gof, encode_configurations

N = 64
#: independent sites with distinct biases: a product law, on which one window can verify the
#: whole sequence while the default first window is 4 sqrt(N) = 32 sites
PROBABILITY_OF_ONE = np.linspace(0.15, 0.85, N)
LOG_ROWS = jnp.log(jnp.stack([1 - PROBABILITY_OF_ONE, PROBABILITY_OF_ONE], axis=1))
CHECKED_SITES = 5  # the joint law of sites 0..4 is tested: 32 cells
#: 20000 draws after warmup.  A warmup candidate draws MIN_DRAWS_PER_CANDIDATE model draws in
#: one engine pool (16 x 20 = 320 draws of the site), few enough for the engine's default
#: capacity to advance every draw at once, so that a candidate's rounds are its algorithm's
#: (3 per draw for the given window, 2 for one window of the whole sequence), not the extra
#: rounds of a crowded pool
DRAWS_PER_ITERATION, ITERATIONS = 20, 1000
#: iterations of the broken sampler's run (4000 draws after warmup)
BROKEN_ITERATIONS = 200
#: the user's knobs: the fallback threshold at its default (sqrt(N) / 4) and a recursion block
#: size, which root windows do not use; only the window is left to tune
GIVEN = SamplerConfig(floor=2, block_size=N)
#: the fewest warmup iterations that tune two candidates (each iteration one joint draw of
#: the model, a plate of DRAWS_PER_ITERATION draws of the site)
NUM_WARMUP = 2 * MIN_DRAWS_PER_CANDIDATE


def product_oracle(x, mask):
    """Each site's row is its own Bernoulli law, whatever is pinned."""
    return LOG_ROWS.astype(jnp.float32)


def model():
    with numpyro.plate("draws", DRAWS_PER_ITERATION):
        numpyro.sample("x", AnyOrderAR(product_oracle, N, 2))


def exact_joint_of_checked_sites() -> np.ndarray:
    """The C-order table of the joint law of sites 0..4, flattened (index = code)."""
    p = PROBABILITY_OF_ONE[:CHECKED_SITES]
    table = np.ones(())
    for probability in p:
        table = np.multiply.outer(table, [1 - probability, probability])
    return table.ravel()


@pytest.fixture(scope="module")
def tuned_run():
    kernel = AutospecKernel(model, config=GIVEN)
    mcmc = MCMC(kernel, num_warmup=NUM_WARMUP, num_samples=ITERATIONS, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0))
    draws = np.asarray(mcmc.get_samples()["x"]).reshape(-1, N)
    return kernel, draws, np.asarray(mcmc.get_extra_fields()["rounds"])


def test_warmup_moves_off_the_default_window_on_a_product_law(tuned_run):
    kernel, _, rounds = tuned_run
    tuning = kernel.tuning
    # the given configuration is the default sampler on this site (the same root policy)
    assert GIVEN.root_policy(N) == SamplerConfig().root_policy(N)
    assert [c.name for c in tuning.candidates] == ["given", "wide"]
    assert tuning.candidates[0].config == GIVEN
    assert all(c.rounds.size == MIN_DRAWS_PER_CANDIDATE for c in tuning.candidates)
    assert tuning.chosen == "wide"
    assert tuning.config.root_policy(N).first_window == N  # off the default 4 sqrt(N) = 32
    assert tuning.config.floor == GIVEN.floor and tuning.config.block_size == GIVEN.block_size
    given = tuning.candidates[0]
    chosen = next(c for c in tuning.candidates if c.name == tuning.chosen)
    assert chosen.mean_rounds < given.mean_rounds
    # sampling ran the frozen configuration: fewer rounds than the defaults took in warmup
    assert rounds.mean() < given.mean_rounds


def test_draws_after_tuned_warmup_are_exact(tuned_run):
    _, draws, _ = tuned_run
    codes = encode_configurations(draws[:, :CHECKED_SITES], 2)
    # power 0.99 against an absolute error of 0.014 in a cell of probability 0.05 over the
    # 31 cells left after pooling (power_draws: 18 976 of the 20 000 draws)
    assert_gof(codes, exact_joint_of_checked_sites(), catches=(0.014, 0.05))


def test_the_same_check_rejects_a_broken_speculation_after_tuned_warmup(monkeypatch):
    """A wrong sampler through the same path (warmup, tuning, the frozen configuration): the
    speculation draws each site from its row squared while the verifier reads the row itself
    (``tests/engine/broken.py``), so every draft is accepted as exact.  The check above rejects
    its ``BROKEN_ITERATIONS * DRAWS_PER_ITERATION`` draws (site 0 is 1 with probability 0.03
    instead of 0.15)."""
    monkeypatch.setattr(AnyOrderProcess, "spec_sample", tempered_spec_sample)
    kernel = AutospecKernel(model, config=GIVEN)
    mcmc = MCMC(kernel, num_warmup=NUM_WARMUP, num_samples=BROKEN_ITERATIONS, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0))
    draws = np.asarray(mcmc.get_samples()["x"]).reshape(-1, N)
    # warmup measured both candidates, then sampling ran the frozen choice
    assert [c.name for c in kernel.tuning.candidates] == ["given", "wide"]
    codes = encode_configurations(draws[:, :CHECKED_SITES], 2)
    with pytest.raises(AssertionError, match="chi-square goodness of fit failed"):
        assert_gof(codes, exact_joint_of_checked_sites())


def test_the_same_check_rejects_edited_draws(tuned_run):
    """A wrong-law comparison, not a wrong sampler: the tuned draws with site 0 set to 1 in 5%
    of the draws whose sites 0..4 are all 0, so about 2% of the probability moves from cell 0
    (p = 0.39) to cell 16 (p = 0.07), an error that 20000 draws detect."""
    _, draws, _ = tuned_run
    wrong = draws.copy()
    all_zero = (wrong[:, :CHECKED_SITES] == 0).all(axis=1)
    moved = all_zero & (np.random.default_rng(0).random(len(wrong)) < 0.05)
    wrong[moved, 0] = 1
    codes = encode_configurations(wrong[:, :CHECKED_SITES], 2)
    with pytest.raises(AssertionError, match="chi-square goodness of fit failed"):
        assert_gof(codes, exact_joint_of_checked_sites())


def candidate(name, rounds):
    rounds = np.asarray(rounds, float)
    return Candidate(name, SamplerConfig(), rounds, rounds)


def test_noise_keeps_the_given_configuration_and_a_clear_gain_replaces_it():
    rng = np.random.default_rng(0)
    given = candidate("given", 20 + rng.normal(0, 3, 32))
    noisy = candidate("noisy", given.rounds - 0.5)
    assert choose([given, noisy]).name == "given"
    better = candidate("better", given.rounds - 5)
    assert choose([given, noisy, better]).name == "better"
    worse = candidate("worse", given.rounds + 5)
    assert choose([given, worse]).name == "given"


def test_candidates_keep_the_knobs_the_user_set():
    names = [name for name, _ in candidate_configs(SamplerConfig(), 256)]
    assert names == ["given", "wide", "cautious", "paper"]
    assert [name for name, _ in candidate_configs(GIVEN, 256)] == ["given", "wide"]
    user = SamplerConfig(window=40, floor=3)
    for _, config in candidate_configs(user, 256):
        assert config.window == 40 and config.floor == 3
    assert candidate_configs(SamplerConfig(method="sequential"), 256) == (
        ("given", SamplerConfig(method="sequential")),
    )
