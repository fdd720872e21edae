"""Suite-wide settings: strict JAX, CPU platform, one host device, a fixed Hypothesis profile.

Pytest imports this file before any test module (in every pytest-xdist worker), so the
environment variables below are set before JAX initializes its backend.

* ``JAX_PLATFORMS=cpu`` unless the environment already names a platform.
* ``XLA_FLAGS``: exactly one host device per process, whatever the caller exported, so results
  do not depend on the environment.  A test that needs several host devices (``pmap``,
  sharding) runs its code in a subprocess with its own ``--xla_force_host_platform_device_count``.
* ``XLA_FLAGS`` also turns XLA:CPU's fusion emitters off (``--xla_cpu_use_fusion_emitters=false``:
  the older elemental emitters).  The suite is bound by compilation, and the older emitters
  compile an engine program in about 40% less time (Curie-Weiss ``n = 32``: 4.2 s instead of
  6.4 s on a 2-core CPU) for the same operations; an emitter computes the same HLO program, so
  no test's claim depends on it (draws are compared with other draws of the same process,
  never with numbers recorded under other flags).  The documentation and the scripts'
  subprocesses run without it (:func:`tests.fresh_process.user_environment`), as a
  reader's shell does.
* ``JAX_COMPILATION_CACHE_DIR``: JAX's persistent compilation cache in
  ``.pytest_cache/d/jax-compilation-cache`` (``pytest --cache-clear`` empties it) unless the
  environment names one, for every program however short its compilation.  The two xdist
  workers, and the subprocesses of the tests that run scripts or several host devices, share
  it: a program compiled once (the same oracle type, shapes and configuration in another
  test) is loaded instead of compiled again, and a second run of the suite loads most of its
  programs (the engine's program has no host callback, so JAX keeps it).  A loaded program
  is the program XLA would compile, so no check depends on the cache; the compile events
  that tests count (:mod:`jax.monitoring`) fire for loaded programs too.  JAX writes an entry
  without a lock, so a worker may read one that the other is still writing: JAX then warns
  ("incomplete or truncated stream") and compiles the program itself.  A size limit
  (``JAX_COMPILATION_CACHE_MAX_SIZE``) would make JAX lock the cache, but every write then
  reads the access time of every entry (thousands here): the suite ran at half its speed.
* ``jax_numpy_rank_promotion="raise"``: implicit rank promotion is an error (as in Diffrax's
  ``test/conftest.py``), so shape bugs cannot hide behind broadcasting.
* ``jax_cpu_enable_async_dispatch=False``: every computation runs in the thread that calls
  it.  The reference sampler (a Python loop over small jitted programs, each result read back
  at once) and the eager operations of the docstring examples dispatch thousands of tiny
  programs, and handing each to XLA's own thread costs more than running it: with the setting,
  ``tests/test_reference.py`` and ``tests/engine/test_block_form.py`` took 348 and 351 s
  instead of 396 and 426 s, with 467 and 471 s of user CPU instead of 552 and 598 s (one
  process each, alternated, fresh compilation caches; docs/benchmarks.md, "The test suite's
  time").  The programs and their results are the same; only where they run differs.  The
  subprocesses that run the documentation, the examples and several host devices keep JAX's
  default, as a reader's shell does.
* Heaviest files first (:func:`pytest_collection_modifyitems`, with ``--dist loadfile
  --no-loadscope-reorder`` in ``pyproject.toml``): each file runs in one xdist worker, and a
  file of a few long tests handed out last keeps one worker busy while the other idles
  (pytest-xdist's own order is by number of tests, which put the warmup-tuning file, 3.5
  minutes, among the last).
* JAX's in-memory caches are cleared after each test module (:func:`_release_programs`):
  every compiled program maps its machine code into the worker, and a worker that kept the
  hundreds of programs of a whole suite would pass the kernel's default limit of 65530 memory
  maps per process (XLA then dies in a segfault).  Clearing drops only programs that the next
  call compiles (or loads from the persistent cache) again; no result depends on it.
* Hypothesis profile ``"ci"``: no deadline (first calls compile), derandomized (the same
  examples on every run, no example database), and a moderate number of examples.
"""

