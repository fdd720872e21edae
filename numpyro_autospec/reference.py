"""Reference samplers: the executable specification.

A short, readable, *slow* implementation of recursive speculative rejection sampling (Anari et
al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869, docs/algorithm.md, section 3)
that follows the pseudo-code line by line, plus the sequential sampler and the self-speculative
decoding peers; the root follows :meth:`~numpyro_autospec.config.SamplerConfig.root_policy`.
The engine (:mod:`numpyro_autospec.engine`) must produce **the same draws from the same keys**
(both use :mod:`numpyro_autospec._core.rejection` for every random decision) and rounds.

Cost model (docs/algorithm.md, section 1): a *round* is one batched oracle call, a *query* one
oracle evaluation.  Sequential steps add their rounds, parallel trials take the max of theirs
(in a residual batch, up to its first accepted trial); queries count every trial of a batch.
A query with the same prefix is reused (a block's speculation query ``O_a`` serves its scoring
and its trials' left halves; its lookahead is the next block's ``O_a``).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from numpyro_autospec._core.rejection import (
    batch_size,
    block_keys,
    residual_accepts,
    speculation_accepts,
    trial_keys,
)
from numpyro_autospec._core.root_policy import wants_lookahead
from numpyro_autospec._core.verification import VERIFIERS
from numpyro_autospec.config import SamplerConfig
from numpyro_autospec.processes._base import has_discrete_steps

__all__ = ["Draw", "sample", "sample_many"]


class Draw(NamedTuple):
    """One exact draw with its cost: the ``value``, its parallel ``rounds`` of oracle queries
    and its total number of ``queries``.

    Example
    -------
    >>> Draw(value=[0, 1, 1, 0], rounds=3, queries=4)  # what sample returns
    Draw(value=[0, 1, 1, 0], rounds=3, queries=4)
    """

    value: Any
    rounds: int
    queries: int


class _Result(NamedTuple):
    x: Any
    log_mu: Any  # target log-density of the block's steps at x
    answer_next: Any  # query(x, end of block) when known, else None
    rounds: int
    queries: int


class _Jitted:
    """The process methods and the pseudo-code's lines, jitted per process and root policy."""

    def __init__(self, process, policy):
        self.process = process
        rows = policy.answer_rows
        self.block_scoring = block_scoring = bool(process.scores_blocks)
        self.query = jax.jit(lambda x, k: process.query(x, k, rows))
        self.step_query = jax.jit(lambda x, k: process.query(x, k, 1))
        for name in ("output", "init"):
            setattr(self, name, jax.jit(getattr(process, name)))
        self.trial_keys = jax.jit(trial_keys)
        self.fold_in = jax.jit(jax.random.fold_in)
        self.split = jax.jit(jax.random.split)

        def scoring_rows(x, a, m, window):
            """Target rows of steps ``a+1..a+m-1`` (``m - 1`` queries)."""
            num_rows = policy.score_rows(window) if block_scoring else max(m, 2) - 1
            return target_rows(process, x, a + 1, num_rows, block_scoring)

        def target_log_density(x, a, m, answer):
            """sum_k target_logp(x, k, query(x, k)) over [a, a+m), the query at a reused."""
            rows = scoring_rows(x, a, m, False)
            steps = a + 1 + jnp.arange(jax.tree.leaves(rows)[0].shape[0])
            rest = jax.vmap(process.target_logp, (None, 0, 0))(x, steps, rows)
            rest = jnp.where(steps < a + m, rest, 0.0)
            return process.target_logp(x, a, process.reduce(x, a, answer)) + jnp.sum(rest)

        def leaf_step(key, x, k, j, answer, log_mu):
            """Step ``k`` (the ``j``-th of its block) drawn from the target given ``answer``."""
            reduced = process.reduce(x, k, answer)
            x = process.target_sample(jax.random.fold_in(key, j), x, k, reduced)
            return x, log_mu + process.target_logp(x, k, reduced)

        def speculate(key, x, a, m, answer, lookahead):
            """``x' ~ nu`` (frozen at ``O_a``), ``l_mu`` (one round), ``l_nu``, the acceptance
            ``min(1, mu / nu)`` and the lookahead query."""
            k_spec, k_accept, k_residual = block_keys(key)
            x_spec = process.spec_sample(k_spec, x, a, m, answer)
            log_mu = target_log_density(x_spec, a, m, answer)
            log_nu = process.spec_logp(x_spec, a, m, answer)
            accepted = speculation_accepts(k_accept, log_mu, log_nu)
            answer_next = process.query(x_spec, a + m, rows) if lookahead else None
            return x_spec, log_mu, answer_next, accepted, k_residual

        def residual_test(key, y, a, m, answer, log_mu_y):
            """A trial ``y ~ mu`` is kept with probability ``max(0, 1 - nu / mu)``."""
            return residual_accepts(key, log_mu_y, process.spec_logp(y, a, m, answer))

        self.leaf_step = jax.jit(leaf_step)
        self.speculate = jax.jit(speculate, static_argnums=(3, 5))
        self.residual_test = jax.jit(residual_test, static_argnums=3)
        if has_discrete_steps(process):

            def window(key, x, c, m, answer, size, rule, lookahead):
                """Draft ``[c, c+m)``, score it (one round), verify: ``(x, kept, answer_next)``."""
                k_spec, k_verify = jax.random.split(key)
                x_spec = process.spec_sample(k_spec, x, c, m, answer)
                steps = jnp.minimum(c + jnp.arange(size), c + m - 1)
                first = process.reduce(x_spec, c, answer)
                rest = scoring_rows(x_spec, c, size, True)
                target_rows = jnp.concatenate([first[None], rest[: size - 1]])
                draft_rows = jax.vmap(process.spec_reduce, (None, None, 0, None))(
                    x_spec, c, steps, answer
                )
                values = jax.vmap(process.step_value, (None, 0))(x_spec, steps)
                verdict = VERIFIERS[rule](k_verify, target_rows, draft_rows, values, m)
                corrected = process.set_step_value(
                    x_spec, c + jnp.minimum(verdict.kept, m - 1), verdict.correction
                )
                full = verdict.kept == m
                x_new = jax.tree.map(lambda a, b: jnp.where(full, a, b), x_spec, corrected)
                answer_next = process.query(x_spec, c + m, rows) if lookahead else None
                return x_new, verdict.kept, answer_next

            self.window = jax.jit(window, static_argnums=(5, 6, 7))


