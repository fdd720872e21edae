"""Suite-wide settings: strict JAX, CPU platform, one host device, a fixed Hypothesis profile.

Pytest imports this file before any test module (in every pytest-xdist worker), so the
environment variables below are set before JAX initializes its backend.

* ``JAX_PLATFORMS=cpu`` unless the environment already names a platform.
* ``XLA_FLAGS``: exactly one host device per process, whatever the caller exported, so results
  do not depend on the environment.  A test that needs several host devices (``pmap``,
  sharding) runs its code in a subprocess with its own ``--xla_force_host_platform_device_count``.
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
