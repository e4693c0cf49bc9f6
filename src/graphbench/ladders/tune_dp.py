"""The exact dynamic program of ladder tuning (see graphbench.ladders.tune for the method).

LadderProblem holds the candidate sizes, the forced rungs and the run-cost matrix of one problem;
`solve` gives the best ladder with exactly k rungs for every k, `solve_budget` the same under a
graph-memory budget (a third DP dimension: the sum of the rung sizes). Pure Python and numpy; no torch.
"""

from __future__ import annotations

import math

import numpy as np

from graphbench.errors import GraphbenchError
from graphbench.ladders.tune_inputs import ceil_multiple, check_int, check_objective
from graphbench.ladders.distributions import MAX_BATCH_SIZE

_MAX_BUDGET_WORK = 4e8  # numpy element operations of the memory-budget DP
_MAX_BUDGET_CELLS = 6e7  # back-pointers it stores
# The DP keeps (K + 1) x (K + 1) tables of K candidate sizes: 2048 is ~34 MB each (32768 sizes were 8 GiB)
MAX_CANDIDATES = 2048


class LadderProblem:
    """Candidates, forced rungs and the run-cost matrix of one tuning problem."""

    def __init__(self, dist, objective, top, multiple_of, required, candidates, step_ms=None) -> None:
        check_objective(objective)
        if objective == "time" and step_ms is None:
            raise GraphbenchError("the time objective needs a measured step-time curve (--curve)")
        m = check_int("multiple_of", multiple_of)
        if top is None:
            top = ceil_multiple(dist.max_size, m)
        elif check_int("top", top) > MAX_BATCH_SIZE:
            raise GraphbenchError(f"top must be at most {MAX_BATCH_SIZE} tokens, got {top}")
        elif top % m:
            raise GraphbenchError(f"top {top} is not a multiple of {m}")
        req = sorted({check_int("required size", s) for s in required})
        for s in req:
            if s % m or s > top:
                why = f"is not a multiple of {m}" if s % m else f"is above the top {top}"
                raise GraphbenchError(f"required size {s} {why}")
        base = dist.sizes if candidates is None else [check_int("candidate size", s) for s in candidates]
        cand = sorted({c for c in (ceil_multiple(s, m) for s in base) if c <= top} | set(req) | {top})
        if len(cand) > MAX_CANDIDATES:
            raise GraphbenchError(
                f"{len(cand)} candidate sizes up to {top}: the exact search takes at most {MAX_CANDIDATES} "
                f"(its tables grow with the square); coarsen them with --multiple-of (e.g. "
                f"{ceil_multiple(-(-top // MAX_CANDIDATES), 8)}), list them with --candidates, or lower --top")
        self.dist, self.objective, self.top, self.required = dist, objective, top, tuple(req)
        self.cand, self.K = cand, len(cand)
        self.forced_sizes = tuple(sorted(set(req) | {top}))
        self.forced = len(self.forced_sizes)
        sizes, probs = list(dist.sizes), [dist[s] for s in dist.sizes]
        P, S, i, acc_p, acc_s = [0.0], [0.0], 0, [], []
        for c in cand:
            while i < len(sizes) and sizes[i] <= c:
                acc_p.append(probs[i])
                acc_s.append(probs[i] * sizes[i])
                i += 1
            P.append(math.fsum(acc_p))
            S.append(math.fsum(acc_s))
        P_, S_ = np.array(P), np.array(S)
        c = np.array([0, *cand], dtype=float)
        mass = P_[None, :] - P_[:, None]
        msum = S_[None, :] - S_[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            if objective == "time":  # a rung's recording runs every batch it serves: t(c_j) * mass
                t = np.array([0.0, *(step_ms(s) for s in cand)])
                cost = t[None, :] * mass
            elif objective == "tokens":
                cost = c[None, :] * mass - msum
            else:
                cost = mass - msum / c[None, :]
        cost = np.maximum(cost, 0.0)
        # A transition i -> j is allowed when i < j and no forced rung lies strictly between them.
        forced_idx = {cand.index(s) + 1 for s in self.forced_sizes}
        next_forced = np.empty(self.K + 1, dtype=int)
        nxt = self.K
        for i in range(self.K, -1, -1):
            next_forced[i] = nxt
            if i in forced_idx:
                nxt = i
        idx = np.arange(self.K + 1)
        allowed = (idx[None, :] > idx[:, None]) & (idx[None, :] <= next_forced[:, None])
        self.cost = np.where(allowed, cost, np.inf)

    def solve(self, limit: int) -> tuple[list[float], list[tuple[int, ...] | None]]:
        """Best cost and sizes of a ladder with exactly k rungs ending at the top, k = 0..limit."""
        K = self.K
        f = np.full(K + 1, np.inf)
        f[0] = 0.0
        back = []
        values, paths = [math.inf], [None]
        for _ in range(limit):
            total = f[:, None] + self.cost
            arg = total.argmin(axis=0)
            f = total[arg, np.arange(K + 1)]
            back.append(arg)
            values.append(float(f[K]))
            paths.append(self._path(back, K) if math.isfinite(f[K]) else None)
        return values, paths

    def _path(self, back: list[np.ndarray], j: int) -> tuple[int, ...]:
        sizes = []
        for arg in reversed(back):
            sizes.append(self.cand[j - 1])
            j = int(arg[j])
        return tuple(reversed(sizes))

    def solve_budget(
        self, limit: int, budgets: list[tuple[float, float, float]]
    ) -> tuple[list[float], list[tuple[int, ...] | None]]:
        """As `solve`, but only ladders with a*k + b*sum(sizes) <= budget for every (a, b, budget) given,
        some b > 0 (the sum is tracked exactly; a limit with b = 0 caps k alone)."""
        K, g = self.K, math.gcd(*self.cand)
        units = [0, *(c // g for c in self.cand)]

        def bound(k: int) -> float:  # the largest sum of units a ladder of k rungs may have
            out = math.inf
            for a, b, budget in budgets:
                if budget - a * k < -1e-9 * max(abs(budget), 1.0):
                    return -1
                if b > 0:
                    out = min(out, math.floor((budget - a * k) / (b * g) * (1 + 1e-12) + 1e-9))
            return out

        smax = int(min(bound(self.forced), sum(sorted(units)[-limit:])))
        if smax < 0:
            return [math.inf] * (limit + 1), [None] * (limit + 1)
        work, cells = limit * K * K * (smax + 1) / 2, limit * (K + 1) * (smax + 1)
        if work > _MAX_BUDGET_WORK or cells > _MAX_BUDGET_CELLS:
            raise GraphbenchError(
                f"the exact budget search is too large ({K} candidate sizes, sums up to {smax * g} "
                f"tokens, {limit} graphs); narrow it with fewer --max-graphs, --candidates or --multiple-of"
            )
        F = np.full((K + 1, smax + 1), np.inf)
        F[0, 0] = 0.0
        back: list[np.ndarray] = []
        values, paths = [math.inf], [None]
        cols = np.arange(smax + 1)
        for k in range(1, limit + 1):
            new = np.full_like(F, np.inf)
            arg = np.zeros((K + 1, smax + 1), dtype=np.int32)
            for j in range(1, K + 1):
                u = units[j]
                src = np.nonzero(np.isfinite(self.cost[:j, j]))[0]
                if u > smax or not len(src):
                    continue
                total = F[src, : smax + 1 - u] + self.cost[src, j][:, None]
                best = total.argmin(axis=0)
                new[j, u:] = total[best, cols[: smax + 1 - u]]
                arg[j, u:] = src[best]
            F = new
            back.append(arg)
            top_sum = min(smax, bound(k))
            row = F[K, : int(top_sum) + 1] if top_sum >= 0 else np.array([])
            if not len(row) or not np.isfinite(row).any():
                values.append(math.inf)
                paths.append(None)
                continue
            s = int(row.argmin())
            values.append(float(row[s]))
            sizes, j = [], K
            for step in reversed(back):
                sizes.append(self.cand[j - 1])
                j, s = int(step[j, s]), s - units[j]
            paths.append(tuple(reversed(sizes)))
        return values, paths