def target_rows(process, x, first, num_rows: int, block_scoring: bool):
    """Target rows of steps ``first..first+num_rows-1`` (``score_block`` or a query each)."""
    if block_scoring:
        return process.score_block(x, first, num_rows)
    steps = jnp.minimum(first + jnp.arange(num_rows), process.num_steps - 1)
    answers = jax.vmap(process.query, (None, 0, None))(x, steps, 1)
    return jax.vmap(process.reduce, (None, 0, 0))(x, steps, answers)


_jitted = functools.lru_cache(maxsize=32)(_Jitted)


class _Sampler:
    def __init__(self, process, config: SamplerConfig):
        self.n = process.num_steps
        self.final_query = process.final_query
        self.config = config.validate()
        self.policy = config.root_policy(self.n, has_discrete_steps(process))
        self.p = _jitted(process, self.policy)
        self.block_scoring = self.p.block_scoring
        self.leaf = self.policy.leaf_size

    def sample_block(self, key, x, a: int, m: int, answer) -> _Result:
        """SAMPLE(x, a, m): ``x`` with steps ``[a, a+m)`` drawn exactly from mu(block | prefix)."""
        p = self.p
        if m <= self.leaf:  # sequential leaf: one round and one query per step
            rounds = queries = 0
            log_mu = 0.0
            for j in range(m):
                if answer is None:
                    answer = p.step_query(x, a + j)
                    rounds, queries = rounds + 1, queries + 1
                x, log_mu = p.leaf_step(key, x, a + j, j, answer, log_mu)
                answer = None
            return _Result(x, log_mu, None, rounds, queries)

        rounds = queries = 0
        if answer is None:  # O_a = query(x, a): one round
            answer = p.query(x, a)
            rounds, queries = 1, 1
        # speculate x' ~ nu and score it: one round, m - 1 new queries (+1 lookahead)
        lookahead = wants_lookahead(a + m, self.n, self.final_query)
        x_spec, log_mu, answer_next, accepted, k_residual = p.speculate(
            key, x, a, m, answer, lookahead
        )
        scoring = 1 if self.block_scoring else m - 1  # evaluations of the scoring round
        rounds, queries = rounds + 1, queries + scoring + lookahead
        if accepted:
            return _Result(x_spec, log_mu, answer_next, rounds, queries)

        # residual loop: batches of parallel trials, the first accepted trial wins
        half = (m + 1) // 2
        trial, batch = 0, 0
        while True:
            outcomes = []
            for g in range(trial, trial + batch_size(batch, self.policy.growth)):
                k_left, k_right, k_acc = p.trial_keys(k_residual, g)
                left = self.sample_block(k_left, x, a, half, answer)
                right = self.sample_block(k_right, left.x, a + half, m - half, left.answer_next)
                log_mu_y = left.log_mu + right.log_mu
                accepted = bool(p.residual_test(k_acc, right.x, a, m, answer, log_mu_y))
                r, q = left.rounds + right.rounds, left.queries + right.queries
                outcomes.append((accepted, right.x, log_mu_y, right.answer_next, r, q))
            trial += len(outcomes)
            batch += 1
            winner = next((i for i, o in enumerate(outcomes) if o[0]), None)
            decided = outcomes if winner is None else outcomes[: winner + 1]
            rounds += max(o[4] for o in decided)
            queries += sum(o[5] for o in outcomes)
            if winner is not None:
                _, y, log_mu_y, answer_next, _, _ = outcomes[winner]
                return _Result(y, log_mu_y, answer_next, rounds, queries)

    def verify_step(self, key, x, c: int, e: int, answer):
        """Draft ``[c, e)`` and verify it: ``(x, cursor, answer or None, rounds, queries)``."""
        rounds = queries = 0
        if answer is None:
            answer = self.p.query(x, c)
            rounds, queries = 1, 1
        lookahead = wants_lookahead(e, self.n, self.final_query)
        x, kept, answer_next = self.p.window(
            key, x, c, e - c, answer, self.policy.max_window, self.policy.rule, lookahead
        )
        scoring = min(1, e - c - 1) if self.block_scoring else (e - c) - 1
        queries += scoring + lookahead
        if e - c > 1 or lookahead:  # a round is an oracle call
            rounds += 1
        kept = int(kept)
        if kept == e - c:
            return x, e, answer_next, rounds, queries
        return x, c + kept + 1, None, rounds, queries

    def draw(self, key) -> Draw:
        """The root: root block ``j`` (a window or a recursion block) uses ``fold_in(k_run, j)``."""
        p, policy = self.p, self.policy
        k_init, k_run = p.split(key)
        x = p.init(k_init)
        cursor, block, answer = 0, 0, None
        rounds = queries = 0
        window, advanced, windows = policy.first_window, 0, 0

        def recursion_block(x, start, answer):
            end = min(start + policy.recursion_block, self.n)
            result = self.sample_block(p.fold_in(k_run, block), x, start, end - start, answer)
            return result.x, end, result.answer_next, result.rounds, result.queries

        while cursor < self.n:
            if policy.rule is None:
                x, cursor, answer, r, q = recursion_block(x, cursor, answer)
                rounds, queries, block = rounds + r, queries + q, block + 1
                continue
            start = cursor
            end = min(cursor + window, self.n)
            x, cursor, answer, r, q = self.verify_step(
                p.fold_in(k_run, block), x, cursor, end, answer
            )
            rounds, queries, block = rounds + r, queries + q, block + 1
            after = policy.after_window(window, advanced, windows, start, cursor, end, self.n)
            if after.fallback:
                x, cursor, answer, r, q = recursion_block(x, cursor, answer)
                rounds, queries, block = rounds + r, queries + q, block + 1
            window, advanced, windows = after.window, after.advanced, after.windows
        final = None
        if self.final_query:
            if answer is None:
                answer = p.step_query(x, self.n)
                rounds, queries = rounds + 1, queries + 1
            final = answer
        return Draw(p.output(x, final), rounds, queries)


