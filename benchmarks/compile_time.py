"""Seconds to the first draw: one-draw ``MCMC(AutospecKernel(model)).run`` from a fresh process,
split into XLA compilation and the rest (tracing, lowering, inspection, the draw), then a
restart from ``last_state``, a second ``MCMC`` of the same model, and the engine alone.

Cases (each in its own subprocess, so that nothing is compiled before it):

* ``cw-32``, ``cw-1024``: a Curie-Weiss ``AnyOrderAR`` site on ``{0, 1}^n``;
* ``diffusion-64``: a ``StochasticLocalization`` site, the 8x8 digits point cloud on
  ``default_times(64)`` (docs/diffusion.md);
* ``engine-cw-64x100``: ``jax.jit(lambda k: engine.run(process, k, SamplerConfig()))`` on
  Curie-Weiss n = 64 with 100 keys, trace, lower and compile timed separately.

MCMC runs use NumPyro's defaults (``progress_bar=True``, its output discarded); the restart
is ``mcmc.post_warmup_state = mcmc.last_state; mcmc.run(mcmc.post_warmup_state.rng_key)``,
timed with the bar (NumPyro reuses its compiled loop) and without it (NumPyro re-jits its loop
when ``progress_bar=False``).  ``new arguments`` is a second run, with the bar, of a model that
takes its parameter as an argument (``jit_model_args=True``: Curie-Weiss's ``beta``, the
diffusion's time grid) with a new value: the model is inspected again, nothing is compiled.
The two ``cache`` columns repeat a one-draw run without the bar, and its restart, in a fresh
process whose JAX persistent compilation cache (``jax_compilation_cache_dir``) an identical
earlier process filled: the kernel's program has no host callback, so JAX keeps it.
``--split-batch-bytes -1`` splits every query batch down to the smallest bucket size (the plan
before ``SPLIT_BATCH_BYTES``), for comparison; ``--max-buckets 1`` runs every model with
``Capacity(max_buckets=1)``, one compiled size per oracle call site (the quickest compilation).

XLA compiles a program's kernels on every core the process may run on, so the seconds depend
on the cores as much as on the program: ``--cores 1 2`` repeats each case with its
subprocesses pinned (``os.sched_setaffinity``) to the first 1, then 2, of this process's cores.

    .venv/bin/python benchmarks/compile_time.py                       # table, CSV and plot
    .venv/bin/python benchmarks/compile_time.py --split-batch-bytes -1 --label split-all
    .venv/bin/python benchmarks/compile_time.py --max-buckets 1 --label one-size
    .venv/bin/python benchmarks/compile_time.py --cases cw-32 cw-1024 --cores 1 2 --label cores

Seconds are machine- and load-dependent: compare the ratios of one run (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time

from csv_tables import write_csv

from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ("cw-32", "cw-1024", "diffusion-64", "engine-cw-64x100")
COLUMNS = (
    "case",
    "cores",
    "first draw s",
    "XLA compile s",
    "restart s",
    "restart, no bar s",
    "new arguments s",
    "new arguments, XLA compile s",
    "new MCMC s",
    "new process, cache s",
    "restart, no bar, cache s",
    "buckets",
)


class Compilations:
    """Durations of the XLA compilations that end while it is active (``jax.monitoring``)."""

    def __init__(self):
        from jax import monitoring

        from numpyro_autospec.numpyro.progress import BACKEND_COMPILE_EVENT

        self.event, self.durations = BACKEND_COMPILE_EVENT, []
        monitoring.register_event_duration_secs_listener(self.record)

    def record(self, event, duration, **kwargs):
        if event == self.event:
            self.durations.append(duration)

    def take(self) -> float:
        total, self.durations = sum(self.durations), []
        return total


def make_distribution(case: str, parameter=None):
    """The case's distribution; ``parameter`` (a model argument, or ``None`` for the default)
    is Curie-Weiss's ``beta`` or the diffusion's time grid."""
    from numpyro_autospec import AnyOrderAR, StochasticLocalization
    from numpyro_autospec.oracles import CurieWeissOracle

    family, size = case.split("-")
    n = int(size)
    if family == "cw":
        return AnyOrderAR(CurieWeissOracle(n, beta=1.0 if parameter is None else parameter), n, 2)
    from numpyro_autospec.denoisers import digits_point_cloud
    from numpyro_autospec.processes.time_grids import default_times

    times = default_times(n) if parameter is None else parameter
    return StochasticLocalization(digits_point_cloud(), dim=64, times=times)


def make_model(case: str):
    """``(model, distribution)``: a model with one site ``x`` of ``distribution``."""
    import numpyro

    distribution = make_distribution(case)

    def model():
        numpyro.sample("x", distribution)

    return model, distribution


def new_arguments_seconds(case: str, compilations) -> tuple[float, float]:
    """A one-draw ``MCMC(..., jit_model_args=True)`` whose model takes its parameter (``beta``,
    the time grid) as an argument: after a first run, the seconds of a run with a new value
    and the XLA compile seconds during it (none: the arguments are data)."""
    import jax
    import numpy as np
    import numpyro
    from numpyro.infer import MCMC

    from numpyro_autospec import AutospecKernel
    from numpyro_autospec.processes.time_grids import default_times

    def model(parameter):
        numpyro.sample("x", make_distribution(case, parameter))

    if case.startswith("cw"):
        first, second = np.float32(1.0), np.float32(0.8)
    else:
        n = int(case.split("-")[1])
        first, second = (np.asarray(default_times(n, end), np.float32) for end in (200.0, 100.0))
    mcmc = MCMC(
        AutospecKernel(model, capacity=capacity()), num_warmup=0, num_samples=1, jit_model_args=True
    )
    with contextlib.redirect_stderr(io.StringIO()):
        mcmc.run(jax.random.PRNGKey(0), first)
        jax.block_until_ready(mcmc.get_samples())
        compilations.take()
        start = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(1), second)
        jax.block_until_ready(mcmc.get_samples())
    return time.perf_counter() - start, compilations.take()


#: ``Capacity(max_buckets=...)`` of every kernel and engine run (``--max-buckets``)
MAX_BUCKETS: list[int | None] = [None]


def capacity():
    """The capacity every measured run uses: the default, with ``--max-buckets``."""
    from numpyro_autospec.engine.plan import Capacity

    return Capacity(max_buckets=MAX_BUCKETS[0])


def bucket_summary(process, draws: int) -> str:
    import jax

    from numpyro_autospec.config import SamplerConfig
    from numpyro_autospec.engine.plan import plan

    key = jax.random.key_data(jax.random.PRNGKey(0))
    sizes = plan(process, SamplerConfig(), capacity(), draws, key)
    shapes = (sizes.lane_buckets, sizes.query_buckets, sizes.block_buckets, sizes.window_buckets)
    return " ".join(str(len(shape)) for shape in shapes)


def measure_mcmc(case: str) -> dict:
    import jax
    from numpyro.infer import MCMC

    from numpyro_autospec import AutospecKernel

    compilations = Compilations()
    model, distribution = make_model(case)

    def timed(action) -> tuple[float, float]:
        start = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            action()
        return time.perf_counter() - start, compilations.take()

    def restart(mcmc):
        mcmc.post_warmup_state = mcmc.last_state
        mcmc.run(mcmc.post_warmup_state.rng_key)
        jax.block_until_ready(mcmc.get_samples())

    def fresh(progress_bar=True):
        mcmc = MCMC(
            AutospecKernel(model, capacity=capacity()),
            num_warmup=0,
            num_samples=1,
            progress_bar=progress_bar,
        )
        mcmc.run(jax.random.PRNGKey(0))
        jax.block_until_ready(mcmc.get_samples())
        return mcmc

    mcmcs = []
    first, compile_seconds = timed(lambda: mcmcs.append(fresh()))
    restart_seconds, _ = timed(lambda: restart(mcmcs[0]))
    new_seconds, _ = timed(fresh)
    quiet = fresh(progress_bar=False)
    compilations.take()
    quiet_restart, _ = timed(lambda: restart(quiet))
    arguments_seconds, arguments_compile = new_arguments_seconds(case, compilations)
    process = distribution.make_process("x")
    return {
        "case": case,
        "first draw s": first,
        "XLA compile s": compile_seconds,
        "restart s": restart_seconds,
        "restart, no bar s": quiet_restart,
        "new arguments s": arguments_seconds,
        "new arguments, XLA compile s": arguments_compile,
        "new MCMC s": new_seconds,
        "buckets": bucket_summary(process, 1),
    }


def measure_cached(case: str, cache_dir: str) -> dict:
    """A one-draw ``MCMC`` without progress bar, then a restart, in a process whose JAX
    persistent compilation cache is ``cache_dir`` (run twice: the second run finds the
    programs the first one wrote)."""
    import jax
    from numpyro.infer import MCMC

    from numpyro_autospec import AutospecKernel

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    model, _ = make_model(case)
    start = time.perf_counter()
    mcmc = MCMC(
        AutospecKernel(model, capacity=capacity()), num_warmup=0, num_samples=1, progress_bar=False
    )
    mcmc.run(jax.random.PRNGKey(0))
    jax.block_until_ready(mcmc.get_samples())
    first = time.perf_counter() - start
    start = time.perf_counter()
    mcmc.post_warmup_state = mcmc.last_state
    mcmc.run(mcmc.post_warmup_state.rng_key)
    jax.block_until_ready(mcmc.get_samples())
    return {"new process, cache s": first, "restart, no bar, cache s": time.perf_counter() - start}


def measure_engine(case: str) -> dict:
    import jax

    from numpyro_autospec.config import SamplerConfig
    from numpyro_autospec.engine import run
    from numpyro_autospec.oracles import CurieWeissOracle
    from numpyro_autospec.processes import AnyOrderProcess

    process = AnyOrderProcess(CurieWeissOracle(64, beta=1.0), 64, 2)
    keys = jax.random.split(jax.random.PRNGKey(0), 100)
    function = jax.jit(lambda keys: run(process, keys, SamplerConfig(), capacity()))
    start = time.perf_counter()
    traced = function.trace(keys)
    lowered = traced.lower()
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    compiled_at = time.perf_counter()
    jax.block_until_ready(compiled(keys))
    drawn_at = time.perf_counter()
    return {
        "case": case,
        "first draw s": drawn_at - start,
        "XLA compile s": compiled_at - lowered_at,
        "restart s": float("nan"),
        "restart, no bar s": float("nan"),
        "new arguments s": float("nan"),
        "new arguments, XLA compile s": float("nan"),
        "new MCMC s": float("nan"),
        "new process, cache s": float("nan"),
        "restart, no bar, cache s": float("nan"),
        "buckets": bucket_summary(process, 100),
    }


def measure(case: str, split_batch_bytes: int | None, max_buckets: int | None = None) -> dict:
    MAX_BUCKETS[0] = max_buckets
    if split_batch_bytes is not None:
        import importlib

        buckets_module = importlib.import_module("numpyro_autospec.engine.buckets")
        buckets_module.SPLIT_BATCH_BYTES = split_batch_bytes
    return measure_engine(case) if case.startswith("engine") else measure_mcmc(case)


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [row[c] if isinstance(row[c], str) else f"{row[c]:.2f}" for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 1.5 + 0.45 * len(rows)))
    names = [f"{row['case']}, {row['cores']} cores" for row in rows]
    compile_seconds = [row["XLA compile s"] for row in rows]
    rest = [row["first draw s"] - row["XLA compile s"] for row in rows]
    axes.barh(names, compile_seconds, label="XLA compilation")
    axes.barh(names, rest, left=compile_seconds, label="tracing, lowering, inspection, draw")
    axes.axvline(5.0, color="black", linestyle=":", label="goal: 5 s")
    axes.set_xlabel("seconds to the first draw (fresh process)")
    axes.invert_yaxis()
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def last_json_line(command: list[str], cores: list[int]) -> dict:
    """Run ``command`` on ``cores`` only and parse the last line it prints."""
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(args: argparse.Namespace) -> None:
    if args.measure_cached:
        MAX_BUCKETS[0] = args.max_buckets
        print(json.dumps(measure_cached(args.measure_cached, args.cache_dir)))
        return
    if args.measure:
        print(json.dumps(measure(args.measure, args.split_batch_bytes, args.max_buckets)))
        return
    available = sorted(os.sched_getaffinity(0))
    counts = args.cores or [len(available)]
    if max(counts) > len(available) or min(counts) < 1:
        raise SystemExit(f"--cores: between 1 and {len(available)} on this machine, got {counts}")
    rows = []
    for case in args.cases:
        for count in counts:
            cores = available[:count]
            command = [sys.executable, os.path.abspath(__file__), "--measure", case]
            if args.split_batch_bytes is not None:
                command += ["--split-batch-bytes", str(args.split_batch_bytes)]
            if args.max_buckets is not None:
                command += ["--max-buckets", str(args.max_buckets)]
            rows.append({**last_json_line(command, cores), "cores": str(count)})
            if not case.startswith("engine"):
                with tempfile.TemporaryDirectory() as cache_dir:
                    cached = [sys.executable, os.path.abspath(__file__), "--measure-cached", case]
                    cached += ["--cache-dir", cache_dir]
                    if args.max_buckets is not None:
                        cached += ["--max-buckets", str(args.max_buckets)]
                    last_json_line(cached, cores)  # fills the cache
                    rows[-1].update(last_json_line(cached, cores))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    stem = os.path.join(args.output, "compile_time" + (f"_{args.label}" if args.label else ""))
    write_csv(stem + ".csv", rows, COLUMNS)
    plot(rows, stem + ".png")
    print(f"\nwrote {stem}.csv and {stem}.png")


if __name__ == "__main__":
    parser = script_parser(__doc__)
    parser.add_argument(
        "--cases", nargs="+", default=list(CASES), choices=CASES, help="models to compile"
    )
    parser.add_argument(
        "--split-batch-bytes",
        type=int,
        default=None,
        help="override engine.buckets.SPLIT_BATCH_BYTES (-1: split every batch; None: as shipped)",
    )
    parser.add_argument(
        "--max-buckets",
        type=int,
        default=None,
        help="Capacity(max_buckets=...) of every run (1: one compiled size per call site)",
    )
    parser.add_argument(
        "--cores",
        nargs="+",
        type=int,
        default=None,
        help="pin each case to the first K of this process's cores, once per K; None: all",
    )
    parser.add_argument("--label", default="", help="suffix of the output files")
    parser.add_argument(
        "--output",
        default=os.path.join(HERE, "results"),
        help="directory of the table, CSV and plot",
    )
    parser.add_argument("--measure", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--measure-cached", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    main(parser.parse_args())
