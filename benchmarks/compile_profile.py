"""Where the engine's compile time goes: the compiled program of one case split by the part of
the engine that emitted each piece, with its trace, lowering and XLA compile seconds.

XLA:CPU compiles a program kernel by kernel (its fusion emitter, then LLVM).  The compile time
follows the size of the LLVM IR that XLA generates more than the number of kernels
(docs/benchmarks.md, "Compile time and restarts": 15% fewer kernels, 4.5% less IR, the same
compile time; 22% less IR, 10-15% less compile time).  This script compiles
``jax.jit(lambda keys: engine.run(process, keys, config))`` for one case of
``benchmarks/seconds.py`` and reads the optimized HLO module that XLA produced: every
instruction outside the fused computations and combiner regions is one kernel (a fusion, a
scatter, a while loop, ...), every instruction inside a fusion is part of its kernel's code.
Each is attributed, through the stack frames XLA keeps in the module's metadata, to

* the **part** of the scheduler that emitted it: the transition phases (``advance``), the
  admission of trials and draws (``admit``), the round's oracle calls (``query_round``), the
  root windows' verification (``verify_windows``), the trial reports and the rest of the
  micro-step (:mod:`numpyro_autospec.engine.scheduler`);
* the innermost **function** of the package on its stack (the oracle's rows, the answer
  checks, the per-draw counters, the pool's gathers and scatters, the key derivations...).

The table lists the parts with their kernels and HLO instructions, then the functions that
weigh most.  With ``--llvm-ir`` XLA also dumps the optimized LLVM IR of every kernel (into a
temporary directory, removed afterwards; the dump slows the compile), and the script adds the
IR's bytes per part and per origin: the package function, or ``"JAX random"`` for JAX's
random-number code (the threefry hash, key splits, uniform and Gumbel draws), which XLA:CPU
compiles as a loop of its own at every call site.  Counts and bytes do not depend on the
machine; the seconds do (compare within one run).

    .venv/bin/python benchmarks/compile_profile.py                       # cw-32, one draw
    .venv/bin/python benchmarks/compile_profile.py --case ising-1024 --draws 8
    .venv/bin/python benchmarks/compile_profile.py --no-validate          # without answer checks
    .venv/bin/python benchmarks/compile_profile.py --llvm-ir --case mlp-256   # with the IR

With ``--part`` the script compiles one part of the engine's loop on its own instead of the
whole run (the context and initial state that ``engine.run`` builds for the same keys), which
says what each part costs to compile: ``one_round`` (the transitions, then the queries),
``settle`` (the transitions' loop), ``query_round``, ``micro_step``, ``advance`` (the
transition phases) or ``admit``.  ``--set-form`` hides the oracle's block form (its
conditionals derived from ``log_marginals``), which takes the two block-scoring call sites
out of the program; with ``--config autospec:enumerate=0`` the enumeration's goes too:

    .venv/bin/python benchmarks/compile_profile.py --part query_round
    .venv/bin/python benchmarks/compile_profile.py --set-form --config autospec:enumerate=0
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import re
import shutil
import sys
import tempfile
import time

import jax

from numpyro_autospec.script_help import script_parser

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from block_forms import SetFormOnly  # noqa: E402  (benchmarks/ on the path first)
from rounds import sampler_config  # noqa: E402
from seconds import make_process  # noqa: E402

from numpyro_autospec.engine import Capacity, plan, run  # noqa: E402
from numpyro_autospec.engine.keys import engine_keys  # noqa: E402
from numpyro_autospec.engine.rounds import query_round  # noqa: E402
from numpyro_autospec.engine.scheduler import micro_step, one_round, settle  # noqa: E402
from numpyro_autospec.engine.state import initial_state, make_context  # noqa: E402
from numpyro_autospec.engine.transitions import advance  # noqa: E402
from numpyro_autospec.engine.trials import admit  # noqa: E402
from numpyro_autospec.processes import AnyOrderProcess  # noqa: E402

#: the functions of the scheduler's micro-step and round that a piece is attributed to
PARTS = (
    "query_round",
    "advance",
    "admit",
    "verify_windows",
    "report_trials",
    "resolve_waiting",
    "cancel_orphans",
    "complete_draws",
    "initial_state",
    "report_failure",
)
#: the parts ``--part`` compiles on their own, ``function(context, state)`` (``run``, the
#: default, compiles the whole ``engine.run``)
PART_FUNCTIONS = {
    "one_round": one_round,
    "settle": settle,
    "query_round": query_round,
    "micro_step": lambda context, state: micro_step(context, state)[0],
    "advance": lambda context, state: advance(context, state.pool)[0],
    "admit": lambda context, state: admit(context, state.pool, state).pool,
}
#: instructions that are not kernels of their own
NOT_KERNELS = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}
#: the package's source files, as named in the module's metadata
PACKAGE = re.compile(r"numpyro_autospec/(.+)$")


def numbered_section(hlo: str, name: str) -> dict[int, str]:
    """A numbered table of the HLO module's metadata (``FileNames``, ``FunctionNames``,
    ``FileLocations``, ``StackFrames``): ``id -> text``."""
    match = re.search(rf"^{name}\n((?:\d+ .*\n)+)", hlo, re.MULTILINE)
    if match is None:
        return {}
    rows = (line.split(" ", 1) for line in match.group(1).splitlines())
    return {int(number): text for number, text in rows}


class StackFrames:
    """The stack frames of an HLO module's metadata: ``frames(id)`` is the list of
    ``(file, function)`` of a stack frame id, innermost first."""

    def __init__(self, hlo: str):
        files = {k: v.strip('"') for k, v in numbered_section(hlo, "FileNames").items()}
        functions = {k: v.strip('"') for k, v in numbered_section(hlo, "FunctionNames").items()}
        self.locations = {}
        for number, text in numbered_section(hlo, "FileLocations").items():
            fields = dict(re.findall(r"(\w+)=(\d+)", text))
            self.locations[number] = (
                files[int(fields["file_name_id"])],
                functions[int(fields["function_name_id"])],
            )
        self.parents = {}
        for number, text in numbered_section(hlo, "StackFrames").items():
            fields = dict(re.findall(r"(\w+)=(\d+)", text))
            # a frame's parent is written as its id plus one (0: no parent)
            self.parents[number] = (
                int(fields["file_location_id"]),
                int(fields["parent_frame_id"]) - 1,
            )

    def frames(self, frame: int) -> list[tuple[str, str]]:
        out, seen = [], set()
        while frame in self.parents and frame not in seen:
            seen.add(frame)
            location, frame = self.parents[frame]
            out.append(self.locations[location])
        return out


def attribute(frames: list[tuple[str, str]]) -> tuple[str, str]:
    """``(part, function)`` of a piece from its stack, innermost first."""
    outermost_first = [function for _, function in reversed(frames)]
    part = next((name for name in outermost_first if name in PARTS), "other")
    inner = next(
        (
            f"{PACKAGE.search(file).group(1)}:{function}"
            for file, function in frames
            if PACKAGE.search(file) and not file.endswith("engine/scheduler.py")
        ),
        "other",
    )
    return part, inner


def profile(hlo: str) -> tuple[collections.Counter, collections.Counter, collections.Counter]:
    """Kernels per part, instructions per part and instructions per (part, function) of an
    optimized HLO module's text (``compiled.as_text()``)."""
    stacks = StackFrames(hlo)
    computations = re.split(r"\n(?=\S)", hlo)
    sizes = {text.split(" ", 1)[0]: text.count("\n") for text in computations}
    combiners = set(re.findall(r"to_apply=(%[\w.-]+)", hlo))
    kernels, instructions, functions = (collections.Counter() for _ in range(3))
    for text in computations:
        name = text.split(" ", 1)[0]
        if not name.startswith("%") or "fused" in name or name in combiners:
            continue
        for line in text.splitlines()[1:]:
            match = re.match(r"\s*(?:ROOT )?%\S+ = .*? ([a-z][\w-]*)\(", line)
            if match is None or match.group(1) in NOT_KERNELS:
                continue
            frame = re.search(r"stack_frame_id=(\d+)", line)
            part, function = attribute(stacks.frames(int(frame.group(1))) if frame else [])
            called = re.search(r"calls=(%[\w.-]+)", line)
            size = sizes.get(called.group(1), 1) if match.group(1) == "fusion" and called else 1
            kernels[part] += 1
            instructions[part] += size
            functions[(part, function)] += size
    return kernels, instructions, functions


