"""The first code block of the user guide docs/numpyro.md, verbatim, with NumPyro and ArviZ
diagnostics on its run, and the rest of the guide.

Everything runs in one test, so that the snippet's run (engine, Curie-Weiss n = 256, 2 chains
x 500 draws, NumPyro's default chain method, which falls back to sequential chains on one
device, with the progress bar) happens once even when pytest-xdist spreads tests over workers.
It checks: the magnetization law against the exact one; rounds far below the sequential
sampler's 256; ``rounds``/``queries`` in ``arviz.from_numpyro(mcmc).sample_stats``; R-hat about
1 and ESS about the number of draws (exact independent draws); ``print_summary``; the progress
bar's diagnostics string; then every other ``python`` block of the guide runs as written.
"""

import os
import re
import textwrap

import arviz as az
import jax
import numpy as np
from numpyro.diagnostics import summary

from numpyro_autospec.oracles import CurieWeissOracle
from tests.gof import assert_gof

N = 256
GUIDE = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "docs", "numpyro.md"
)

# The guide's first snippet, as a user types it: it must run as written.
GUIDE_SNIPPET = """
import jax, numpyro
from numpyro.infer import MCMC
from numpyro_autospec import AutospecKernel, AnyOrderAR
from numpyro_autospec.oracles import CurieWeissOracle

def model():
    numpyro.sample("x", AnyOrderAR(CurieWeissOracle(256, beta=1.0)))

mcmc = MCMC(AutospecKernel(model), num_warmup=0, num_samples=500, num_chains=2,
            chain_method="vectorized")  # both chains share one pool of oracle calls
mcmc.run(jax.random.PRNGKey(0), extra_fields=("rounds", "queries"))
"""  # noqa: E501


def python_blocks(text: str) -> list[str]:
    """The code blocks fenced as ``python`` (``py`` blocks are illustrations)."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def check_magnetization_law(magnetization):
    """The magnetization law against the exact one, binned into ten cells of about equal
    exact mass (chi-square, p > 1e-4; with 1000 draws, power 0.99 against an absolute error of
    0.072 in a cell of about 0.1, by ``power_draws(0.072, 0.1, num_cells=10)``: 984 draws; a
    sanity check, the engine's exactness on this law is tested with more draws in
    tests/engine)."""
    law = np.exp(CurieWeissOracle(N, beta=1.0).magnetization_log_probs())
    edges = np.searchsorted(np.cumsum(law), np.linspace(0.1, 0.9, 9))  # decile boundaries
    cells = np.searchsorted(edges, magnetization.ravel(), side="right")
    binned = np.bincount(np.searchsorted(edges, np.arange(N + 1), side="right"), law, 10)
    law = binned / binned.sum()
    assert_gof(cells, law, label="magnetization deciles", catches=(0.072, 0.1))


def check_arviz(mcmc):
    idata = az.from_numpyro(mcmc)
    stats = idata.sample_stats
    for name in ("rounds", "queries"):
        assert stats[name].dims == ("chain", "draw")
        assert stats[name].shape == (2, 500)
        assert stats[name].dtype.kind == "i"
    np.testing.assert_array_equal(stats["rounds"].values, mcmc.get_extra_fields(True)["rounds"])
    assert (stats["rounds"].values >= 1).all() and (stats["queries"].values >= 1).all()
    assert idata.posterior["x"].shape == (2, 500, N)


def check_rhat_and_ess(magnetization):
    """Independent exact draws: R-hat about 1 and bulk ESS about the 1000 draws (the ESS
    estimate of 1000 independent draws has a standard deviation of about 5%)."""
    stats = summary({"m": magnetization}, group_by_chain=True)["m"]
    assert abs(float(stats["r_hat"]) - 1.0) < 0.02
    assert 750 < float(stats["n_eff"]) < 1300
    data = az.convert_to_dataset({"m": magnetization})
    assert abs(float(az.rhat(data)["m"]) - 1.0) < 0.02
    assert 750 < float(az.ess(data)["m"]) < 1300


def check_print_summary_and_diagnostics_string(mcmc, capsys):
    mcmc.print_summary()
    printed = capsys.readouterr().out
    assert "r_hat" in printed and "x[255]" in printed
    state = jax.tree.map(lambda leaf: leaf[1], mcmc.last_state)  # chain 1's last state
    rounds, queries = int(state.rounds), int(state.queries)
    expected = f"{rounds} rounds, {queries} evaluations, {N} steps"
    assert mcmc.sampler.get_diagnostics_str(state) == expected


def test_guide_snippet_diagnostics_and_the_rest_of_the_guide(capsys):
    with open(GUIDE) as file:
        blocks = python_blocks(file.read())
    assert textwrap.dedent(blocks[0]).strip() == GUIDE_SNIPPET.strip()
    namespace = {"__name__": "numpyro_guide"}
    exec(GUIDE_SNIPPET, namespace)
    mcmc = namespace["mcmc"]

    assert mcmc.get_samples()["x"].shape == (1000, N)
    magnetization = np.asarray(mcmc.get_samples(group_by_chain=True)["x"]).sum(-1)
    check_magnetization_law(magnetization)
    assert np.asarray(mcmc.get_extra_fields()["rounds"]).mean() < N / 2
    check_arviz(mcmc)
    check_rhat_and_ess(magnetization)
    check_print_summary_and_diagnostics_string(mcmc, capsys)

    for index, block in enumerate(blocks[1:], start=1):
        try:
            exec(compile(block, f"docs/numpyro.md, python block {index}", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"docs/numpyro.md, python block {index} failed") from error
