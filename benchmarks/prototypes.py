"""Pure NumPy prototypes of the samplers, for tuning and for designing engine changes.

Every sampler here is **exact** (``--check`` verifies it by a chi-square test against the
enumerated target on small ``n``).  Rounds and queries are counted exactly as
:mod:`numpyro_autospec.reference` counts them (docs/algorithm.md section 1):

* a round is one batched oracle call; a query one oracle evaluation;
* sequential steps add their rounds, parallel residual trials take the max of the trials up to
  the first accepted one; queries count every trial of a batch run to completion (an upper
  bound on what the engine executes, since it cancels the trials after the winner);
* a step that needs no new query (a scoring/verification decision, a residual acceptance) costs
  no round; the speculation query ``O_a`` is reused as the first scoring query; with
  ``lookahead`` the scoring round also queries the step after the block.

The oracles are exact NumPy versions of the project's targets with a *path* interface, which is
all an any-order sampler needs and which makes a whole scoring round one vectorized call:

* ``path_rows(order, y, a, b) -> [b - a, q]``: row ``j`` is
  :math:`\\log \\mu(X_{\\sigma(a+j)} = \\cdot \\mid X_{\\sigma(<a+j)} = y_{<a+j})`
  (``b - a`` queries, one per step);
* ``frozen_rows(order, y, a, m) -> [m, q]``: the rows of the sites
  :math:`\\sigma(a), \\dots, \\sigma(a+m-1)` in the single query at ``a`` (the speculation).

``y`` holds the values in step order (``y[k]`` is the value of site ``order[k]``).

Samplers (``--method``):

``autospec``  the paper's recursion as in the engine (``block``, ``leaf``, ``growth``,
              ``lookahead``: the :class:`~numpyro_autospec.config.SamplerConfig` knobs);
``assd``      self-speculative decoding, token verification, window ``k``;
``block``     the same with block verification (Sun et al. 2025);
``hybrid``    the root drafts windows of ``k`` sites, verifies them with block verification,
              and samples the rest of a partially kept window with the paper's recursion
              (sequence-level acceptance + residual trials).  With adaptive windows and a
              recursion fallback (``adapt``, ``floor``, ``fb``) this is the engine's default
              root policy (``numpyro_autospec.config.RootPolicy``).  See :class:`Hybrid`.
``adaptive``  ``block`` with a window adapted, within a draw, from the kept lengths
              observed so far (exact: the window is chosen before the draft is drawn).

Run ``python benchmarks/prototypes.py --help``.
"""

from __future__ import annotations

import argparse
import bisect
import math
import sys
import time

import numpy as np

# ----------------------------------------------------------------------------- helpers


def log_sigmoid(z):
    return -np.logaddexp(0.0, -z)


def binary_rows(logit):
    """``[m, 2]`` log-probabilities of values 0 and 1 from the logit of 1."""
    logit = np.asarray(logit, np.float64)
    return np.stack([log_sigmoid(-logit), log_sigmoid(logit)], axis=-1)


def sample_rows(rng, rows):
    """One categorical draw per row of log-probabilities (Gumbel-max)."""
    g = rng.gumbel(size=rows.shape)
    return np.argmax(rows + g, axis=-1).astype(np.int8)


def pick(rows, values):
    return rows[np.arange(len(values)), values]


# ----------------------------------------------------------------------------- oracles


