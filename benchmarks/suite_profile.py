"""Where the test suite's time goes: every XLA compilation of a whole-suite run, with the test
that caused it, against the seconds each test file took.

The suite's time (``.ci/run``, two pytest-xdist workers on this machine's two cores) is mostly
XLA compilation: the engine's program for each oracle type, shape and configuration a test
draws with, the reference sampler's small programs, and the one-operation programs that
JAX compiles for every operation run eagerly (``jnp.ones(3) + 1`` in a docstring example:
tens of milliseconds each on a CPU).  This script runs the suite with itself loaded as a
pytest plugin (``-p suite_profile``) and an empty compilation cache (as a fresh clone has),
which wraps JAX's backend compilation
(``jax._src.compiler.backend_compile_and_load``, a private function: the plugin only times
it) and writes one JSON line per compilation; then it prints

* the compilations by size: engine-sized programs (more than 4 s), middle (0.5-4 s), tiny
  (at most 0.5 s, mostly eager operations), with their seconds;
* per test file: its seconds (``--junitxml``), its compilations and their seconds;
* the programs compiled more than once (the same module text, names aside).

Compilations in the subprocesses that some tests start (the documentation pages, the scripts'
``--help``, several host devices) are not seen; their files' seconds are.

    .venv/bin/python benchmarks/suite_profile.py --run              # the whole suite, ~30 min
    .venv/bin/python benchmarks/suite_profile.py --run --tests tests/oracles   # a part
    .venv/bin/python benchmarks/suite_profile.py                    # the table of the last run

The table is printed and saved to ``benchmarks/results/suite_profile.md``; the logs stay in
``.pytest_cache/suite_profile``.
"""

from __future__ import annotations

import collections
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
from numpyro_autospec.script_help import script_parser  # noqa: E402

#: the environment variable naming the plugin's output directory
DIRECTORY = "SUITE_PROFILE_DIR"
#: seconds that separate engine-sized, middle and tiny compilations
BIG, TINY = 4.0, 0.5

_current_test: list[str | None] = [None]
_log = None


# -- the pytest plugin (loaded in every worker by ``-p suite_profile``) -------------------
def pytest_configure(config) -> None:
    global _log
    directory = os.environ.get(DIRECTORY)
    if not directory or _log is not None:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _log = open(os.path.join(directory, f"compiles_{worker}.jsonl"), "a")  # noqa: SIM115
    from jax._src import compiler

    compile_and_load = compiler.backend_compile_and_load

    def timed(backend, module, executable_devices, options, host_callbacks):
        start = time.perf_counter()
        executable = compile_and_load(backend, module, executable_devices, options, host_callbacks)
        seconds = time.perf_counter() - start
        name = str(module.operation.attributes["sym_name"]).strip('"')
        text = module.operation.get_asm(enable_debug_info=False)
        body = text.replace(f"@{name}", "@module")  # the same program under another name
        record = {
            "test": _current_test[0],
            "module": name,
            "seconds": round(seconds, 4),
            "lines": text.count("\n"),
            "callbacks": len(host_callbacks),
            "hash": hashlib.sha1(body.encode()).hexdigest()[:16],
        }
        _log.write(json.dumps(record) + "\n")
        _log.flush()
        return executable

    compiler.backend_compile_and_load = timed


def pytest_runtest_logstart(nodeid, location) -> None:
    _current_test[0] = nodeid


def pytest_runtest_logfinish(nodeid, location) -> None:
    _current_test[0] = None


# -- the report ---------------------------------------------------------------------------
def file_of(test: str | None) -> str:
    return (test or "(between tests)").split("::")[0]


