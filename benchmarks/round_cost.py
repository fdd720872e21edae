"""Seconds per round against seconds per forward pass: what a round of ``engine.run`` costs
beside the oracle it calls, for order-aware transformer oracles of growing size and for an
oracle that costs nothing.

For each ``--sizes`` entry ``n:d:layers`` the script builds an oracle over ``{0..q-1}^n``:

* ``d > 0``: a :class:`numpyro_autospec.learned.TransformerOracle` of width ``d`` with
  ``layers`` two-stream layers and 4 heads, **randomly initialised** (seconds per round and
  per forward pass depend on the network's shape, not on its weights; its rounds per draw are
  those of the random network's law, not of a trained one: ``benchmarks/code_infilling.py``
  measures a trained network);
* ``d = 0``: ``targets.UniformOracle`` (every row uniform, nothing computed), so that a round
  costs the engine's own bookkeeping and a sequential step the sampler's loop.

It then times one draw per jitted call (free generation, nothing observed) with
``engine.run`` (default ``SamplerConfig``), ``sequential_run`` (one forward pass per step) and,
for transformers, ``kv_cached_sequential_run`` (cached keys and values), and prints per method:
compile seconds, milliseconds per draw, rounds and forward passes (``queries``) per draw,
milliseconds per round and per pass, and the kernels of the compiled program that the round
loop runs per iteration (:func:`round_kernels`, read from the compiled HLO text of whatever
backend JAX runs on).  Writes ``results/round_cost{_label}.{csv,png}``.

    .venv/bin/python benchmarks/round_cost.py                       # 256:64:3 256:0:0
    .venv/bin/python benchmarks/round_cost.py --sizes 1024:256:4 1024:0:0 --label n1024

Seconds are machine- and load-dependent: compare the ratios of one run (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import time

import jax
import numpy as np
from csv_tables import write_csv

from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
#: HLO operations that launch no kernel (views, tuples, constants, parameters)
FREE_OPERATIONS = frozenset(
    {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "opt-barrier"}
)


def _computations(hlo_text: str) -> tuple[dict[str, list[str]], str]:
    """``name -> instruction lines`` of every computation of an HLO module, and the entry's
    name."""
    computations, current, entry = {}, None, ""
    for line in hlo_text.splitlines():
        header = re.match(r"^(ENTRY )?%(\S+) .*\{$", line)
        if header:
            current = header.group(2)
            computations[current] = []
            entry = current if header.group(1) else entry
        elif line.startswith("}"):
            current = None
        elif current and line.strip().startswith(("%", "ROOT")):
            computations[current].append(line)
    return computations, entry


def _operation(line: str) -> str | None:
    rest = line.split(" = ", 1)[1] if " = " in line else line
    found = re.search(r"[\]})] ([a-z][a-z0-9-]*)\(", rest)
    return found.group(1) if found else None


def round_kernels(hlo_text: str) -> list[dict]:
    """The ``while`` loops of a compiled program, outermost first, each with the kernels and
    ``conditional``s one iteration runs (body and loop test; a ``conditional`` counted at its
    largest branch, an inner ``while`` at one iteration, a ``call`` as what it calls): an
    upper bound on what a round (the outer loop) and a micro-step (the scheduler's inner
    loop) launch.

    >>> import jax, jax.numpy as jnp
    >>> def loop(x):
    ...     step = lambda carry: (carry[0] + 1, jnp.sin(carry[1]) * 2.0)
    ...     return jax.lax.while_loop(lambda carry: carry[1].sum() < 9.0, step, (0, x))
    >>> loops = round_kernels(jax.jit(loop).lower(jnp.ones(4)).compile().as_text())
    >>> len(loops), loops[0]["depth"], loops[0]["kernels"] >= 1, loops[0]["conditionals"]
    (1, 0, True, 1)
    """
    computations, entry = _computations(hlo_text)

    @functools.cache
    def cost(name: str) -> tuple[int, int]:
        kernels = conditionals = 0
        for line in computations.get(name, ()):
            operation = _operation(line)
            if operation is None or operation in FREE_OPERATIONS:
                continue
            if operation == "conditional":
                listed = re.search(r"branch_computations=\{([^}]*)\}", line)
                branches = (
                    [b.strip().lstrip("%") for b in listed.group(1).split(",")]
                    if listed
                    else re.findall(r"(?:true|false)_computation=%([^,\s]+)", line)
                )
                largest = max((cost(b) for b in branches), default=(0, 0))
                kernels, conditionals = kernels + largest[0], conditionals + 1 + largest[1]
            elif operation == "call":
                called = cost(re.search(r"to_apply=%([^,\s]+)", line).group(1))
                kernels, conditionals = kernels + called[0], conditionals + called[1]
            elif operation == "while":
                body, test = _loop(line)
                kernels += cost(body)[0] + cost(test)[0]
                conditionals += cost(body)[1] + cost(test)[1] + 1
            else:
                kernels += 1
        return kernels, conditionals

    def _loop(line: str) -> tuple[str, str]:
        body = re.search(r"body=%([^,\s]+)", line).group(1)
        return body, re.search(r"condition=%([^,\s]+)", line).group(1)

    loops = []

    def walk(name: str, depth: int) -> None:
        for line in computations.get(name, ()):
            if _operation(line) == "call":
                walk(re.search(r"to_apply=%([^,\s]+)", line).group(1), depth)
            elif _operation(line) == "while":
                body, test = _loop(line)
                kernels, conditionals = (a + b for a, b in zip(cost(body), cost(test), strict=True))
                loops.append({"depth": depth, "kernels": kernels, "conditionals": conditionals + 1})
                walk(body, depth + 1)

    walk(entry, 0)
    return loops


def samplers(process) -> dict:
    """``method -> jitted key -> Samples`` of one draw."""
    from numpyro_autospec.config import SamplerConfig
    from numpyro_autospec.engine import run
    from numpyro_autospec.learned import TransformerOracle, kv_cached_sequential_run
    from numpyro_autospec.sequential import sequential_run

    draw = {
        "autospec": lambda key: run(process, key[None], SamplerConfig()),
        "sequential": lambda key: sequential_run(process, key[None]),
    }
    if isinstance(process.oracle, TransformerOracle):
        draw["kv-cache"] = lambda key: kv_cached_sequential_run(process, key[None])
    return {name: jax.jit(f) for name, f in draw.items()}


def measure(size: str, num_categories: int, draws: int) -> list[dict]:
    """One row per method for the oracle ``size`` (``n:d:layers``)."""
    from targets import UniformOracle

    from numpyro_autospec.learned import TransformerOracle
    from numpyro_autospec.processes import AnyOrderProcess

    n, width, layers = (int(part) for part in size.split(":"))
    if width > 0:
        key = jax.random.PRNGKey(0)
        oracle = TransformerOracle(
            n, num_categories, model_size=width, num_layers=layers, num_heads=4, key=key
        )
    else:
        oracle = UniformOracle(n, num_categories)
    process = AnyOrderProcess(oracle, n, num_categories, name="x")
    rows = []
    for method, sampler in samplers(process).items():
        begin = time.perf_counter()
        compiled = sampler.lower(jax.random.PRNGKey(0)).compile()
        compile_seconds = time.perf_counter() - begin
        loops = round_kernels(compiled.as_text())
        jax.block_until_ready(compiled(jax.random.PRNGKey(0)))
        seconds, rounds, passes = [], [], []
        for index in range(draws):
            begin = time.perf_counter()
            out = jax.block_until_ready(compiled(jax.random.PRNGKey(1 + index)))
            seconds.append(time.perf_counter() - begin)
            rounds.append(float(out.rounds[0]))
            passes.append(float(out.queries[0]))
        ms = 1e3 * float(np.mean(seconds))
        outer = loops[0] if loops else {"kernels": 0, "conditionals": 0}
        inner = loops[1] if len(loops) > 1 and method == "autospec" else None
        rows.append(
            {
                "oracle": size if width > 0 else f"{n}:uniform",
                "method": method,
                "compile_s": round(compile_seconds, 1),
                "ms_per_draw": ms,
                "rounds": float(np.mean(rounds)),
                "passes": float(np.mean(passes)),
                "ms_per_round": ms / float(np.mean(rounds)),
                "ms_per_pass": ms / float(np.mean(passes)),
                "loop_kernels": outer["kernels"],
                "loop_conditionals": outer["conditionals"],
                "micro_step_kernels": inner["kernels"] if inner else None,
            }
        )
        print(row_line(rows[-1]), flush=True)
    return rows


HEADER = (
    "| oracle (n:d:layers) | method | compile s | ms/draw | rounds | passes | ms/round "
    "| ms/pass | kernels per round (conditionals) | kernels per micro-step |"
)


def row_line(row: dict) -> str:
    inner = "" if row["micro_step_kernels"] is None else str(row["micro_step_kernels"])
    return (
        f"| {row['oracle']} | {row['method']} | {row['compile_s']:.1f} | {row['ms_per_draw']:.2f} "
        f"| {row['rounds']:.1f} | {row['passes']:.1f} | {row['ms_per_round']:.3f} "
        f"| {row['ms_per_pass']:.3f} | {row['loop_kernels']} ({row['loop_conditionals']}) "
        f"| {inner} |"
    )


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    oracles = list(dict.fromkeys(r["oracle"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    position = np.arange(len(oracles))
    width = 0.8 / len(methods)
    for field, ax, title in (
        ("ms_per_draw", axes[0], "milliseconds per draw"),
        ("ms_per_round", axes[1], "milliseconds per round (sequential: per step)"),
    ):
        for offset, method in enumerate(methods):
            values = [
                next((r[field] for r in rows if r["oracle"] == o and r["method"] == method), 0.0)
                for o in oracles
            ]
            bars = ax.bar(position + (offset - (len(methods) - 1) / 2) * width, values, width)
            bars.set_label(method)
            ax.bar_label(bars, fmt="%.3g", fontsize=7)
        ax.set_xticks(position, oracles)
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
    axes[0].legend(fontsize=8)
    device = jax.devices()[0].device_kind
    fig.suptitle(f"One draw per jitted call, free generation, {device}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(args: argparse.Namespace) -> list[dict]:
    print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}, q = {args.num_categories}")
    print(HEADER)
    print("|" + "---|" * 10)
    rows = [row for size in args.sizes for row in measure(size, args.num_categories, args.draws)]
    stem = os.path.join(args.out, "round_cost" + (f"_{args.label}" if args.label else ""))
    write_csv(stem + ".csv", rows)
    plot(rows, stem + ".png")
    print(f"wrote {stem}.csv and {stem}.png")
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=["256:64:3", "256:0:0"],
        help="oracles as n:d:layers (d = 0: the uniform oracle)",
    )
    parser.add_argument("--num-categories", type=int, default=98, help="q (the example's 98)")
    parser.add_argument("--draws", type=int, default=5, help="timed draws per method")
    parser.add_argument("--label", default="", help="suffix of the output files")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="CSV and plot")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
