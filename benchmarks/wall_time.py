"""Seconds per exact draw on Curie-Weiss: the engine (autospec default, and its sequential
method) against the bare chain-rule loop (``numpyro_autospec.sequential.sequential_run``,
what ``AnyOrderAR.sample`` runs), each one jitted draw per call, compile time apart.

    .venv/bin/python benchmarks/wall_time.py --sizes 1024 4096 --repeats 3

Rounds are the cost on an accelerator with an expensive oracle (a batch of queries costs about
what one does); this script shows what they cost in seconds on the machine at hand, where the
Curie-Weiss oracle is cheap and the engine's per-round overhead dominates (docs/benchmarks.md,
"Time").
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import run
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess
from numpyro_autospec.sequential import sequential_run


def time_draws(draw, repeats: int) -> tuple[float, float, tuple]:
    """(compile + first call seconds, mean seconds per later call, last output)."""
    start = time.perf_counter()
    out = jax.block_until_ready(draw(jax.random.PRNGKey(0)))
    first = time.perf_counter() - start
    seconds = []
    for seed in range(1, repeats + 1):
        start = time.perf_counter()
        out = jax.block_until_ready(draw(jax.random.PRNGKey(seed)))
        seconds.append(time.perf_counter() - start)
    return first, float(np.mean(seconds)), out


def main(args: argparse.Namespace) -> None:
    header = ("n", "sampler", "compile+1st s", "s/draw", "rounds (last draw)")
    print("{:>6}  {:<28} {:>13} {:>8} {:>18}".format(*header))
    for n in args.sizes:
        process = AnyOrderProcess(CurieWeissOracle(n, beta=args.beta), n, 2)
        samplers = {
            "chain rule (fori_loop)": lambda key, p=process: sequential_run(p, key[None]),
            "engine, method=sequential": lambda key, p=process: run(
                p, key[None], SamplerConfig(method="sequential")
            ),
            "engine, autospec default": lambda key, p=process: run(p, key[None], SamplerConfig()),
        }
        for name, draw in samplers.items():
            first, per_draw, out = time_draws(jax.jit(draw), args.repeats)
            rounds = getattr(out, "rounds", None)
            rounds = n if rounds is None else int(np.asarray(rounds)[0])
            print(f"{n:>6}  {name:<28} {first:>13.1f} {per_draw:>8.3f} {rounds:>18}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--beta", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    main(parser.parse_args())