def report(directory: str, top: int) -> list[str]:
    """The report's lines, from the logs and the JUnit XML in ``directory``."""
    records = []
    for path in sorted(glob.glob(os.path.join(directory, "compiles_*.jsonl"))):
        with open(path) as log:
            records += [json.loads(line) for line in log]
    junit = os.path.join(directory, "junit.xml")
    file_seconds: collections.Counter = collections.Counter()
    if os.path.exists(junit):
        for case in ElementTree.parse(junit).iter("testcase"):
            path = case.get("classname", "").replace(".", "/") + ".py"
            file_seconds[re.sub(r"/Test\w+\.py$", ".py", path)] += float(case.get("time", 0))
    total = sum(file_seconds.values())
    seconds = sum(r["seconds"] for r in records)
    lines = [
        f"test seconds (both workers) {total:.0f}; compilations {len(records)}, {seconds:.0f} s"
    ]
    lines.append("\n| compilations | number | seconds | share of the test seconds |")
    lines.append("|---|---|---|---|")
    for label, keep in (
        (f"engine-sized (> {BIG:g} s)", lambda s: s > BIG),
        (f"middle ({TINY:g}-{BIG:g} s)", lambda s: TINY < s <= BIG),
        (f"tiny (<= {TINY:g} s)", lambda s: s <= TINY),
    ):
        chosen = [r["seconds"] for r in records if keep(r["seconds"])]
        share = sum(chosen) / total if total else float("nan")
        lines.append(f"| {label} | {len(chosen)} | {sum(chosen):.0f} | {share:.0%} |")

    count: collections.Counter = collections.Counter()
    compile_seconds: collections.Counter = collections.Counter()
    engine_sized: collections.Counter = collections.Counter()
    tiny: collections.Counter = collections.Counter()
    for r in records:
        name = file_of(r["test"])
        count[name] += 1
        compile_seconds[name] += r["seconds"]
        engine_sized[name] += r["seconds"] > BIG
        tiny[name] += r["seconds"] if r["seconds"] <= TINY else 0.0
    lines.append("\n| file | test s | compilations | compile s | engine-sized | tiny s |")
    lines.append("|---|---|---|---|---|---|")
    for name, _ in (file_seconds or compile_seconds).most_common(top):
        lines.append(
            f"| {name} | {file_seconds[name]:.0f} | {count[name]} | {compile_seconds[name]:.0f} "
            f"| {engine_sized[name]} | {tiny[name]:.0f} |"
        )

    by_hash = collections.defaultdict(list)
    for r in records:
        by_hash[r["hash"]].append(r)
    repeated = sorted(
        (group for group in by_hash.values() if len(group) > 1),
        key=lambda group: -sum(r["seconds"] for r in group[1:]),
    )
    again = sum(r["seconds"] for group in repeated for r in group[1:])
    lines.append(
        f"\nprograms compiled more than once: {len(repeated)}, {again:.0f} s after the first"
    )
    for group in repeated[:5]:
        tests = sorted({file_of(r["test"]) for r in group})
        lines.append(f"  {group[0]['module']} x{len(group)} ({group[0]['lines']} lines): {tests}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = script_parser(__doc__)
    parser.add_argument("--run", action="store_true", help="run the suite first (else: report)")
    parser.add_argument("--tests", nargs="*", default=[], help="test paths (none: the whole suite)")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument(
        "--dir",
        default=os.path.join(ROOT, ".pytest_cache", "suite_profile"),
        help="directory of the run's logs (one JSON line per compilation) and JUnit XML",
    )
    parser.add_argument(
        "--out", default=os.path.join(HERE, "results"), help="directory for suite_profile.md"
    )
    parser.add_argument("--top", type=int, default=25, help="test files listed")
    args = parser.parse_args(argv)
    if args.run:
        os.makedirs(args.dir, exist_ok=True)
        for old in glob.glob(os.path.join(args.dir, "compiles_*.jsonl")):
            os.remove(old)
        env = dict(os.environ, **{DIRECTORY: os.path.abspath(args.dir)})
        # an empty persistent compilation cache, as in a fresh clone (the suite's own cache
        # would load the programs of earlier runs instead of compiling them)
        cache = os.path.join(os.path.abspath(args.dir), "jax-compilation-cache")
        shutil.rmtree(cache, ignore_errors=True)
        env["JAX_COMPILATION_CACHE_DIR"] = cache
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "pytest", "-q", "-n", str(args.workers)]
        command += ["-p", "suite_profile", "--junitxml", os.path.join(args.dir, "junit.xml")]
        start = time.perf_counter()
        subprocess.run(command + args.tests, cwd=ROOT, env=env, check=False)
        print(f"suite run: {time.perf_counter() - start:.0f} s")
    text = "\n".join(report(args.dir, args.top)) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "suite_profile.md"), "w") as file:
        file.write(text)


if __name__ == "__main__":
    main()
