"""The size of the engine's compiled program against the sequential chain's, with the same
oracle: kernels XLA launches (``numpyro_autospec._core.program_size``), conditionals, loops,
lines of the optimized HLO module, and the seconds to trace, lower and compile one draw.

    .venv/bin/python benchmarks/program_size.py                    # cw-1024 and mlp-256
    .venv/bin/python benchmarks/program_size.py --cases cw-32 digits-64

Kernel counts do not depend on the machine; seconds do (compare the two columns of one run).
"""

from __future__ import annotations

import argparse
import time

import jax
from cases import case_parser, make_process
from csv_tables import write_csv

from numpyro_autospec import engine
from numpyro_autospec._core.program_size import program_size
from numpyro_autospec.engine import sequential_run


def measure(case: str) -> list[dict]:
    """One row per sampler (``engine``, ``sequential``) of one draw of ``case``."""
    process = make_process(case)
    samplers = {
        "engine": lambda key: engine.run(process, key[None]),
        "sequential": lambda key: sequential_run(process, key[None]),
    }
    rows = []
    for name, draw in samplers.items():
        start = time.perf_counter()
        lowered = jax.jit(draw).lower(jax.random.PRNGKey(0))
        compiled = lowered.compile()
        seconds = time.perf_counter() - start
        text = compiled.as_text()
        size = program_size(text)
        rows.append(
            {
                "case": case,
                "sampler": name,
                "ops": size.ops,
                "conditionals": size.conditionals,
                "loops": size.loops,
                "hlo_lines": len(text.splitlines()),
                "compile_seconds": round(seconds, 2),
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    header = (
        f"{'case':>14} {'sampler':>10} {'ops':>6} {'conds':>6} {'loops':>6} {'lines':>7} {'s':>6}"
    )
    lines = [header]
    for row in rows:
        lines.append(
            f"{row['case']:>14} {row['sampler']:>10} {row['ops']:>6} {row['conditionals']:>6} "
            f"{row['loops']:>6} {row['hlo_lines']:>7} {row['compile_seconds']:>6}"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> list[dict]:
    # a warm-up compilation, so that the first case does not pay for starting XLA
    jax.jit(lambda x: x + 1).lower(jax.numpy.ones(2)).compile()
    rows = [row for case in args.cases for row in measure(case)]
    print(table(rows))
    if args.csv:
        print("CSV:", write_csv(args.csv, rows))
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = case_parser(__doc__, ["cw-1024", "mlp-256"], "program_size.csv")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
