"""Seconds to the first draw: a one-draw ``MCMC(AutospecKernel(model)).run`` in a new Python
process, from the import of the package to the draw (tracing the model, compiling NumPyro's
loop with the engine inside, drawing), without a compilation cache and then, in a second new
process, with JAX's persistent compilation cache filled by the first.

    .venv/bin/python benchmarks/first_draw.py                     # cw-32, cw-1024, digits-64
    .venv/bin/python benchmarks/first_draw.py --cases cw-1024 --repeats 3

Each measurement is its own subprocess (``python -c``), so nothing is warm; the cache lives
in a temporary folder, removed afterwards.  The sequential sampler's first draw
(``AutospecKernel(model, method="sequential")``) is measured the same way, for the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from cases import case_parser
from csv_tables import write_csv

#: the child process: build the case's model, run one draw, print the seconds as JSON
CHILD = r"""
import json, sys, time
start = time.perf_counter()
sys.path.insert(0, {here!r})
import jax
if {cache!r}:
    jax.config.update("jax_compilation_cache_dir", {cache!r})
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
import numpyro
from numpyro.infer import MCMC
from numpyro_autospec import AnyOrderAR, AutospecKernel, StochasticLocalization
from cases import make_process
process = make_process({case!r})
if hasattr(process, "oracle"):
    site = AnyOrderAR(process.oracle, process.num_positions, process.num_categories)
else:
    site = StochasticLocalization(process.denoiser, process.dim, process.times)
def model():
    numpyro.sample("x", site)
imported = time.perf_counter()
mcmc = MCMC(AutospecKernel(model, method={method!r}), num_warmup=0, num_samples=1,
            progress_bar=False)
mcmc.run(jax.random.PRNGKey(0))
jax.block_until_ready(mcmc.get_samples())
done = time.perf_counter()
print(json.dumps({{"seconds": done - start, "draw_seconds": done - imported}}))
"""


def first_draw(case: str, method: str, cache: str) -> dict:
    here = os.path.dirname(os.path.abspath(__file__))
    code = CHILD.format(here=here, cache=cache, case=case, method=method)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(args: argparse.Namespace) -> list[dict]:
    rows = []
    for case in args.cases:
        for method in ("autospec", "sequential"):
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory() as cache:
                    cold = first_draw(case, method, cache)
                    warm = first_draw(case, method, cache)
                row = {
                    "case": case,
                    "method": method,
                    "cold_seconds": round(cold["draw_seconds"], 2),
                    "cold_with_import": round(cold["seconds"], 2),
                    "cached_seconds": round(warm["draw_seconds"], 2),
                    "cached_with_import": round(warm["seconds"], 2),
                }
                rows.append(row)
                print(row, flush=True)
    if args.csv:
        print("CSV:", write_csv(args.csv, rows))
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = case_parser(__doc__, ["cw-32", "cw-1024", "digits-64"], "first_draw.csv")
    parser.add_argument("--repeats", type=int, default=1, help="measurements per case")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