class CurieWeiss:
    """:math:`\\mu(s) \\propto \\exp(\\frac{\\beta}{2n} (\\sum_i s_i)^2 + h \\sum_i s_i)`,
    :math:`s_i = 2 x_i - 1`.  The conditional law of a free site depends only on the number
    ``k`` of fixed sites and the number ``j`` of ups among them: a table of logits
    (``n (n + 1) / 2`` floats, built by the recursion of the partition functions)."""

    q = 2

    def __init__(self, n: int, beta: float, h: float = 0.0, coupling_scale: float = 0.5):
        self.n, self.beta, self.h = n, beta, h
        self.coupling = coupling_scale * beta / n
        j = np.arange(n + 1)
        magnet = 2.0 * j - n
        log_z = self.coupling * magnet**2 + h * magnet  # k = n: everything fixed
        self.table = np.empty(n * (n + 1) // 2, np.float32)
        for k in range(n - 1, -1, -1):
            up, down = log_z[1 : k + 2], log_z[: k + 1]  # log Z_{k+1}(j+1), log Z_{k+1}(j)
            self.table[k * (k + 1) // 2 : k * (k + 1) // 2 + k + 1] = up - down
            log_z = np.logaddexp(up, down)
        self.name = f"curie_weiss(beta={beta:g})"

    def _logit(self, k, j):
        return self.table[k * (k + 1) // 2 + j]

    def path_rows(self, order, y, a, b):
        k = np.arange(a, b)
        ups = int(y[:a].sum()) + np.concatenate([[0], np.cumsum(y[a : b - 1], dtype=np.int64)])
        return binary_rows(self._logit(k, ups))

    def frozen_rows(self, order, y, a, m):
        z = self._logit(a, int(y[:a].sum()))
        return binary_rows(np.full(m, z))

    def log_weight(self, x):
        s = (2 * x - 1).sum(-1)
        return self.coupling * s**2 + self.h * s


class IsingChain:
    """Open chain :math:`\\mu(s) \\propto \\exp(J \\sum_i s_i s_{i+1} + h \\sum_i s_i)`.  The law
    of a free site given fixed sites depends on its nearest fixed neighbours (transfer
    matrices, precomputed for every distance)."""

    q = 2

    def __init__(self, n: int, coupling: float, field: float = 0.0):
        self.n, self.coupling, self.field = n, coupling, field
        spins = np.array([-1.0, 1.0])
        t = np.exp(coupling * np.outer(spins, spins) + field * (spins[:, None] + spins[None]) / 2)
        lam, vec = np.linalg.eigh(t)
        lam, vec = lam[::-1], vec[:, ::-1]  # lam[0] largest
        d = np.arange(n + 1)[:, None, None]
        ratio = lam[1] / lam[0]
        power = np.outer(vec[:, 0], vec[:, 0])[None] + ratio ** d * np.outer(vec[:, 1], vec[:, 1])[
            None
        ]
        with np.errstate(divide="ignore"):
            self.log_power = np.log(np.maximum(power, 0.0))  # [d, a, b]: log T^d / lam0^d
        u = np.exp(field * spins / 2)
        self.log_end = np.log(np.einsum("a,dab->db", u, power))  # [d, b]: log u^T T^d
        self.name = f"ising_chain(J={coupling:g})"
        self._cache_order, self._cache = None, {}

    def _logits(self, sites, left, left_value, right, right_value):
        """Logit of s = +1 for free ``sites`` with nearest fixed neighbours (-1: none)."""
        n = self.n
        has_left, has_right = left >= 0, right >= 0
        lv, rv = np.maximum(left_value, 0), np.maximum(right_value, 0)
        dl = np.where(has_left, sites - left, sites)
        dr = np.where(has_right, right - sites, n - 1 - sites)
        left_term = np.where(
            has_left[:, None], self.log_power[dl, lv], self.log_end[dl]
        )  # [m, 2] over s_i
        right_term = np.where(has_right[:, None], self.log_power[dr, :, rv], self.log_end[dr])
        total = left_term + right_term
        return total[:, 1] - total[:, 0]

    def _prefix(self, order, y, a):
        """Sorted fixed sites before step ``a`` and their values (cached: the trials of a
        block share their prefix)."""
        if self._cache_order is not order:
            self._cache_order, self._cache = order, {}
        key = (a, y[:a].tobytes())
        hit = self._cache.get(key)
        if hit is None:
            sites = order[:a]
            index = np.argsort(sites, kind="stable")
            hit = (sites[index], y[:a][index].astype(np.int64))
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def _neighbours(self, fixed, values, sites):
        m = len(sites)
        left, right = np.full(m, -1), np.full(m, -1)
        lv, rv = np.zeros(m, np.int64), np.zeros(m, np.int64)
        if len(fixed):
            pos = np.searchsorted(fixed, sites)
            ok = pos > 0
            left[ok], lv[ok] = fixed[pos[ok] - 1], values[pos[ok] - 1]
            ok = pos < len(fixed)
            right[ok], rv[ok] = fixed[pos[ok]], values[pos[ok]]
        return left, lv, right, rv

    def frozen_rows(self, order, y, a, m):
        fixed, values = self._prefix(order, y, a)
        sites = order[a : a + m]
        left, lv, right, rv = self._neighbours(fixed, values, sites)
        return binary_rows(self._logits(sites, left, lv, right, rv))

    def path_rows(self, order, y, a, b):
        fixed, values = self._prefix(order, y, a)
        sites = order[a:b]
        m = b - a
        left, lv, right, rv = self._neighbours(fixed, values, sites)
        # nearest fixed neighbours among the block's earlier steps (a sorted list)
        block_sites: list[int] = []
        block_values: dict[int, int] = {}
        block_y = y[a:b]
        for j in range(m):
            s = int(sites[j])
            i = bisect.bisect_left(block_sites, s)
            if i > 0 and block_sites[i - 1] > left[j]:
                left[j] = block_sites[i - 1]
                lv[j] = block_values[left[j]]
            if i < len(block_sites) and (right[j] < 0 or block_sites[i] < right[j]):
                right[j] = block_sites[i]
                rv[j] = block_values[right[j]]
            block_sites.insert(i, s)
            block_values[s] = int(block_y[j])
        return binary_rows(self._logits(sites, left, lv, right, rv))

    def log_weight(self, x):
        s = 2.0 * x - 1
        return self.coupling * (s[..., 1:] * s[..., :-1]).sum(-1) + self.field * s.sum(-1)


class Hopfield:
    """The project's :class:`~numpyro_autospec.oracles.HopfieldOracle` (a learned-like,
    *inconsistent* logistic model): a free site's logit of :math:`s_i = +1` is
    :math:`2(h + \\beta \\sum_r \\xi_{ri} m_r)`, :math:`m_r = \\frac1n \\sum_{j \\text{ pinned}}
    \\xi_{rj} s_j`.  The patterns are drawn as ``HopfieldOracle.random(PRNGKey(seed), ...)``
    draws them, so both describe the same target."""

    q = 2

    def __init__(self, n: int, num_patterns: float, beta: float, h: float = 0.0, seed: int = 0,
                 patterns=None):
        if patterns is None:
            import jax

            patterns = np.asarray(
                jax.random.rademacher(jax.random.PRNGKey(seed), (int(num_patterns), n))
            )
        self.patterns = np.asarray(patterns, np.float64)
        self.n, self.beta, self.h = n, beta, h
        self._order = None
        self.name = f"hopfield(R={int(num_patterns)},beta={beta:g})"

    def _ordered(self, order):
        if self._order is not order:
            self._order, self._xi = order, self.patterns[:, order]
        return self._xi

    def _logit(self, xi_sites, overlaps):
        return 2.0 * (self.h + self.beta / self.n * np.einsum("rm,rm->m", xi_sites, overlaps))

    def path_rows(self, order, y, a, b):
        xi = self._ordered(order)
        s = 2.0 * y - 1.0
        base = xi[:, :a] @ s[:a]
        steps = np.cumsum(xi[:, a : b - 1] * s[a : b - 1], axis=1)
        overlaps = base[:, None] + np.concatenate([np.zeros((len(base), 1)), steps], axis=1)
        return binary_rows(self._logit(xi[:, a:b], overlaps))

    def frozen_rows(self, order, y, a, m):
        xi = self._ordered(order)
        base = xi[:, :a] @ (2.0 * y[:a] - 1.0)
        return binary_rows(self._logit(xi[:, a : a + m], np.repeat(base[:, None], m, 1)))


# ----------------------------------------------------------------------------- samplers


class Cost:
    __slots__ = ("rounds", "queries")

    def __init__(self):
        self.rounds = 0
        self.queries = 0


class Sampler:
    """Shared root machinery.  ``draw(rng) -> (x_sites, rounds, queries)``."""

    def __init__(self, oracle, lookahead: bool = True):
        self.o = oracle
        self.n = oracle.n
        self.lookahead = lookahead
        self.prequery = False  # PROPOSED "correction lookahead", see verify_step

    def wants_lookahead(self, end):
        return self.lookahead and end < self.n

    # --- one verification step (assd / block): draft [c, e), score, verify
    def verify_step(self, rng, order, y, c, e, have, rule):
        rounds = queries = 0
        if not have:
            rounds = queries = 1
        frozen = self.o.frozen_rows(order, y, c, e - c)
        ys = y.copy()
        ys[c:e] = sample_rows(rng, frozen)
        rows = self.o.path_rows(order, ys, c, e)
        look = self.wants_lookahead(e)
        queries += (e - c - 1) + look
        if e - c > 1 or look:
            rounds += 1
        if self.prequery:
            # correction lookahead: the scoring round also queries, for every site j of the
            # window and every value v != draft, the prefix (draft[c..c+j), v); so the query at
            # the restart point is known whatever the verdict: k (q - 1) extra queries
            queries += (e - c) * (self.o.q - 1)
        kept, correction = rule(rng, rows, frozen, ys[c:e])
        if kept == e - c:
            return ys, e, look, rounds, queries, kept
        ys[c + kept] = correction
        return ys, c + kept + 1, self.prequery and c + kept + 1 < self.n, rounds, queries, kept

    def finish(self, order, y, rounds, queries):
        x = np.empty(self.n, np.int8)
        x[order] = y
        return x, rounds, queries


def residual_sample(rng, log_w, target_row, draft_row):
    residual = np.maximum(np.exp(log_w + target_row) - np.exp(draft_row), 0.0)
    if residual.sum() <= 0:
        residual = np.exp(target_row)
    return int(rng.choice(len(residual), p=residual / residual.sum()))


def token_rule(rng, rows, frozen, values):
    gamma = len(values)
    log_ratio = pick(rows, values) - pick(frozen, values)
    rejected = np.log(rng.random(gamma)) >= np.minimum(log_ratio, 0.0)
    if not rejected.any():
        return gamma, None
    kept = int(np.argmax(rejected))
    return kept, residual_sample(rng, 0.0, rows[kept], frozen[kept])


def block_rule(rng, rows, frozen, values):
    """Block verification (Sun et al. 2025), as ``numpyro_autospec.verification``."""
    gamma = len(values)
    log_ratio = pick(rows, values) - pick(frozen, values)
    log_w = np.zeros(gamma + 1)
    for i in range(gamma):
        log_w[i + 1] = min(log_w[i] + log_ratio[i], 0.0)
    w = np.exp(log_w[:-1])
    residual = np.maximum(np.exp(log_w[:-1, None] + rows) - np.exp(frozen), 0.0).sum(-1)
    denominator = residual + 1.0 - w
    stop = np.where(denominator > 0, residual / np.where(denominator > 0, denominator, 1.0), 1.0)
    stop = np.append(stop, np.exp(log_w[gamma]))
    eta = rng.random(gamma + 1) < stop
    eta[0] = True
    kept = int(gamma - np.argmax(eta[::-1]))
    if kept == gamma:
        return gamma, None
    return kept, residual_sample(rng, log_w[kept], rows[kept], frozen[kept])


RULES = {"token": token_rule, "block": block_rule}


class Verify(Sampler):
    """ASSD (``rule='token'``) or block verification (``rule='block'``), window ``k``."""

    def __init__(self, oracle, k, rule="token", lookahead=True):
        super().__init__(oracle, lookahead)
        self.k, self.rule = k, RULES[rule]

    def draw(self, rng):
        n = self.n
        order = rng.permutation(n)
        y = np.zeros(n, np.int8)
        c, have, rounds, queries = 0, False, 0, 0
        while c < n:
            e = min(c + self.k, n)
            y, c, have, r, qq, _ = self.verify_step(rng, order, y, c, e, have, self.rule)
            rounds, queries = rounds + r, queries + qq
        return self.finish(order, y, rounds, queries)


class Adaptive(Verify):
    """``block``/``assd`` with a window chosen, before each draft, from the kept lengths of the
    draw's earlier windows: ``k = clip(scale * mean kept, k_min, k_max)``.  Exact: the window is a
    function of the past only."""

    def __init__(self, oracle, k, rule="block", lookahead=True, scale=2.0, k_min=8, k_max=None):
        super().__init__(oracle, k, rule, lookahead)
        self.scale, self.k_min = scale, k_min
        self.k_max = k_max or oracle.n

    def draw(self, rng):
        n = self.n
        order = rng.permutation(n)
        y = np.zeros(n, np.int8)
        c, have, rounds, queries = 0, False, 0, 0
        window, total_kept, count = self.k, 0.0, 0
        while c < n:
            e = min(c + window, n)
            y, c2, have, r, qq, kept = self.verify_step(rng, order, y, c, e, have, self.rule)
            total_kept, count = total_kept + kept + (kept < e - c), count + 1
            rounds, queries, c = rounds + r, queries + qq, c2
            window = int(np.clip(self.scale * total_kept / count, self.k_min, self.k_max))
        return self.finish(order, y, rounds, queries)


class Autospec(Sampler):
    """The paper's recursion with the engine's knobs (docs/algorithm.md section 3)."""

    def __init__(self, oracle, block=None, leaf=1, growth=1.0, lookahead=True):
        super().__init__(oracle, lookahead)
        self.block = oracle.n if block is None else max(1, min(int(block), oracle.n))
        self.leaf, self.growth = leaf, growth

    def batch_size(self, r):
        return max(1, math.ceil((1.0 + self.growth) ** r - 1e-9))

    def sample_block(self, rng, order, y, a, m, have, root=False):
        """``(y, log_mu, have_next, rounds, queries)`` with steps [a, a+m) ~ mu(. | prefix).
        With ``root``, ``self.root_accepted`` tells whether the speculation was accepted."""
        o = self.o
        if m <= self.leaf:
            rounds = queries = 0
            log_mu = 0.0
            y = y.copy()
            for j in range(m):
                if not have:
                    rounds, queries = rounds + 1, queries + 1
                row = o.path_rows(order, y, a + j, a + j + 1)[0]
                v = sample_rows(rng, row[None])[0]
                y[a + j] = v
                log_mu += row[v]
                have = False
            return y, log_mu, False, rounds, queries
        rounds = queries = 0
        if not have:
            rounds = queries = 1
        frozen = o.frozen_rows(order, y, a, m)
        ys = y.copy()
        ys[a : a + m] = sample_rows(rng, frozen)
        log_nu = pick(frozen, ys[a : a + m]).sum()
        log_mu = pick(o.path_rows(order, ys, a, a + m), ys[a : a + m]).sum()
        look = self.wants_lookahead(a + m)
        rounds, queries = rounds + 1, queries + (m - 1) + look
        accepted = np.log(rng.random()) < log_mu - log_nu
        if root:
            self.root_accepted = accepted
        if accepted:
            return ys, log_mu, look, rounds, queries
        return self.residual(rng, order, y, a, m, frozen, rounds, queries)

    def residual(self, rng, order, y, a, m, frozen, rounds, queries):
        half = (m + 1) // 2
        batch = 0
        while True:
            outcomes = []
            for _ in range(self.batch_size(batch)):
                left = self.sample_block(rng, order, y, a, half, True)
                right = self.sample_block(rng, order, left[0], a + half, m - half, left[2])
                yt = right[0]
                log_mu_y = left[1] + right[1]
                log_nu_y = pick(frozen, yt[a : a + m]).sum()
                d = log_nu_y - log_mu_y
                accepted = d < 0 and np.log(rng.random()) < np.log(-np.expm1(d))
                outcomes.append((accepted, yt, log_mu_y, right[2], left[3] + right[3],
                                 left[4] + right[4]))
                if accepted:  # trials after the winner only cost queries (below)
                    break
            batch += 1
            winner = next((i for i, t in enumerate(outcomes) if t[0]), None)
            rounds += max(t[4] for t in outcomes)
            queries += sum(t[5] for t in outcomes)
            if winner is not None:
                _, yt, log_mu_y, look, _, _ = outcomes[winner]
                return yt, log_mu_y, look, rounds, queries

    def draw(self, rng):
        n = self.n
        order = rng.permutation(n)
        y = np.zeros(n, np.int8)
        c, have, rounds, queries = 0, False, 0, 0
        while c < n:
            e = min(c + self.block, n)
            y, _, have, r, qq = self.sample_block(rng, order, y, c, e - c, have)
            rounds, queries, c = rounds + r, queries + qq, e
        return self.finish(order, y, rounds, queries)


class AdaptiveAutospec(Autospec):
    """PROPOSED knob (i) for the paper's root: the root block size doubles after a root block
    whose speculation was accepted and halves after one that was rejected, within
    ``[b_min, b_max]`` (exact: chosen from the past only)."""

    def __init__(self, oracle, block, leaf=1, growth=1.0, lookahead=True, b_min=None,
                 b_max=None):
        super().__init__(oracle, block, leaf, growth, lookahead)
        self.b_min = b_min or max(2, self.block // 4)
        self.b_max = b_max or oracle.n

    def draw(self, rng):
        n = self.n
        order = rng.permutation(n)
        y = np.zeros(n, np.int8)
        c, have, rounds, queries, size = 0, False, 0, 0, self.block
        while c < n:
            e = min(c + size, n)
            self.root_accepted = True
            y, _, have, r, qq = self.sample_block(rng, order, y, c, e - c, have, root=True)
            rounds, queries, c = rounds + r, queries + qq, e
            size = min(2 * size, self.b_max) if self.root_accepted else max(size // 2, self.b_min)
        return self.finish(order, y, rounds, queries)


class Hybrid(Autospec):
    """The default root for autospec (``RootPolicy``).  Windows of ``k`` sites are drafted
    from the speculation and verified with block verification (one scoring round, the same
    round the paper's speculation costs).  If the kept prefix (+ correction) covers less than
    ``frac`` of the window, the **rest of the window** is sampled with the paper's recursion
    (:meth:`Autospec.sample_block`: sequence-level acceptance + residual trials); otherwise
    the next window starts right after the correction.

    Exact: block verification leaves the kept prefix + correction distributed so that continuing
    with *any* exact sampler of mu(. | prefix) is exact, the recursion is exact, and the choice
    between them (and the window size) depends on the past only.

    Worst case: a window either advances ``>= frac * k`` steps in at most 2 rounds, or reaches
    its end through the paper's recursion on a block of ``< k`` steps, so the paper's
    round bound holds window by window (``frac > 0``).  ``frac = 0`` is plain block
    verification (the ``block`` method); ``frac = 1`` always recurses on a partial window.

    ``floor`` (if given) replaces the threshold ``frac * k`` by an absolute number of steps, and
    ``fallback`` (if given) makes the recursion sample the next ``fallback`` steps instead of the
    rest of the window (the worst case then holds with ``floor, fallback ~ sqrt(n)``).

    ``adapt > 0`` sets the next window to ``clip(adapt * mean advance so far, k_min, k_max)``
    (``k`` is the first window)."""

    def __init__(self, oracle, k, leaf=1, growth=1.0, lookahead=True, frac=1.0, adapt=0.0,
                 k_min=None, k_max=None, floor=None, fallback=None):
        super().__init__(oracle, None, leaf, growth, lookahead)
        self.k, self.frac, self.adapt = int(k), frac, adapt
        self.k_min = int(k_min) if k_min else max(4, int(k) // 4)
        self.k_max = int(k_max) if k_max else oracle.n
        self.floor = floor  # absolute advance threshold (replaces frac * window)
        self.fallback = fallback  # size of the recursion block (None: rest of the window)
        self.windows_run = self.fallbacks_run = 0  # counters over all draws

    def draw(self, rng):
        n = self.n
        order = rng.permutation(n)
        y = np.zeros(n, np.int8)
        c, have, rounds, queries = 0, False, 0, 0
        window, advanced, windows = self.k, 0, 0
        while c < n:
            e = min(c + window, n)
            y, c2, have, r, qq, _ = self.verify_step(rng, order, y, c, e, have, block_rule)
            rounds, queries = rounds + r, queries + qq
            threshold = self.frac * (e - c) if self.floor is None else self.floor
            if c2 < e and c2 - c < threshold:
                end = e if self.fallback is None else min(c2 + self.fallback, n)
                self.fallbacks_run += 1
                y, _, have, r, qq = self.sample_block(rng, order, y, c2, end - c2, have)
                rounds, queries, c2 = rounds + r, queries + qq, end
            advanced, windows, c = advanced + (c2 - c), windows + 1, c2
            self.windows_run += 1
            if self.adapt > 0:
                window = int(np.clip(self.adapt * advanced / windows, self.k_min, self.k_max))
        return self.finish(order, y, rounds, queries)


# ----------------------------------------------------------------------------- registry


def make_oracle(target: str, n: int, seed: int = 0):
    kind, _, param = target.partition(":")
    if kind == "cw":
        return CurieWeiss(n, float(param or 1.0))
    if kind == "ising":
        return IsingChain(n, float(param or 1.0))
    if kind == "hopfield":
        return Hopfield(n, *[float(v) for v in (param or "16,1.0").split(",")], seed=seed)
    raise ValueError(f"unknown target {target!r}")


def resolve_size(value, n):
    """``None``/``'none'`` -> None; ``'2s'`` -> 2 sqrt(n) (rounded); ``'64'`` -> 64."""
    if value is None or str(value).lower() == "none":
        return None
    value = str(value)
    if value.endswith("s"):
        return max(1, int(round(float(value[:-1]) * math.sqrt(n))))
    if value.endswith("n"):
        return max(1, int(round(float(value[:-1]) * n)))
    return int(float(value))


def make_sampler(oracle, method: str, **kw):
    """A sampler from a method name and knobs (sizes may be given as ``'2s'``: 2 sqrt(n));
    ``prequery=1`` turns on the correction lookahead of :meth:`Sampler.verify_step`."""
    sampler = _make_sampler(oracle, method, **kw)
    sampler.prequery = bool(int(kw.get("prequery", 0)))
    return sampler


def _make_sampler(oracle, method: str, **kw):
    n = oracle.n
    look = bool(kw.get("lookahead", True))
    if method == "autospec":
        return Autospec(oracle, resolve_size(kw.get("block"), n), int(kw.get("leaf", 1)),
                        float(kw.get("growth", 1.0)), look)
    if method == "autospec_aimd":
        return AdaptiveAutospec(oracle, resolve_size(kw.get("block"), n), int(kw.get("leaf", 1)),
                                float(kw.get("growth", 1.0)), look,
                                resolve_size(kw.get("b_min"), n), resolve_size(kw.get("b_max"), n))
    if method in ("assd", "block"):
        return Verify(oracle, resolve_size(kw["k"], n), "token" if method == "assd" else "block",
                      look)
    if method == "hybrid":
        return Hybrid(oracle, resolve_size(kw["k"], n), int(kw.get("leaf", 1)),
                      float(kw.get("growth", 1.0)), look, float(kw.get("frac", 1.0)),
                      float(kw.get("adapt", 0.0)), resolve_size(kw.get("k_min"), n),
                      resolve_size(kw.get("k_max"), n), resolve_size(kw.get("floor"), n),
                      resolve_size(kw.get("fb"), n))
    if method == "adaptive":
        return Adaptive(oracle, resolve_size(kw.get("k", 16), n), kw.get("rule", "block"), look,
                        float(kw.get("scale", 2.0)))
    raise ValueError(method)


def measure(sampler, draws: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    rounds, queries = np.empty(draws), np.empty(draws)
    for i in range(draws):
        _, rounds[i], queries[i] = sampler.draw(rng)
    return rounds, queries


# ----------------------------------------------------------------------------- exactness


def exact_law(oracle):
    """Law of sequential any-order sampling with a uniformly random order, by enumeration
    (equals the target for a consistent oracle)."""
    import itertools

    n = oracle.n
    states = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.int8)
    law = np.zeros(2**n)
    orders = list(itertools.permutations(range(n)))
    for order in orders:
        order = np.array(order)
        for index, x in enumerate(states):
            y = x[order]
            law[index] += np.exp(pick(oracle.path_rows(order, y, 0, n), y).sum())
    return law / len(orders)


def check_exact(oracle, sampler, draws: int, seed: int = 0):
    """Chi-square p-value of the sampler's law against the enumerated law (small n)."""
    from scipy import stats

    n = oracle.n
    p = exact_law(oracle)
    rng = np.random.default_rng(seed)
    counts = np.zeros(2**n)
    for _ in range(draws):
        x, _, _ = sampler.draw(rng)
        counts[int((x.astype(np.int64) << np.arange(n)).sum())] += 1
    expected = p * draws
    keep = expected >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp).pvalue


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="cw:1.0", help="cw:BETA, ising:J, hopfield:R,BETA")
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--method", default="autospec")
    parser.add_argument("--k", default="64", help="window (assd/block/hybrid); '2s' = 2 sqrt(n)")
    parser.add_argument("--block", default=None, help="autospec block_size; '2s' = 2 sqrt(n)")
    parser.add_argument("--frac", type=float, default=1.0)
    parser.add_argument("--adapt", type=float, default=0.0)
    parser.add_argument("--leaf", type=int, default=1)
    parser.add_argument("--growth", type=float, default=1.0)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="exactness test on small n")
    args = parser.parse_args(argv)
    oracle = make_oracle(args.target, args.n)
    sampler = make_sampler(oracle, args.method, k=args.k, block=args.block, leaf=args.leaf,
                           growth=args.growth, frac=args.frac, adapt=args.adapt)
    if args.check:
        print(f"p-value {check_exact(oracle, sampler, args.draws, args.seed):.4f}")
        return
    t = time.perf_counter()
    rounds, queries = measure(sampler, args.draws, args.seed)
    print(f"{oracle.name} n={args.n} {args.method}: rounds {rounds.mean():.1f} "
          f"(p90 {np.percentile(rounds, 90):.0f}) queries {queries.mean():.0f} "
          f"[{time.perf_counter() - t:.1f}s]")


if __name__ == "__main__":
    sys.exit(main())