#: the files of XLA:CPU's optimized LLVM IR, one per kernel, in an ``--xla_dump_to`` directory
IR_FILE = re.compile(
    r"\.jit__lambda\.(?:__compute_module_)?(.+?)(?:_computation)?(?:_kernel_module)?"
    r"\.ir-with-opt\.ll$"
)
#: JAX's random-number code (the threefry hash, key splits, uniform and Gumbel draws), as
#: named in the operations' names (the stack frames keep the package's frames only)
JAX_RANDOM = re.compile(r"jit\((?:_threefry\w*|_uniform|_gumbel|_shuffle|_bernoulli|_randint)\)")


def llvm_ir(hlo: str, directory: str) -> tuple[collections.Counter, collections.Counter, int]:
    """Bytes of optimized LLVM IR per part and per origin of the kernels XLA:CPU dumped into
    ``directory`` (``--xla_dump_to``), and the total.  A kernel's origin is ``"JAX random"``
    when it is JAX's random-number code (the hash and the draws), else the innermost package
    function, as for instructions.  A kernel not found in the module
    (comparators of sorts) is ``"other"``."""
    stacks = StackFrames(hlo)
    metadata = {
        name: (operation, int(frame))
        for name, operation, frame in re.findall(
            r'^\s*(?:ROOT )?%([\w.-]+) = .*?op_name="([^"]*)".*?stack_frame_id=(\d+)',
            hlo,
            re.MULTILINE,
        )
    }
    parts, origins, total = collections.Counter(), collections.Counter(), 0
    for name in os.listdir(directory):
        match = IR_FILE.search(name)
        if match is None:
            continue
        size = os.path.getsize(os.path.join(directory, name))
        operation, frame = metadata.get(match.group(1), ("", -1))
        part, function = attribute(stacks.frames(frame))
        if JAX_RANDOM.search(operation):
            function = "JAX random"
        parts[part] += size
        origins[function] += size
        total += size
    return parts, origins, total


