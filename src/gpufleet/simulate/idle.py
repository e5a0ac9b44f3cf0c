"""Which idle GPUs a waiting job could have used: per pool, while the run goes.

After every settled instant the watch looks at each pool's free devices and at the jobs that wait
(grouped by what they ask: team, resource, devices per pod, GPU models). A pool's free devices of a
resource count as *usable idle* while some waiting job asks that resource, may use the pool (the
queue world: its team reaches the pool's flavor; first-apply: any GPU node), allows the pool's GPU
model, and has pods small enough for the free room of one node. MIG instances and time-slice
replicas nobody waiting asks for are not usable idle, however many there are.

Two more series feed the pathologies (queue world):

- ``limited:<pool>`` (and ``limited:<pool>:<team>`` per team held back): usable idle while a
  waiting job of a team is held back by a borrowing or lending limit: the team's quota in use
  there plus the job exceeds its reach with the limits, but the job would fit the pool without
  them (``IdleBehindLimits``);
- ``misfit:<pool>`` (MIG and time-sliced pools): idle while a waiting job wants the pool's card in
  a shape no pool it may use offers, whole cards or another MIG profile, that the card could be cut
  into (``SlicingMisfit``).

Jobs no quota can ever admit (``gpufleet.simulate.reach``) are left out of usable idle: nothing can
use idle GPUs for them; they count for ``misfit`` (a MIG profile no pool offers is exactly that). A pool's rates change only when a pod binds or unbinds there, a team's reservation there
changes, or a kind of waiting ask it serves (or misfits) comes or goes, so the watch recomputes
only the pools one of those touched.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction

from gpufleet.placement import Cluster
from gpufleet.placement.node import GPU, mig_resource
from gpufleet.policy import Fleet
from gpufleet.policy.slicing import SlicingMode
from gpufleet.simulate.jobs import JobRun
from gpufleet.simulate.meter import Meter
from gpufleet.simulate.nodes import PoolNodes
from gpufleet.simulate.reach import Reaches

Demand = tuple[str, str, int, tuple[str, ...], int]  # team, resource, devices per pod, GPU models, total


def demand_of(run: JobRun) -> Demand:
    job, ask = run.job, run.ask
    return (job.team, ask.resource, ask.count, tuple(job.gpu_models), job.pods * ask.count)


class IdleWatch:
    def __new__(cls, *_args: object, **_kwargs: object) -> IdleWatch:
        # Bare, as pickle makes it before setting its attributes: compiled, a class without its
        # own __new__ would run __init__ with no arguments there (gpufleet.picklable)
        return super().__new__(cls)

    def __init__(
        self, fleet: Fleet, pools: dict[str, PoolNodes], cluster: Cluster, meter: Meter, reaches: Reaches | None
    ) -> None:
        self.pools = pools
        self.cluster = cluster
        self.meter = meter
        self.reaches = reaches  # None: the first-apply world (no quota, no taints)
        self.demand: Counter[Demand] = Counter()
        self._offered: dict[Demand, bool] = {}
        self.node_free: dict[str, dict[str, int]] = {}
        self.pool_free: dict[str, Counter[str]] = {}  # pool -> resource -> free units
        self.pool_hist: dict[str, dict[str, Counter[int]]] = {}  # pool -> resource -> free units -> nodes
        self.worth: dict[str, dict[str, float]] = {}  # pool -> resource -> GPUs one unit is worth
        for name, pool in pools.items():
            self.pool_free[name] = Counter()
            self.pool_hist[name] = defaultdict(Counter)
            worth: dict[str, float] = {}
            for spec in pool.nodes:
                if spec.full_cards:
                    worth[spec.shared_resource] = float(pool.replica_worth)
                for profile in {p for card in spec.mig for p in card}:
                    worth[mig_resource(profile)] = float(pool.mig_worth.get(profile, Fraction(0)))
                free = self._node_free(spec.name)
                self.node_free[spec.name] = free
                for resource, n in free.items():
                    self.pool_free[name][resource] += n
                    self.pool_hist[name][resource][n] += 1
            self.worth[name] = worth
        self.stuck: Counter[Demand] = Counter()  # jobs no quota admits: only a new slicing could serve them
        self.quota: Counter[tuple[str, str, str]] = Counter()  # (team, pool, resource) -> units reserved
        self.allowed: dict[str, frozenset[str]] = {}
        self.reach: dict[tuple[str, str, str], tuple[int, bool]] = {}
        teams = {t.name for t in fleet.policy.teams}
        queued = {c.name for c in fleet.queued_pools()}
        for name, cap in fleet.pools.items():
            if reaches is None:
                self.allowed[name] = frozenset(teams)
            else:
                ok = {t for t in teams if name in queued and fleet.reachable(t, cap.pool)}
                self.allowed[name] = frozenset(ok)
        if reaches is not None:
            for team, entries in reaches.by_team.items():
                for r in entries:
                    self.reach[(team, r.pool, r.resource)] = (r.reach, r.limited)
        self.geometry = {name: cap.gpu.mig for name, cap in fleet.pools.items()}
        # The pools whose rates may have changed since the last refresh: ``refresh`` leaves the others
        # be (setting a series to its rate changes nothing). A pool's rates read its free room
        # (``touch``), its teams' reservations there (``reserve``: a flavor is named after its pool),
        # the waiting kinds of ask it serves and how many are misfits there (``waiting``); each
        # marks the pool it changes, so the list is complete.
        self._stale: set[str] = set(pools)
        self._served: dict[tuple[str, Demand], bool] = {}
        self._misfits: dict[tuple[str, Demand], bool] = {}
        # Per pool: the waiting kinds of ask it serves (``_serves``), in ``demand``'s order, and how
        # many waiting kinds (``demand`` and ``stuck``) are misfits there; the rates last set.
        self._asking: dict[str, dict[Demand, None]] = {name: {} for name in pools}
        self._misfit_asks: Counter[str] = Counter()
        self._rates: dict[str, tuple[float, ...]] = {}
        self._series = {
            name: (
                f"usable:{name}",
                f"limited:{name}",
                f"misfit:{name}",
                [(team, f"limited:{name}:{team}") for team in self.allowed.get(name, ()) if reaches is not None],
            )
            for name in pools
        }
        self.units = {name: pool_units(pool) for name, pool in pools.items()}  # resource -> units the nodes advertise
        for name in pools:
            for series in ("usable", "limited", "misfit"):
                meter.log(f"{series}:{name}")
            for team in sorted(self.allowed.get(name, ())):
                meter.log(f"limited:{name}:{team}")

    def waiting(self, run: JobRun, delta: int) -> None:
        counter = self.stuck if run.never else self.demand
        d = demand_of(run)
        before = counter[d]
        counter[d] = before + delta
        if not counter[d]:
            del counter[d]
        if not before or d not in counter:
            # a kind of ask came or went (the rates read which kinds wait, not how many)
            came = not before
            for pool in self.pools:
                if self.misfit(pool, d):
                    self._misfit_asks[pool] += 1 if came else -1
                    self._stale.add(pool)
                if counter is self.demand and self._serves(pool, d):
                    if came:  # in the order of ``demand``'s keys
                        self._asking[pool][d] = None
                    else:
                        del self._asking[pool][d]
                    self._stale.add(pool)

    def reserve(self, team: str, pool: str, resource: str, units: int) -> None:
        self.quota[(team, pool, resource)] += units
        self._stale.add(pool)

    def touch(self, pool: str, node: str) -> None:
        """A pod bound or unbound on ``node`` of ``pool``: update the pool's free room from that node."""
        before = self.node_free[node]
        after = self._node_free(node)
        total, hist = self.pool_free[pool], self.pool_hist[pool]
        for resource in before.keys() | after.keys():
            old, new = before.get(resource, 0), after.get(resource, 0)
            if old != new:
                total[resource] += new - old
                hist[resource][old] -= 1
                hist[resource][new] += 1
        self.node_free[node] = after
        self._stale.add(pool)

    def _node_free(self, name: str) -> dict[str, int]:
        """Free units per GPU resource on one node (whole cards, time-slice replicas, MIG instances)."""
        node = self.cluster.node(name)
        spec = node.spec
        free: dict[str, int] = {}
        if spec.full_cards:
            if node.timesliced:
                free[spec.shared_resource] = len(spec.full_cards) * spec.timeslice_replicas - sum(node.used_replicas)
            else:
                free[GPU] = sum(1 for f in node.free if f == 1000)
        for profile, slots in node.mig_free.items():
            free[mig_resource(profile)] = len(slots)
        return free

    def _most(self, pool: str, resource: str) -> int:
        """The most free units of ``resource`` on one node of the pool."""
        return max((k for k, n in self.pool_hist[pool][resource].items() if n > 0), default=0)

    def refresh(self) -> None:
        stale = self._stale
        if not stale:
            return
        m = self.meter
        for name, pool in self.pools.items():
            if name not in stale:
                continue
            usable = limited = misfit = 0.0
            by_team: dict[str, float] = {}
            total, worth = self.pool_free[name], self.worth[name]
            idle = float(sum(total[r] * worth[r] for r in total))
            if idle and (self.demand or self.stuck):  # a full pool has nothing idle to count
                most: dict[str, int] = {}  # the most free units on one node, per resource asked
                used: set[str] = set()
                held_back: set[str] = set()
                teams_back: dict[str, set[str]] = {}
                for team, resource, per_pod, _, whole in self._asking[name]:  # the asks the pool serves
                    if resource not in total:
                        continue
                    top = most.get(resource)
                    if top is None:
                        top = most[resource] = self._most(name, resource)
                    if per_pod <= top:
                        used.add(resource)
                        entry = self.reach.get((team, name, resource))
                        if entry is not None and entry[1]:
                            in_use = self.quota[(team, name, resource)]
                            if in_use + whole > entry[0] and whole <= self.units[name].get(resource, 0):
                                held_back.add(resource)
                                teams_back.setdefault(team, set()).add(resource)
                wrong_shape = pool.mode is not SlicingMode.FULL and self._misfit_asks[name] > 0
                usable = float(sum(total[r] * worth[r] for r in used))
                limited = float(sum(total[r] * worth[r] for r in held_back))
                misfit = idle if wrong_shape else 0.0
                by_team = {t: float(sum(total[r] * worth[r] for r in rs)) for t, rs in teams_back.items()}
            usable_key, limited_key, misfit_key, team_keys = self._series[name]
            rates = (usable, limited, misfit, *(by_team.get(team, 0.0) for team, _ in team_keys))
            if self._rates.get(name) == rates:
                continue  # every series already has its rate
            self._rates[name] = rates
            m.set(usable_key, usable)
            m.set(limited_key, limited)
            m.set(misfit_key, misfit)
            for team, key in team_keys:
                m.set(key, by_team.get(team, 0.0))
        stale.clear()

    def _serves(self, pool: str, d: Demand) -> bool:
        """The ask's team may use the pool and the ask allows its GPU model (fixed: kept)."""
        key = (pool, d)
        found = self._served.get(key)
        if found is None:
            team, _, _, models, _ = d
            found = self._served[key] = team in self.allowed[pool] and (
                not models or self.pools[pool].gpu_model in models
            )
        return found

    def offered(self, d: Demand) -> bool:
        """Some pool the job may use (its team, its GPU models) offers the resource it asks."""
        if d not in self._offered:
            team, resource, _, models, _ = d
            self._offered[d] = any(
                team in self.allowed[name]
                and (not models or pool.gpu_model in models)
                and self.units[name].get(resource, 0) > 0
                for name, pool in self.pools.items()
            )
        return self._offered[d]

    def misfit(self, pool: str, d: Demand) -> bool:
        """The job waits for a shape no pool it may use offers, and ``pool``'s cards, cut otherwise, would."""
        key = (pool, d)
        found = self._misfits.get(key)
        if found is None:  # fixed by the fleet: kept
            found = self._misfits[key] = self._serves(pool, d) and not self.offered(d) and self._could_cut(pool, d[1])
        return found

    def _could_cut(self, pool: str, resource: str) -> bool:
        """Another slicing of the pool's cards would offer ``resource``: whole cards, or a MIG profile
        the card knows."""
        if resource == GPU:
            return True
        geometry = self.geometry[pool]
        prefix = mig_resource("")
        return (
            geometry is not None
            and resource.startswith(prefix)
            and geometry.profile(resource[len(prefix) :]) is not None
        )


def pool_units(pool: PoolNodes) -> dict[str, int]:
    """Units of each GPU resource the pool's nodes advertise."""
    out: Counter[str] = Counter()
    for n in pool.nodes:
        out.update({r: v for r, v in n.allocatable().items() if r not in ("cpu", "memory")})
    return dict(out)
