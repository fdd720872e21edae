"""The engine's compiled program stays small: its launched kernels, conditionals and loops are
pinned (as BlackJAX's ``test_compilation.py`` pins traces), so that the program cannot silently
grow back.  Counted by ``numpyro_autospec._core.program_size`` in the optimized HLO of one draw, the
figures ``benchmarks/program_size.py`` reports.

The pinned bounds are the counts measured when they were set, plus a margin of about 5% for
XLA versions: a block-form oracle (Curie-Weiss, ``n = 1024``) and a set-form one (the same
law through a plain function: one query per step).  No conditional at all, and two loops: the
passes and, inside, the round's batched oracle calls.
"""

import json
import os

import jax
import jax.numpy as jnp
import pytest

from numpyro_autospec import engine
from numpyro_autospec._core.program_size import program_size
from numpyro_autospec.oracles import CurieWeissOracle
from numpyro_autospec.processes import AnyOrderProcess
from tests.fresh_process import run_python, user_environment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

N = 1024
CURIE_WEISS = CurieWeissOracle(N, beta=1.0)


def set_form(x, mask):
    """The Curie-Weiss conditionals as a plain set-form function (no block form)."""
    return CURIE_WEISS.log_marginals(x, mask)


CASES = {
    "block-form": (AnyOrderProcess(CURIE_WEISS, N, 2), 315),
    "set-form": (AnyOrderProcess(set_form, 256, 2), 271),
}


def size_of(process):
    compiled = jax.jit(lambda key: engine.run(process, key[None])).lower(jax.random.PRNGKey(0))
    return program_size(compiled.compile().as_text())


def sizes_in_this_process() -> dict:
    """``name -> [ops, conditionals, loops, kinds]`` of every case."""
    return {name: list(size_of(process)) for name, (process, _) in CASES.items()}


@pytest.fixture(scope="module")
def sizes() -> dict:
    """The cases' sizes, compiled in a fresh process with a user's XLA settings: the suite's
    choice of emitters (tests/conftest.py) compiles other kernels and loops than a user gets."""
    code = (
        "import json; from tests.engine.test_program_size import sizes_in_this_process; "
        "print(json.dumps(sizes_in_this_process()))"
    )
    output = run_python(
        code, cwd=ROOT, env=user_environment(JAX_PLATFORMS="cpu", PYTHONPATH=ROOT), timeout=600
    )
    return json.loads(output.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_is_small(name, sizes):
    ops, conditionals, loops, kinds = sizes[name]
    bound = CASES[name][1]
    assert conditionals == 0, kinds
    assert loops == 2, kinds
    assert ops <= bound, f"{ops} launched kernels, pinned at {bound}: {kinds}"


def test_count_sees_conditionals_loops_and_kernels():
    """The count is not vacuous: a program with a conditional inside a loop, each branch a
    kernel of its own, counts both, and a larger branch counts more kernels."""

    def program(x, extra):
        def body(carry):
            step, value = carry
            branches = (lambda v: jnp.sin(v) * 2.0, lambda v: jnp.sort(jnp.cos(v)) + extra)
            return step + 1, jax.lax.cond(step % 2 == 0, *branches, value)

        return jax.lax.while_loop(lambda carry: carry[0] < 4, body, (0, x))[1]

    x = jnp.linspace(0.0, 1.0, 64)
    size = program_size(jax.jit(program).lower(x, 1.0).compile().as_text())
    assert size.loops == 1 and size.conditionals == 1
    assert size.kinds.get("sort") == 1 and size.ops >= 5