def parse_args(argv=None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    parser.add_argument("--case", default="cw-32", help="a case of benchmarks/seconds.py")
    parser.add_argument("--draws", type=int, default=1, help="draws sharing the pool")
    parser.add_argument(
        "--config", default="autospec:", help="sampler configuration (rounds.py notation)"
    )
    parser.add_argument(
        "--no-validate",
        dest="validate",
        action="store_false",
        help="skip the checks of the oracle's answers (checked by default)",
    )
    parser.add_argument(
        "--llvm-ir",
        action="store_true",
        help="also measure the optimized LLVM IR of each kernel (XLA dumps it; slower compile)",
    )
    parser.add_argument(
        "--part", default="run", choices=["run", *sorted(PART_FUNCTIONS)], help="what is compiled"
    )
    parser.add_argument(
        "--set-form",
        action="store_true",
        help="the oracle without its block form (no block-scoring call sites)",
    )
    parser.add_argument("--top", type=int, default=15, help="functions listed")
    parser.add_argument(
        "--out", default=os.path.join(HERE, "results"), help="directory for the CSV"
    )
    return parser.parse_args(argv)


def main(args: argparse.Namespace) -> dict:
    dump = None
    if args.llvm_ir:
        # read when JAX starts its CPU backend, which nothing has done yet
        dump = tempfile.mkdtemp(prefix="compile_profile_")
        os.environ["XLA_FLAGS"] = " ".join(
            [os.environ.get("XLA_FLAGS", ""), f"--xla_dump_to={dump}"]
            + ["--xla_dump_hlo_module_re=jit__lambda"]
        ).strip()

    process = make_process(args.case)
    if args.set_form:
        if not isinstance(process, AnyOrderProcess):
            raise SystemExit(f"--set-form needs an any-order case, not {args.case!r}")
        process = AnyOrderProcess(
            SetFormOnly(process.oracle), process.num_positions, process.num_categories
        )
    config = sampler_config(args.config, process.num_steps)
    keys = jax.random.split(jax.random.PRNGKey(0), args.draws)
    if args.part == "run":
        function = jax.jit(lambda keys: run(process, keys, config, validate=args.validate))
        argument = keys
    else:
        wrapped = engine_keys(keys)
        sizes = plan(process, config, Capacity(), args.draws, wrapped[0])
        context = make_context(process, sizes, wrapped, validate=args.validate)
        argument = jax.jit(lambda: initial_state(context))()
        part = PART_FUNCTIONS[args.part]
        function = jax.jit(lambda state: part(context, state))
    start = time.perf_counter()
    traced = function.trace(argument)
    traced_at = time.perf_counter()
    lowered = traced.lower()
    lowered_at = time.perf_counter()
    cpu = time.process_time()
    compiled = lowered.compile()
    seconds = {
        "trace s": traced_at - start,
        "lower s": lowered_at - traced_at,
        "XLA compile s": time.perf_counter() - lowered_at,
        "XLA compile CPU s": time.process_time() - cpu,
    }
    kernels, instructions, functions = profile(compiled.as_text())
    total_kernels, total_instructions = sum(kernels.values()), sum(instructions.values())
    print(
        f"{args.case}, {args.draws} draw(s), {args.config}, validate={args.validate}, "
        f"part {args.part}{', set form' if args.set_form else ''}: "
        + ", ".join(f"{name} {value:.2f}" for name, value in seconds.items())
    )
    print(f"\n{'part':<18}{'kernels':>9}{'instructions':>14}{'share':>8}")
    for part, size in instructions.most_common():
        print(f"{part:<18}{kernels[part]:>9}{size:>14}{size / total_instructions:>8.1%}")
    print(f"{'total':<18}{total_kernels:>9}{total_instructions:>14}")
    print(f"\n{'part':<18}{'function':<62}{'instructions':>13}")
    for (part, function), size in functions.most_common(args.top):
        print(f"{part:<18}{function:<62}{size:>13}")

    os.makedirs(args.out, exist_ok=True)
    ir = None
    if dump is not None:
        ir_parts, ir_origins, ir_total = llvm_ir(compiled.as_text(), dump)
        shutil.rmtree(dump, ignore_errors=True)
        ir = {"parts": ir_parts, "origins": ir_origins, "total": ir_total}
        print(f"\n{'part':<18}{'LLVM IR KiB':>12}{'share':>8}")
        for part, size in ir_parts.most_common():
            print(f"{part:<18}{size / 1024:>12.0f}{size / ir_total:>8.1%}")
        print(f"{'total':<18}{ir_total / 1024:>12.0f}")
        print(f"\n{'origin':<62}{'LLVM IR KiB':>12}{'share':>8}")
        for origin, size in ir_origins.most_common(args.top):
            print(f"{origin:<62}{size / 1024:>12.0f}{size / ir_total:>8.1%}")
        ir_path = os.path.join(args.out, f"compile_profile_{args.case}x{args.draws}_llvm_ir.csv")
        with open(ir_path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["origin", "llvm_ir_bytes"])
            writer.writerows(ir_origins.most_common())
        print(f"\nCSV saved to {ir_path}")

    suffix = "" if args.validate else "_no-validate"
    suffix += "" if args.part == "run" else f"_{args.part}"
    suffix += "_set-form" if args.set_form else ""
    path = os.path.join(args.out, f"compile_profile_{args.case}x{args.draws}{suffix}.csv")
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["part", "function", "instructions"])
        for (part, function), size in functions.most_common():
            writer.writerow([part, function, size])
    print(f"\nCSV saved to {path}")
    return {
        "seconds": seconds,
        "kernels": kernels,
        "instructions": instructions,
        "llvm_ir": ir,
        "csv": path,
    }


if __name__ == "__main__":
    main(parse_args())
