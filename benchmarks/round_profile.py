"""What a round executes: the XLA kernels one ``engine.run`` draw runs on this backend, counted
from a JAX profiler trace and grouped by the JAX function that emitted them.

On a CPU, a round whose oracle is cheap (the Ising chain, Curie-Weiss at small ``n``) costs
what its kernels cost to launch, not what they compute: XLA's thunk runtime executes the
compiled program kernel by kernel, and each kernel has a fixed cost whatever its size.  This
script measures that composition on the engine that ships:

1. one draw of a ``benchmarks/seconds.py`` case, jitted and compiled, then timed without the
   profiler (best of ``--repeats`` calls; the draw is the same every time);
2. the same draw under ``jax.profiler.trace`` (a Perfetto trace): every executed kernel, and
   its HLO instruction's ``op_name`` metadata from the compiled program's text;
3. a table of executed kernels per round by group: the **random hash** (``threefry2x32``
   behind every ``jax.random`` call), the **oracle** (functions named ``*log_conditionals``
   or ``*log_marginals``), **copies** XLA inserts for loop-carried buffers, gathers and
   scatters of the pool, and the rest, each with the innermost JAX functions that emitted
   most of its kernels.

    .venv/bin/python benchmarks/round_profile.py --case ising-1024
    .venv/bin/python benchmarks/round_profile.py --case cw-4096 --config autospec:leaf=2
    .venv/bin/python benchmarks/round_profile.py --case ising-1024 --unrolled-threefry

``--unrolled-threefry`` lowers the hash on the CPU as JAX lowers it elsewhere, unrolled
instead of in a five-step ``fori_loop`` (the lowering upstream JAX switched the CPU to in
jax-ml/jax#37872), in this benchmark's process only: the same bits, fewer kernels.  The
package itself leaves JAX's lowering alone.

The profiler slows every kernel by a fixed amount, so the counts are exact and the durations
are not: the unprofiled seconds per round divided by the kernels per round give the mean cost
of one executed kernel.  A second table (``--origins``) shares the profiled kernel time out
by the package function that emitted each kernel (the innermost two frames of the package in
the stack XLA keeps with each instruction): where a round's time goes when its kernels are
large (a diffusion path), read as shares, not seconds.

    .venv/bin/python benchmarks/round_profile.py --case digits-1024 --origins
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time

import jax
import numpy as np

from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compile_profile import PACKAGE, StackFrames  # noqa: E402  (benchmarks/ on the path first)
from rounds import sampler_config  # noqa: E402
from seconds import CASES, make_process  # noqa: E402

#: JAX functions whose kernels are the random hash (``jax.random`` lowers to threefry2x32)
RANDOM = re.compile(r"threefry|_uniform|_gumbel|_shuffle|random_bits|_bernoulli|_categorical")
#: JAX functions whose kernels are the oracle's
ORACLE = re.compile(r"log_conditionals|log_marginals")
#: trace events that are not kernels (the runtime's own spans, loops and branches)
NOT_KERNELS = re.compile(
    r"^(\$|end:|ThunkExecutor|ThreadpoolListener|PjitFunction|CommonPjRt|ExecuteReplicated"
    r"|(while|cond|call|conditional)(\.\d+)?$)"
)
INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = \S+ (\w[\w\-]*)\(")
COMPUTATION = re.compile(r"^(?:ENTRY )?%([\w.\-]+) .*\{$")
OP_NAME = re.compile(r'op_name="([^"]*)"')


def instructions(hlo_text: str) -> dict[str, tuple[str, str]]:
    """``name -> (opcode, op_name)`` of every instruction of a compiled program's HLO text;
    an instruction without metadata (XLA's own copies) takes the most common ``op_name`` of
    its computation."""
    found, computation, members = {}, None, collections.defaultdict(collections.Counter)
    for line in hlo_text.splitlines():
        header = COMPUTATION.match(line)
        if header:
            computation = header.group(1)
            continue
        match = INSTRUCTION.match(line)
        if match and computation:
            op_name = OP_NAME.search(line)
            op_name = op_name.group(1) if op_name else ""
            found[match.group(1)] = (match.group(2), op_name, computation)
            if op_name:
                members[computation][op_name] += 1
    result = {}
    for name, (opcode, op_name, computation) in found.items():
        if not op_name and members[computation]:
            op_name = members[computation].most_common(1)[0][0]
        result[name] = (opcode, op_name)
    return result


def innermost_function(op_name: str) -> str:
    """The innermost ``jit(...)`` function of an ``op_name`` path, or ``(engine)``."""
    functions = re.findall(r"jit\(([^)]*)\)", op_name)
    functions = [f for f in functions if f != "<lambda>"]
    return functions[-1] if functions else "(engine)"


def group(opcode: str, op_name: str) -> str:
    if RANDOM.search(op_name):
        return "random hash"
    if ORACLE.search(op_name):
        return "oracle"
    if opcode == "copy":
        return "copies"
    if "gather" in opcode or op_name.rsplit("/", 1)[-1] in ("gather", "dynamic_slice"):
        return "gathers"
    if "scatter" in opcode or op_name.rsplit("/", 1)[-1] in ("scatter", "scatter-add"):
        return "scatters"
    return "other"


def executed_kernels(trace_dir: str) -> tuple[collections.Counter, collections.Counter]:
    """Executed kernels by name from the Perfetto trace under ``trace_dir``: how many times
    each ran, and the microseconds it took in all."""
    (path,) = glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True)
    with gzip.open(path) as file:
        data = json.load(file)
    events = data["traceEvents"] if isinstance(data, dict) else data
    counts, durations = collections.Counter(), collections.Counter()
    for event in events:
        if event.get("ph") == "X" and not NOT_KERNELS.match(event["name"]):
            counts[event["name"]] += 1
            durations[event["name"]] += event.get("dur", 0)
    return counts, durations


def origins(hlo_text: str, depth: int = 2) -> dict[str, str]:
    """``instruction name -> origin``: the innermost ``depth`` package functions of the stack
    frame XLA keeps with the instruction (``"(no package frame)"`` without one)."""
    stacks = StackFrames(hlo_text)
    found = {}
    for line in hlo_text.splitlines():
        match = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = .*?stack_frame_id=(\d+)", line)
        if match:
            frames = [
                f"{PACKAGE.search(file).group(1)}:{function}"
                for file, function in stacks.frames(int(match.group(2)))
                if PACKAGE.search(file)
            ]
            found[match.group(1)] = " < ".join(frames[:depth]) or "(no package frame)"
    return found


def unroll_threefry_on_cpu() -> None:
    """Register JAX's unrolled threefry2x32 lowering for the CPU in this process (private
    JAX API: the rule JAX uses on other platforms)."""
    from jax._src.interpreters import mlir
    from jax._src.random import threefry2x32

    mlir.register_lowering(
        threefry2x32.threefry2x32_p, threefry2x32._threefry2x32_lowering_rule, platform="cpu"
    )


def profile(case: str, config: str, seed: int, repeats: int) -> dict:
    from numpyro_autospec.engine import run

    process = make_process(case)
    engine_config = sampler_config(config, process.num_steps)
    key = jax.random.PRNGKey(seed)
    compiled = jax.jit(lambda k: run(process, k[None], engine_config)).lower(key).compile()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        samples = jax.block_until_ready(compiled(key))
        seconds.append(time.perf_counter() - start)
    names = instructions(compiled.as_text())
    with tempfile.TemporaryDirectory() as trace_dir:
        jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
        jax.block_until_ready(compiled(key))
        jax.profiler.stop_trace()
        kernels, durations = executed_kernels(trace_dir)
    text = compiled.as_text()
    by_origin, origin_of = collections.Counter(), origins(text)
    for name, microseconds in durations.items():
        by_origin[origin_of.get(name, "(no package frame)")] += microseconds
    groups, functions = collections.Counter(), collections.defaultdict(collections.Counter)
    for name, count in kernels.items():
        opcode, op_name = names.get(name, ("?", ""))
        label = group(opcode, op_name)
        groups[label] += count
        functions[label][innermost_function(op_name)] += count
    return {
        "case": case,
        "config": config,
        "rounds": int(np.asarray(samples.rounds)[0]),
        "seconds": min(seconds),
        "kernels": sum(groups.values()),
        "groups": groups,
        "functions": functions,
        "origins": by_origin,
    }


def table(result: dict) -> str:
    rounds, kernels = result["rounds"], result["kernels"]
    lines = [
        f"{result['case']} ({result['config']}): {rounds} rounds, "
        f"{result['seconds'] * 1e3:.2f} ms per draw without the profiler, "
        f"{kernels} kernels executed ({kernels / rounds:.0f} per round, "
        f"{result['seconds'] / kernels * 1e6:.2f} us per kernel on average)",
        "",
        "| group | kernels per round | share | most kernels from |",
        "|---|---|---|---|",
    ]
    for label, count in result["groups"].most_common():
        top = ", ".join(
            f"{name} {n / rounds:.0f}" for name, n in result["functions"][label].most_common(3)
        )
        lines.append(f"| {label} | {count / rounds:.0f} | {count / kernels:.0%} | {top} |")
    return "\n".join(lines)


def origin_table(result: dict, rows: int = 15) -> str:
    """The profiled kernel time by origin, largest first (shares of the profiled time)."""
    total = sum(result["origins"].values())
    lines = [
        "| share of kernel time | origin (innermost package functions) |",
        "|---|---|",
    ]
    for origin, microseconds in result["origins"].most_common(rows):
        lines.append(f"| {microseconds / total:.0%} | `{origin}` |")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> None:
    if args.unrolled_threefry:
        unroll_threefry_on_cpu()
    result = profile(args.case, args.config, args.seed, args.repeats)
    if args.unrolled_threefry:
        result["config"] += " with the hash unrolled"
    print(table(result))
    if args.origins:
        print()
        print(origin_table(result))


if __name__ == "__main__":
    parser = script_parser(__doc__)
    parser.add_argument("--case", default="ising-1024", choices=CASES, help="a seconds.py case")
    parser.add_argument(
        "--config", default="autospec:", help="engine config in benchmarks/rounds.py's notation"
    )
    parser.add_argument("--seed", type=int, default=1, help="the draw's key, PRNGKey(seed)")
    parser.add_argument("--repeats", type=int, default=5, help="unprofiled calls timed")
    parser.add_argument(
        "--unrolled-threefry",
        action="store_true",
        help="lower jax.random's hash unrolled on the CPU in this process (jax-ml/jax#37872)",
    )
    parser.add_argument(
        "--origins",
        action="store_true",
        help="also share the profiled kernel time out by the package function behind it",
    )
    main(parser.parse_args())
