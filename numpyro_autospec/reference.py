"""Reference samplers: the executable specification.

A short, readable, *slow* implementation of recursive speculative rejection sampling (Anari et
al., *Parallel Sampling via Autospeculation*, arXiv:2511.07869, ALGORITHM.md section 3) that
follows the pseudo-code line by line, plus the sequential sampler and the self-speculative
decoding peers.  It is plain Python recursion over jitted process methods; the fast engine
(:mod:`numpyro_autospec.engine`) must produce **the same draws from the same keys** (both use
:mod:`numpyro_autospec.rejection` for every random decision) and the same rounds.

Cost model (ALGORITHM.md section 1): a *round* is one batched oracle call, a *query* one oracle
evaluation.  Sequential steps add their rounds; parallel trials take the max of theirs.  A
residual batch ends when its first accepted trial and all trials before it are done, so its
rounds are the max over those trials; its queries count every trial of the batch run to
completion (the engine cancels the trials after the accepted one, so it may do fewer).

Reuse of queries (exact: the oracle is a deterministic function of the prefix):

* the speculation query ``O_a`` of a block is also its first scoring query, and the first
  query of the left half of every residual trial (same prefix);
* the trial's target log-density is the sum of its halves' (already computed while sampling
  them), so accepting a trial needs no extra round;
* with ``lookahead`` the scoring round also queries the step right after the block, which an
  accepted block hands to the next block as its speculation query.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from numpyro_autospec.config import VERIFY, SamplerConfig
from numpyro_autospec.rejection import (
    batch_size,
    block_keys,
    residual_accepts,
    speculation_accepts,
    trial_keys,
)
from numpyro_autospec.verification import VERIFIERS

__all__ = ["Draw", "sample", "sample_many"]


class Draw(NamedTuple):
    """One exact draw with its cost."""

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
    """The process methods, jitted once per process."""

    def __init__(self, process):
        self.process = process
        for name in (
            "query",
            "reduce",
            "target_logp",
            "target_sample",
            "spec_sample",
            "spec_logp",
            "output",
            "init",
        ):
            setattr(self, name, jax.jit(getattr(process, name)))
        for name, fn in (
            ("block_keys", block_keys),
            ("trial_keys", trial_keys),
            ("speculation_accepts", speculation_accepts),
            ("residual_accepts", residual_accepts),
        ):
            setattr(self, name, jax.jit(fn))

        def target_log_density(x, a, m, answer):
            """sum_k target_logp(x, k, query(x, k)) over [a, a+m), the query at a reused."""
            steps = a + jnp.arange(1, m)
            answers = jax.vmap(process.query, (None, 0))(x, steps)
            reduced = jax.vmap(process.reduce, (None, 0, 0))(x, steps, answers)
            rest = jax.vmap(process.target_logp, (None, 0, 0))(x, steps, reduced)
            return process.target_logp(x, a, process.reduce(x, a, answer)) + jnp.sum(rest)

        # one compiled program per block length m (static)
        self.target_log_density = jax.jit(target_log_density, static_argnums=2)
        if hasattr(process, "spec_reduce"):
            self.spec_reduce = jax.jit(process.spec_reduce)
            self.step_value = jax.jit(process.step_value)
            self.set_step_value = jax.jit(process.set_step_value)


@functools.lru_cache(maxsize=32)
def _jitted(process) -> _Jitted:
    return _Jitted(process)


class _Sampler:
    def __init__(self, process, config: SamplerConfig):
        self.p = _jitted(process)
        self.n = process.num_steps
        self.final_query = process.final_query
        self.config = config.validate()
        self.chunk = config.resolved_block_size(self.n)
        self.leaf = config.resolved_leaf_size(self.n)

    def _wants_lookahead(self, end: int) -> bool:
        return self.config.lookahead and (end < self.n or (end == self.n and self.final_query))

    # ---------------------------------------------------------------- SAMPLE(x, a, m)
    def sample_block(self, key, x, a: int, m: int, answer) -> _Result:
        """Return ``x`` with steps ``[a, a+m)`` drawn exactly from mu(block | prefix)."""
        p = self.p
        if m <= self.leaf:  # sequential leaf: one round and one query per step
            rounds = queries = 0
            log_mu = 0.0
            for j in range(m):
                if answer is None:
                    answer = p.query(x, a + j)
                    rounds, queries = rounds + 1, queries + 1
                reduced = p.reduce(x, a + j, answer)
                x = p.target_sample(jax.random.fold_in(key, j), x, a + j, reduced)
                log_mu = log_mu + p.target_logp(x, a + j, reduced)
                answer = None
            return _Result(x, log_mu, None, rounds, queries)

        k_spec, k_accept, k_residual = p.block_keys(key)
        rounds = queries = 0
        if answer is None:  # O_a = query(x, a): one round
            answer = p.query(x, a)
            rounds, queries = 1, 1
        x_spec = p.spec_sample(k_spec, x, a, m, answer)
        # one round scores the speculation: m - 1 new queries (+1 lookahead)
        log_mu, answer_next, new_queries = self._score(x_spec, a, m, answer)
        rounds, queries = rounds + 1, queries + new_queries
        log_nu = p.spec_logp(x_spec, a, m, answer)
        if p.speculation_accepts(k_accept, log_mu, log_nu):
            return _Result(x_spec, log_mu, answer_next, rounds, queries)

        # residual loop: batches of parallel trials, the first accepted trial wins
        half = (m + 1) // 2
        trial, batch = 0, 0
        while True:
            outcomes = []
            for g in range(trial, trial + batch_size(batch, self.config.growth)):
                k_left, k_right, k_acc = p.trial_keys(k_residual, g)
                left = self.sample_block(k_left, x, a, half, answer)
                right = self.sample_block(k_right, left.x, a + half, m - half, left.answer_next)
                log_mu_y = left.log_mu + right.log_mu
                log_nu_y = p.spec_logp(right.x, a, m, answer)
                accepted = bool(p.residual_accepts(k_acc, log_mu_y, log_nu_y))
                outcomes.append(
                    (
                        accepted,
                        right.x,
                        log_mu_y,
                        right.answer_next,
                        left.rounds + right.rounds,
                        left.queries + right.queries,
                    )
                )
            trial += len(outcomes)
            batch += 1
            winner = next((i for i, o in enumerate(outcomes) if o[0]), None)
            decided = outcomes if winner is None else outcomes[: winner + 1]
            rounds += max(o[4] for o in decided)
            queries += sum(o[5] for o in outcomes)
            if winner is not None:
                _, y, log_mu_y, answer_next, _, _ = outcomes[winner]
                return _Result(y, log_mu_y, answer_next, rounds, queries)

    def _score(self, x, a: int, m: int, answer):
        """One round: the target log-density of steps ``[a, a+m)`` of ``x`` (the query at
        ``a`` is ``answer``, reused) and, with lookahead, the query right after the block."""
        p = self.p
        log_mu = p.target_log_density(x, a, m, answer)  # m - 1 queries, in parallel
        queries = m - 1
        answer_next = None
        if self._wants_lookahead(a + m):
            answer_next = p.query(x, a + m)
            queries += 1
        return log_mu, answer_next, queries

    # ------------------------------------------------- self-speculative decoding step
    def verify_step(self, key, x, c: int, e: int, answer):
        """Draft ``[c, e)`` from the product speculation, verify it (token or block rule) and
        return ``(x, new cursor, answer at the new cursor or None, rounds, queries)``."""
        p = self.p
        k_spec, k_verify = jax.random.split(key)
        rounds = queries = 0
        if answer is None:
            answer = p.query(x, c)
            rounds, queries = 1, 1
        x_spec = p.spec_sample(k_spec, x, c, e - c, answer)
        target_rows, draft_rows, values = [], [], []
        for k in range(c, e):
            answer_k = answer if k == c else p.query(x_spec, k)
            target_rows.append(p.reduce(x_spec, k, answer_k))
            draft_rows.append(p.spec_reduce(x_spec, k, answer))
            values.append(p.step_value(x_spec, k))
        pad = self.chunk - (e - c)  # fixed-size buffers, as in the engine
        target_rows, draft_rows, values = (
            jnp.stack(rows + rows[-1:] * pad) for rows in (target_rows, draft_rows, values)
        )
        queries += (e - c) - 1
        answer_next = None
        if self._wants_lookahead(e):
            answer_next = p.query(x_spec, e)
            queries += 1
        if e - c > 1 or answer_next is not None:  # a round is an oracle call
            rounds += 1
        verdict = VERIFIERS[VERIFY[self.config.method]](
            k_verify, target_rows, draft_rows, values, e - c
        )
        kept = int(verdict.kept)
        if kept == e - c:
            return x_spec, e, answer_next, rounds, queries
        x_new = p.set_step_value(x_spec, c + kept, verdict.correction)
        return x_new, c + kept + 1, None, rounds, queries

    # ---------------------------------------------------------------------- root
    def draw(self, key) -> Draw:
        p = self.p
        k_init, k_run = jax.random.split(key)
        x = p.init(k_init)
        cursor, block, answer = 0, 0, None
        rounds = queries = 0
        while cursor < self.n:
            end = min(cursor + self.chunk, self.n)
            k_block = jax.random.fold_in(k_run, block)
            if VERIFY[self.config.method] == "sequence":
                result = self.sample_block(k_block, x, cursor, end - cursor, answer)
                x, answer, cursor = result.x, result.answer_next, end
                rounds, queries = rounds + result.rounds, queries + result.queries
            else:
                x, cursor, answer, r, q = self.verify_step(k_block, x, cursor, end, answer)
                rounds, queries = rounds + r, queries + q
            block += 1
        final = None
        if self.final_query:
            if answer is None:
                answer = p.query(x, self.n)
                rounds, queries = rounds + 1, queries + 1
            final = answer
        return Draw(p.output(x, final), rounds, queries)


def sample(process, key, config: SamplerConfig | None = None) -> Draw:
    """One exact draw from ``process`` with the reference implementation.

    Example
    -------
    >>> import jax
    >>> from numpyro_autospec.oracles import CurieWeissOracle
    >>> from numpyro_autospec.processes import AnyOrderProcess
    >>> process = AnyOrderProcess(CurieWeissOracle(16, beta=1.0), 16, 2)
    >>> draw = sample(process, jax.random.PRNGKey(0))
    >>> draw.value.shape, draw.rounds <= 16
    ((16,), True)
    """
    return _Sampler(process, config or SamplerConfig()).draw(key)


def sample_many(process, key, num_draws: int, config: SamplerConfig | None = None):
    """``num_draws`` independent draws (keys ``split(key, num_draws)``); returns stacked
    values and numpy arrays of rounds and queries."""
    sampler = _Sampler(process, config or SamplerConfig())
    draws = [sampler.draw(k) for k in jax.random.split(key, num_draws)]
    values = jax.tree.map(lambda *leaves: np.stack(leaves), *[d.value for d in draws])
    return (
        values,
        np.array([d.rounds for d in draws]),
        np.array([d.queries for d in draws]),
    )
