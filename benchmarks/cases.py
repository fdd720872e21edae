"""The benchmarks' shared cases and tables: the processes a case name stands for, and a CSV
writer.  Scripts run as ``python benchmarks/NAME.py`` import it by bare name (their folder is
first on ``sys.path``).

Case names: ``cw-N`` (Curie-Weiss, beta = 1), ``ising-N`` (the Ising chain, J = 0.2),
``potts-N-qQ`` (a Potts-like count oracle with ``Q`` values, benchmark-only), ``mlp-N`` (a random
masked MLP, set form only), ``uniform-N`` (an oracle that costs nothing: the engine's own
cost), and the diffusions ``digits-N`` and ``mixture-N`` (stochastic localization on ``N``
steps; a suffix ``-sS`` speculates with the linear response of variance ``S``,
``-posterior`` with the denoiser's posterior covariance).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence

import jax.numpy as jnp
import numpy as np

__all__ = ["RESULTS", "case_parser", "make_process", "make_denoiser", "write_csv"]

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


def make_process(case: str):
    """The process of a case name (the module docstring)."""
    from targets import PottsCountOracle, RandomMLPOracle, UniformOracle

    from numpyro_autospec.oracles import CurieWeissOracle, IsingChainOracle
    from numpyro_autospec.processes import AnyOrderProcess, DiffusionProcess, default_times

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
        denoiser, dim = make_denoiser(family)
        suffix = rest[0] if rest else "none"
        variance = None
        if suffix == "posterior":
            variance = "posterior"
        elif suffix.startswith("s"):
            variance = float(suffix[1:])
        return DiffusionProcess(
            denoiser, dim, default_times(n), name=family, speculation_variance=variance
        )
    raise ValueError(f"unknown case {case!r}")


def case_parser(docstring: str | None, cases: Sequence[str], csv_name: str):
    """The argument parser of a script that measures ``--cases`` (default ``cases``) and
    writes ``--csv`` (default ``RESULTS/csv_name``)."""
    from numpyro_autospec.script_help import script_parser

    parser = script_parser(docstring)
    parser.add_argument(
        "--cases", nargs="*", default=list(cases), help="cases of benchmarks/cases.py"
    )
    parser.add_argument(
        "--csv", default=os.path.join(RESULTS, csv_name), help="CSV path ('' : none)"
    )
    return parser


def write_csv(
    path: str, rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None
) -> str:
    """Write ``rows`` to ``path`` with a header line, creating its folder; returns ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(columns or rows[0]), restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path