def sample(process, key, config: SamplerConfig | None = None) -> Draw:
    """One exact draw from ``process`` with the reference implementation.

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec import oracles, processes
    >>> process = processes.AnyOrderProcess(oracles.CurieWeissOracle(16, beta=1.0), 16, 2)
    >>> draw = sample(process, jax.random.PRNGKey(0))
    >>> draw.value.shape, 1 <= draw.rounds <= draw.queries, draw.rounds <= 16
    ((16,), True, True)
    """
    return _Sampler(process, config or SamplerConfig()).draw(key)


def sample_many(process, key, num_draws: int, config: SamplerConfig | None = None):
    """``num_draws`` independent draws (keys ``split(key, num_draws)``): stacked values and
    numpy arrays of rounds and queries.

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec import oracles, processes
    >>> process = processes.AnyOrderProcess(oracles.CurieWeissOracle(4, beta=0.5), 4, 2)
    >>> key = jax.random.PRNGKey(0)
    >>> values, rounds, queries = sample_many(process, key, 3)
    >>> values.shape, rounds.shape, queries.shape
    ((3, 4), (3,), (3,))
    >>> second = sample(process, jax.random.split(key, 3)[1])  # the same draw, on its own
    >>> values[1].tolist() == second.value.tolist(), int(rounds[1]) == second.rounds
    (True, True)
    """
    sampler = _Sampler(process, config or SamplerConfig())
    draws = [sampler.draw(k) for k in jax.random.split(key, num_draws)]
    values = jax.tree.map(lambda *leaves: np.stack(leaves), *[d.value for d in draws])
    return values, np.array([d.rounds for d in draws]), np.array([d.queries for d in draws])
