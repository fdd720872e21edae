"""The benchmarks' shared cases: the processes a case name stands for, the ``--cases`` and
``--csv`` options, and the runner of measuring child processes (CSV files: ``csv_tables``).
Scripts run as ``python benchmarks/NAME.py`` import it by bare name (their folder is first on
``sys.path``), first of their own modules: importing it puts ``examples/`` on ``sys.path`` too,
for the scripts' support package that the examples and benchmarks share (``support.scripts``,
the trained networks' recipes and checkpoints).

Case names: ``cw-N`` (Curie-Weiss, beta = 1), ``ising-N`` (the Ising chain, J = 0.2),
``potts-N-qQ`` (a Potts-like count oracle with ``Q`` values, benchmark-only), ``mlp-N`` (a random
masked MLP, set form only), ``uniform-N`` (an oracle that costs nothing: the engine's own
cost), and the diffusions ``digits-N`` and ``mixture-N`` (stochastic localization on ``N``
steps; a suffix ``-sS`` speculates with the linear response of variance ``S``,
``-posterior`` with the denoiser's posterior covariance).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

import jax.numpy as jnp
import numpy as np

__all__ = [
    "CHILD_TIMEOUT",
    "RESULTS",
    "case_parser",
    "child_result",
    "make_denoiser",
    "make_diffusion",
    "make_process",
]

#: the examples' folder, which holds the ``support`` package
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
if EXAMPLES not in sys.path:
    sys.path.append(EXAMPLES)

#: seconds a measuring child process may run before it is given up (a hung case must not hang
#: the whole benchmark)
CHILD_TIMEOUT = 3600
#: where the scripts write the results the docs quote
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def make_denoiser(target: str):
    """The denoiser of a diffusion target (``digits``, ``mixture``) and its dimension."""
    from numpyro_autospec.denoisers import GaussianMixtureDenoiser, digits_point_cloud

    if target == "digits":
        denoiser = digits_point_cloud()
        return denoiser, denoiser.dim
    if target == "mixture":
        rng = np.random.default_rng(0)
        means = rng.uniform(0.0, 1.0, size=(8, 16))
        denoiser = GaussianMixtureDenoiser.isotropic(jnp.ones(8), jnp.asarray(means), 0.1)
        return denoiser, denoiser.dim
    raise ValueError(f"unknown diffusion target {target!r}")


def make_diffusion(target: str, n: int, speculation: str = "none"):
    """Stochastic localization of ``target`` on ``default_times(n)`` (t_max = 1000); the
    speculation freezes the drift (``speculation = "none"``) or follows the linear response of
    a Gaussian of that variance (a number, ``DiffusionProcess(speculation_variance=...)``) or
    of the denoiser's posterior covariance (``"posterior"``, or ``"posterior:R"`` for its
    rank-``R`` estimate)."""
    from numpyro_autospec.processes import DiffusionProcess, default_times
    from numpyro_autospec.processes._diffusion import POSTERIOR

    denoiser, dim = make_denoiser(target)
    spec, _, rank = speculation.strip().lower().partition(":")
    variance = None if spec == "none" else spec if spec == POSTERIOR else float(spec)
    rank = int(rank) if rank else None
    times = default_times(n)
    return DiffusionProcess(
        denoiser, dim, times, name=target, speculation_variance=variance, posterior_rank=rank
    )


def make_process(case: str):
    """The process of a case name (the module docstring)."""
    from targets import PottsCountOracle, RandomMLPOracle, UniformOracle

    from numpyro_autospec.oracles import CurieWeissOracle, IsingChainOracle
    from numpyro_autospec.processes import AnyOrderProcess

    family, size, *rest = case.split("-")
    n = int(size)
    if family == "cw":
        return AnyOrderProcess(CurieWeissOracle(n, beta=1.0), n, 2)
    if family == "potts":
        q = int(rest[0][1:])
        return AnyOrderProcess(PottsCountOracle(n, q), n, q)
    if family == "ising":
        return AnyOrderProcess(IsingChainOracle.uniform(n, coupling=0.2), n, 2)
    if family == "mlp":
        return AnyOrderProcess(RandomMLPOracle(n, 2), n, 2)
    if family == "uniform":
        return AnyOrderProcess(UniformOracle(n, 2), n, 2)
    if family in ("digits", "mixture"):
        suffix = rest[0] if rest else "none"  # none, sS (variance S) or posterior
        return make_diffusion(family, n, suffix[1:] if suffix.startswith("s") else suffix)
    raise ValueError(f"unknown case {case!r}")


def case_parser(docstring: str | None, cases: Sequence[str], csv_name: str):
    """The argument parser of a script that measures ``--cases`` (default ``cases``) and
    writes ``--csv`` (default ``RESULTS/csv_name``)."""
    from support.scripts import script_parser

    parser = script_parser(docstring)
    parser.add_argument(
        "--cases", nargs="*", default=list(cases), help="cases of benchmarks/cases.py"
    )
    parser.add_argument(
        "--csv", default=os.path.join(RESULTS, csv_name), help="CSV path ('' : none)"
    )
    return parser


def child_result(command: Sequence[str], label: str, env: Mapping[str, str] | None = None):
    """Run a measuring child process (``command``, environment ``env``, at most
    :data:`CHILD_TIMEOUT` seconds) and return the JSON value on the last line of its output,
    or ``None`` after saying on stderr, with ``label``, that it timed out or failed."""
    try:
        result = subprocess.run(
            list(command),
            capture_output=True,
            text=True,
            check=False,
            env=None if env is None else dict(env),
            timeout=CHILD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        print(f"{label}: no result within {CHILD_TIMEOUT} s", file=sys.stderr)
        return None
    if result.returncode != 0:
        print(f"{label}: failed\n{result.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])
