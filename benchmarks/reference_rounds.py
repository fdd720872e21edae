"""Rounds and queries of the *reference* sampler (the executable specification) on
Curie-Weiss, next to sequential sampling.

    .venv/bin/python benchmarks/reference_rounds.py --sizes 64 256 1024 --draws 20 --root paper
    .venv/bin/python benchmarks/reference_rounds.py --sizes 64 256 1024 --draws 20 --root windows

``--root paper`` is the paper's recursion as written (``root_windows=False``: one recursion
block of n steps); ``--root windows`` the default ``autospec`` root (block-verified windows
with recursion blocks as fallback).

The reference is plain Python recursion (slow); the engine reproduces its rounds exactly
(tests/engine/test_scheduler.py), so use benchmarks/rounds.py for large sweeps.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from numpyro_autospec import reference
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess
from numpyro_autospec.script_help import script_parser

CONFIGS = {"paper": SamplerConfig(root_windows=False), "windows": SamplerConfig()}


def main(args: argparse.Namespace) -> None:
    print(
        f"{'n':>6} {'mean rounds':>12} {'p90 rounds':>11} {'mean queries':>13} "
        f"{'sequential':>11} {'seconds':>8}"
    )
    for n in args.sizes:
        process = AnyOrderProcess(CurieWeissOracle(n, beta=args.beta), n, 2)
        start = time.time()
        _, rounds, queries = reference.sample_many(
            process, jax.random.PRNGKey(n), args.draws, CONFIGS[args.root]
        )
        print(
            f"{n:>6} {rounds.mean():>12.1f} {np.percentile(rounds, 90):>11.1f} "
            f"{queries.mean():>13.0f} {n:>11} {time.time() - start:>8.0f}",
            flush=True,
        )


if __name__ == "__main__":
    parser = script_parser(__doc__)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[64, 256, 1024], help="numbers of spins n"
    )
    parser.add_argument("--draws", type=int, default=20, help="draws per size")
    parser.add_argument(
        "--beta", type=float, default=1.0, help="inverse temperature of the Curie-Weiss model"
    )
    parser.add_argument(
        "--root",
        choices=sorted(CONFIGS),
        default="paper",
        help="root policy of the reference sampler",
    )
    main(parser.parse_args())