import os
import re

from tests.fresh_process import SUITE_EMITTERS

_DEVICE_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = " ".join(
    [_DEVICE_COUNT_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).strip()]
    + [SUITE_EMITTERS, "--xla_force_host_platform_device_count=1"]
).strip()

os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        ".pytest_cache",
        "d",
        "jax-compilation-cache",
    ),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


def _stamp_arviz_warning() -> None:
    """Write ArviZ's once-a-day warning stamp before anything imports ArviZ: ArviZ 0.23 writes
    it on import through a temporary file of a fixed name, and two xdist workers importing it
    at once on a new day race on that file (one dies with FileNotFoundError).  Each process
    writes through a temporary file of its own; ArviZ then finds today's stamp and writes
    nothing.  It changes no test: the stamp only silences a FutureWarning."""
    import datetime
    import tempfile

    from platformdirs import user_cache_dir

    folder = user_cache_dir("arviz", "arviz")
    os.makedirs(folder, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=folder)
    with os.fdopen(descriptor, "w") as file:
        file.write(datetime.date.today().isoformat())
    os.replace(temporary, os.path.join(folder, "daily_warning"))


_stamp_arviz_warning()

import jax  # noqa: E402  (after the environment is set)
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_platforms", os.environ["JAX_PLATFORMS"])
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_cpu_enable_async_dispatch", False)

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,
    max_examples=30,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")

#: seconds each file took in a whole-suite run with two workers (``pytest -n 2 --durations=0``,
#: setup and calls); only their order is used, and a file not listed runs after these, in
#: collection order
FILE_SECONDS = {
    "tests/engine/test_scheduler.py": 188,
    "tests/engine/test_block_form.py": 95,
    "tests/test_api_reference.py": 69,
    "tests/infer/test_kernel.py": 63,
    "tests/test_examples.py": 61,
    "tests/test_docs.py": 54,
    "tests/engine/test_diffusion.py": 51,
    "tests/learned/test_denoiser.py": 50,
    "tests/processes/test_diffusion.py": 49,
    "tests/learned/test_transformer_exactness.py": 43,
    "tests/engine/test_sharding.py": 37,
    "tests/infer/test_gibbs.py": 32,
    "tests/infer/test_traced_parameters.py": 28,
    "tests/infer/test_tuning.py": 27,
    "tests/engine/test_errors.py": 25,
    "tests/support/test_transformer_training.py": 24,
    "tests/oracles/test_ising_chain.py": 23,
    "tests/engine/test_keys.py": 22,
    "tests/infer/test_distributions.py": 20,
    "tests/infer/test_arviz.py": 20,
    "tests/support/test_doctests.py": 19,
    "tests/oracles/test_hopfield.py": 17,
    "tests/learned/test_transformer_kv_cache.py": 14,
    "tests/infer/test_errors.py": 14,
    "tests/learned/test_exactness.py": 12,
    "tests/engine/test_validation.py": 11,
    "tests/infer/test_compilation.py": 11,
    "tests/engine/test_program_size.py": 10,
}


def pytest_collection_modifyitems(config, items):
    """Order the tests by the measured seconds of their file, heaviest first (a stable sort:
    the tests of a file stay together and in their order)."""
    items.sort(key=lambda item: -FILE_SECONDS.get(item.nodeid.split("::")[0], 0))


@pytest.fixture(scope="module", autouse=True)
def _release_programs():
    """After each test module, drop JAX's compiled programs (the module docstring), and fail
    the module's last test if the worker came near the kernel's default limit of memory maps
    (65530) anyway."""
    yield
    count = 0
    if os.path.exists("/proc/self/maps"):  # Linux; elsewhere only the clearing
        with open("/proc/self/maps") as maps:
            count = sum(1 for _ in maps)
    jax.clear_caches()
    assert count < MAX_MEMORY_MAPS, (
        f"the worker holds {count} memory maps after this module: programs are not released"
    )


#: memory maps a test worker may hold after a module (the kernel's default limit is 65530)
MAX_MEMORY_MAPS = 40_000
