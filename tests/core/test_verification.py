"""Exactness of token- and block-verification by exact enumeration.

A random joint p over gamma sites (q values each) and a random product draft q: the law of
"keep tau sites of the draft, draw a correction from the residual, then continue with exact
sampling from p" is computed exactly, with the library's own acceptance / stop probabilities
and residuals, and must equal p.  A deliberately wrong rule (the library's block stop
probabilities scaled by 1.5 inside this file's enumeration) is shown to fail the same check;
that shows the enumeration sees a wrong rule, not that a broken verifier is caught: the
engine run with a broken ``VERIFIERS`` entry is rejected in tests/engine/test_scheduler.py,
tests/engine/test_block_form.py and tests/infer/test_kernel.py.
"""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numpyro_autospec._core.verification import (
    block_stop_probabilities,
    residual_probabilities,
    token_accept_probabilities,
)


def conditional(joint, prefix):
    sub = joint[tuple(prefix)]
    marginal = sub.reshape(sub.shape[0], -1).sum(1) if sub.ndim > 1 else sub
    return marginal / marginal.sum()


def output_law(joint, draft, rule, size):
    """Exact law over gamma sites of (kept prefix, correction, exact continuation)."""
    gamma, q = joint.ndim, joint.shape[0]
    law = np.zeros_like(joint)

    def continue_exactly(prefix, prob):
        if len(prefix) == gamma:
            law[tuple(prefix)] += prob
            return
        row = conditional(joint, prefix)
        for v in range(q):
            if row[v] > 0:
                continue_exactly(prefix + [v], prob * row[v])

    pad = size - gamma

    def rows(r):
        return jnp.log(jnp.asarray(np.stack(r + r[-1:] * pad), jnp.float32))

    for x in itertools.product(range(q), repeat=gamma):
        q_x = np.prod([draft[i][x[i]] for i in range(gamma)])
        if q_x == 0:
            continue
        target_rows = [conditional(joint, list(x[:i])) for i in range(gamma)]
        p_rows, q_rows = rows(target_rows), rows(list(draft))
        values = jnp.asarray(list(x) + [x[-1]] * pad, jnp.int32)
        if rule == "token":
            accept = np.asarray(token_accept_probabilities(p_rows, q_rows, values, gamma))
            p_tau = [np.prod(accept[:t]) * (1 - accept[t]) for t in range(gamma)]
            p_tau.append(np.prod(accept[:gamma]))
            log_w = np.zeros(size + 1)
        else:
            stop, log_w = block_stop_probabilities(p_rows, q_rows, values, gamma)
            if rule == "block-wrong":  # a wrong stopping rule: the stops scaled by 1.5
                stop = np.asarray(stop).copy()
                for t in range(1, gamma):
                    stop[t] = min(1.0, stop[t] * 1.5)
            stop, log_w = np.asarray(stop, np.float64), np.asarray(log_w)
            p_tau = [stop[t] * np.prod(1 - stop[t + 1 : gamma + 1]) for t in range(gamma + 1)]
        for t, pt in enumerate(p_tau):
            if pt <= 0:
                continue
            if t == gamma:
                law[x] += q_x * pt
                continue
            residual = np.asarray(residual_probabilities(log_w[t], p_rows[t], q_rows[t]))
            for y in range(q):
                if residual[y] > 0:
                    continue_exactly(list(x[:t]) + [y], q_x * pt * residual[y])
    return law


def random_instance(seed, gamma, q):
    rng = np.random.default_rng(seed)
    joint = rng.dirichlet(np.full(q**gamma, 0.8)).reshape((q,) * gamma)
    draft = [rng.dirichlet(np.ones(q)) for _ in range(gamma)]
    return joint, draft


@settings(max_examples=20)
@given(
    seed=st.integers(0, 2**31),
    gamma=st.integers(1, 3),
    q=st.integers(2, 3),
    pad=st.integers(0, 2),
    rule=st.sampled_from(["token", "block"]),
)
def test_verification_is_exact(seed, gamma, q, pad, rule):
    joint, draft = random_instance(seed, gamma, q)
    law = output_law(joint, draft, rule, gamma + pad)
    np.testing.assert_allclose(law, joint, atol=2e-5)


def test_block_verification_keeps_more_than_token():
    """Sun et al.: block verification is never worse in expected kept sites."""
    joint, draft = random_instance(7, 3, 2)
    gamma = 3

    def expected_kept(rule):
        total = 0.0
        for x in itertools.product(range(2), repeat=gamma):
            q_x = np.prod([draft[i][x[i]] for i in range(gamma)])
            p_rows = jnp.log(
                jnp.asarray(
                    np.stack([conditional(joint, list(x[:i])) for i in range(gamma)]), jnp.float32
                )
            )
            q_rows = jnp.log(jnp.asarray(np.stack(draft), jnp.float32))
            values = jnp.asarray(x, jnp.int32)
            if rule == "token":
                a = np.asarray(token_accept_probabilities(p_rows, q_rows, values, gamma))
                total += q_x * sum(np.prod(a[: t + 1]) for t in range(gamma))
            else:
                stop = np.asarray(block_stop_probabilities(p_rows, q_rows, values, gamma)[0])
                p_tau = [stop[t] * np.prod(1 - stop[t + 1 :]) for t in range(gamma + 1)]
                total += q_x * sum(t * p for t, p in enumerate(p_tau))
        return total

    assert expected_kept("block") >= expected_kept("token") - 1e-6


def test_wrong_block_rule_is_caught():
    joint, draft = random_instance(3, 3, 2)
    law = output_law(joint, draft, "block-wrong", 3)
    assert np.abs(law - joint).max() > 1e-3


@pytest.mark.parametrize("rule", ["token", "block"])
def test_identical_draft_keeps_everything(rule):
    joint = np.full((2, 2), 0.25)
    draft = [np.full(2, 0.5), np.full(2, 0.5)]
    np.testing.assert_allclose(output_law(joint, draft, rule, 2), joint, atol=1e-6)
