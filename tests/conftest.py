"""Suite-wide settings: strict JAX, CPU platform, one host device, a fixed Hypothesis profile.

Pytest imports this file before any test module (in every pytest-xdist worker), so the
environment variables below are set before JAX initializes its backend.

* ``JAX_PLATFORMS=cpu`` unless the environment already names a platform.
* ``XLA_FLAGS``: exactly one host device per process, whatever the caller exported, so results
  do not depend on the environment.  A test that needs several host devices (``pmap``,
  sharding) runs its code in a subprocess with its own ``--xla_force_host_platform_device_count``.
* ``JAX_COMPILATION_CACHE_DIR``: JAX's persistent compilation cache in
  ``.pytest_cache/d/jax-compilation-cache`` (``pytest --cache-clear`` empties it) unless the
  environment names one, for every program however short its compilation.  The two xdist
  workers, and the subprocesses of the tests that run scripts or several host devices, share
  it: a program compiled once (the same oracle type, shapes and configuration in another
  test) is loaded instead of compiled again, and a second run of the suite loads most of its
  programs (JAX does not keep those with host callbacks).  A loaded program is the program
  XLA would compile; the compile events that tests count (:mod:`jax.monitoring`) fire for
  loaded programs too.
* ``jax_numpy_rank_promotion="raise"``: implicit rank promotion is an error (as in Diffrax's
  ``test/conftest.py``), so shape bugs cannot hide behind broadcasting.
* Hypothesis profile ``"ci"``: no deadline (first calls compile), derandomized (the same
  examples on every run, no example database), and a moderate number of examples.
"""

import os
import re

_DEVICE_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = " ".join(
    [_DEVICE_COUNT_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).strip()]
    + ["--xla_force_host_platform_device_count=1"]
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

import jax  # noqa: E402  (after the environment is set)
from hypothesis import HealthCheck, settings  # noqa: E402

jax.config.update("jax_platforms", os.environ["JAX_PLATFORMS"])
jax.config.update("jax_numpy_rank_promotion", "raise")

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
