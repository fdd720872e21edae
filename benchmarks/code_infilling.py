"""Code infilling with the two-stream transformer: autospeculation against both sequential
baselines, measured in one run.

The network is the one of ``examples/code_infilling.py`` (same recipe, same checkpoint cache:
``load_or_train``; it trains once, minutes to a quarter of an hour on two CPU cores at
``n = 256``).  Held-out windows of ``n`` characters get their middle ``span`` characters masked
(``span = n``: nothing observed, free generation) and each sampler draws the span from the law
of sequential sampling along a uniformly random order (docs/learned.md):

* ``autospec``: ``numpyro_autospec.engine.run`` with the default ``SamplerConfig`` (or the
  knobs given on the command line);
* ``sequential``: ``numpyro_autospec.engine.sequential_run``, one forward pass (one
  ``log_conditionals`` row) per step;
* ``kv-cache``: ``numpyro_autospec.learned.kv_cached_sequential_run``, one prefill pass and
  then one query-stream row and one appended content row per step (cached keys and values,
  :math:`O(n d)` per step).

All three are jitted with the window as an argument, one draw per call (the latency of a
draw), timed after the first call (compilation), in wall-clock seconds and in CPU seconds of
the process (all its threads; steadier than wall-clock time on a machine shared with other
jobs).  The script prints the table (rounds, forward passes and conditionals per draw, seconds
per draw, ratios) and writes ``results/code_infilling.{txt,csv,png}``.

    .venv/bin/python benchmarks/code_infilling.py                  # n = 256, spans 64 128 256
    .venv/bin/python benchmarks/code_infilling.py --spans 128 --num-windows 2 --draws 2

Seconds are machine- and load-dependent: compare the ratios of one run (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import time

import jax
import numpy as np
from cases import EXAMPLES, RESULTS
from csv_tables import markdown_table, pyplot, save_figure, write_csv

from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.engine import run, sequential_run
from numpyro_autospec.processes import AnyOrderProcess

from support.scripts import script_parser

METHODS = ("autospec", "sequential", "kv-cache")
KNOBS = ("window", "window_growth", "floor", "fallback", "block_size")


def load_example():
    """The example module (its training recipe, checkpoint naming and masked windows)."""
    path = os.path.join(EXAMPLES, "code_infilling.py")
    spec = importlib.util.spec_from_file_location("code_infilling_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def samplers(oracle, observed_mask: np.ndarray, config) -> dict:
    """``method -> jitted (key, window) -> Samples`` of one draw."""
    from numpyro_autospec.learned import kv_cached_sequential_run

    def process(window):
        n, q = oracle.num_positions, oracle.num_categories
        return AnyOrderProcess(
            oracle, n, q, observed_values=window, observed_mask=observed_mask, name="code"
        )

    draw = {
        "autospec": lambda keys, window: run(process(window), keys, config),
        "sequential": lambda keys, window: sequential_run(process(window), keys),
        "kv-cache": lambda keys, window: kv_cached_sequential_run(process(window), keys),
    }
    return {
        name: jax.jit(lambda key, window, f=f: f(key[None], window)) for name, f in draw.items()
    }


def measure(oracle, windows: np.ndarray, observed_mask, config, draws: int) -> list[dict]:
    """One row per method: costs and seconds per draw over every window and draw."""
    rows = []
    for name, sampler in samplers(oracle, observed_mask, config).items():
        begin = time.perf_counter()
        jax.block_until_ready(sampler(jax.random.PRNGKey(0), windows[0]))
        first = time.perf_counter() - begin
        rounds, queries, conditionals, seconds, cpu_seconds = [], [], [], [], []
        for index, window in enumerate(windows):
            for draw in range(draws):
                key = jax.random.PRNGKey(1 + index * draws + draw)
                begin, begin_cpu = time.perf_counter(), time.process_time()
                out = jax.block_until_ready(sampler(key, window))
                seconds.append(time.perf_counter() - begin)
                cpu_seconds.append(time.process_time() - begin_cpu)
                rounds.append(float(out.rounds[0]))
                queries.append(float(out.queries[0]))
                rows_of = out.queries if out.conditionals is None else out.conditionals
                conditionals.append(float(rows_of[0]))
        mean = lambda values: float(np.mean(values))
        row = {"method": name, "free": int((~observed_mask).sum())}
        row |= {"rounds": mean(rounds), "max_rounds": float(np.max(rounds))}
        row |= {"queries": mean(queries), "conditionals": mean(conditionals)}
        row |= {"s_per_draw": mean(seconds), "cpu_s_per_draw": mean(cpu_seconds)}
        rows.append(row | {"compile_s": round(first - row["s_per_draw"], 1)})
        print(
            f"  {name:<11} free {row['free']:>4}: {row['rounds']:7.1f} rounds, "
            f"{row['queries']:7.1f} passes, {row['s_per_draw']:.3f} s/draw, "
            f"{row['cpu_s_per_draw']:.3f} CPU s/draw",
            flush=True,
        )
    return rows


def table(rows: list[dict], n: int) -> str:
    header = (
        "free sites | method | rounds/draw (max) | forward passes/draw | conditionals/draw "
        "| s/draw | CPU s/draw | sequential s / this s | kv-cache s / this s"
    )
    cells = (
        "{free} of {n} | {method} | {rounds:.1f} ({max_rounds:.0f}) | {queries:.1f} "
        "| {conditionals:.0f} | {s_per_draw:.3f} | {cpu_s_per_draw:.3f} | {plain:.2f}x "
        "| {cached:.2f}x"
    )
    body = []
    for r in rows:  # the baselines' seconds: the first row of each method with these free sites
        same = {s["method"]: s["s_per_draw"] for s in reversed(rows) if s["free"] == r["free"]}
        plain, cached = same["sequential"] / r["s_per_draw"], same["kv-cache"] / r["s_per_draw"]
        body.append(r | {"plain": plain, "cached": cached, "n": n})
    return markdown_table(header, body, cells)


def plot(rows: list[dict], n: int, path: str) -> None:
    plt = pyplot()
    spans = sorted({r["free"] for r in rows})
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    fields = [
        ("rounds", "rounds per draw (latency)"),
        ("queries", "forward passes per draw (work)"),
        ("s_per_draw", f"seconds per draw (jitted, {jax.devices()[0].device_kind})"),
    ]
    position = np.arange(len(spans))
    for ax, (field, title) in zip(axes, fields, strict=True):
        for offset, method in enumerate(METHODS):
            values = [
                next(r[field] for r in rows if r["free"] == s and r["method"] == method)
                for s in spans
            ]
            bars = ax.bar(position + (offset - 1) * 0.27, values, 0.27, label=method)
            ax.bar_label(bars, fmt="%.3g", fontsize=7)
        if field == "rounds":
            ax.axhline(n / 8, color="black", lw=0.8, ls="--", label="n / 8")
        if field == "queries":
            ax.axhline(n, color="black", lw=0.8, ls="--", label="n")
        ax.set_xticks(position, [f"{s} free of {n}" for s in spans])
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Infilling held-out Python with a two-stream transformer, n = {n}", fontsize=11)
    save_figure(fig, path)


def main(args: argparse.Namespace) -> list[dict]:
    example = load_example()
    example_args = example.parse_args(
        ["--num-positions", str(args.num_positions), "--model-size", str(args.model_size)]
        + ["--num-steps", str(args.num_steps), "--no-progress-bar"]
        + (["--cache-dir", args.cache_dir] if args.cache_dir else [])
    )
    corpus = example.load_code_corpus(example_args.held_out_fraction, example_args.max_characters)
    oracle, metadata = example.train_or_load(example_args, corpus)
    knobs = {k: getattr(args, k) for k in KNOBS if getattr(args, k) is not None}
    config = SamplerConfig(**knobs)
    rows = []
    for span in args.spans:
        windows, observed_mask = example.masked_examples(
            corpus.held_out, args.num_positions, span, args.num_windows, args.seed
        )
        rows += measure(oracle, windows, observed_mask, config, args.draws)
    n = args.num_positions
    text = "\n".join(
        [
            table(rows, n),
            "",
            f"n = {n}, d = {args.model_size}, {example_args.num_layers} layers, "
            f"{args.num_steps} training steps; held-out bits/char "
            f"{metadata['held_out_bits_random_order']:.3f} (random orders); "
            f"{args.num_windows} held-out windows x {args.draws} draws per method and span; "
            f"SamplerConfig({', '.join(f'{k}={v}' for k, v in knobs.items())}); "
            f"one draw per jitted call; {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} CPUs, {jax.devices()[0].device_kind}, jax {jax.__version__}.  "
            "kv-cache: its 'passes' are one prefill pass and one incremental step (a query row "
            "and an appended content row, O(n d) per layer) per free site.",
        ]
    )
    print("\n" + text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "code_infilling.txt"), "w") as file:
        file.write(text + "\n")
    write_csv(os.path.join(args.out, "code_infilling.csv"), rows)
    plot(rows, n, os.path.join(args.out, "code_infilling.png"))
    return rows


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    option = parser.add_argument
    option("--num-positions", type=int, default=256, help="n (as the example)")
    option("--model-size", type=int, default=64, help="width d (as the example)")
    option("--num-steps", type=int, default=900, help="training steps (example)")
    option("--spans", type=int, nargs="+", default=[64, 128, 256], help="free sites")
    option("--num-windows", type=int, default=3, help="held-out windows per span")
    option("--draws", type=int, default=8, help="draws per window and method")
    option("--seed", type=int, default=0, help="seed of the window choice")
    option("--cache-dir", default=None, help="checkpoint cache (example default)")
    option("--out", default=RESULTS, help="table, CSV, plot")
    for knob in KNOBS:
        option(f"--{knob.replace('_', '-')}", type=int, default=None, help="SamplerConfig knob")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
