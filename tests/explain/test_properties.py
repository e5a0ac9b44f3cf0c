"""Properties of ``why``'s answers on random small clusters (two teams sharing one flavor).

Whatever the cluster: each set of ends the answer names does admit the Workload when those end, no
proper part of it does, and the holders' use adds up to what their ClusterQueues report in use.
"""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.explain.live import build_twin
from gpufleet.explain.release import after_ends
from gpufleet.explain.why import explain
from tests.explain.objects import FLAVOR, GPU, cluster_queue, team_setup, workload

FR = f"{FLAVOR}/{GPU}"


@st.composite
def clusters(draw: st.DrawFn) -> list[dict[str, object]]:
    alpha = cluster_queue(
        "alpha",
        draw(st.integers(0, 6)),
        borrowing_limit=draw(st.sampled_from([None, 0, 2])),
        within=draw(st.sampled_from(["Never", "LowerPriority"])),
    )
    beta = cluster_queue("beta", draw(st.integers(0, 6)), borrowing_limit=draw(st.sampled_from([None, 0, 4])))
    objects = team_setup(alpha, beta)
    # running Workloads, admitted in order while they fit (as Kueue would have admitted them)
    room = {"alpha": alpha, "beta": beta}
    used = {"alpha": 0, "beta": 0}
    nominal = {n: q["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] for n, q in room.items()}
    for i in range(draw(st.integers(0, 4))):
        team, gpus = draw(st.sampled_from(["alpha", "beta"])), draw(st.integers(1, 3))
        limit = nominal[team].get("borrowingLimit")
        cap = nominal[team]["nominalQuota"] + (limit if limit is not None else 99)
        total = sum(n["nominalQuota"] for n in nominal.values())
        if used[team] + gpus <= cap and sum(used.values()) + gpus <= total:
            used[team] += gpus
            prio = draw(st.sampled_from([None, "low", "high"]))
            objects.append(workload(team, f"run{i}", pods=1, gpus=gpus, admitted_to=team, priority=prio))
    objects.append(
        workload(
            "alpha",
            "target",
            pods=1,
            gpus=draw(st.integers(1, 6)),
            message="x",
            priority=draw(st.sampled_from([None, "low", "high"])),
        )
    )
    return objects  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(clusters())
def test_named_ends_suffice_and_are_minimal(objects: list[dict[str, object]]) -> None:
    why = explain(objects, "alpha", "target")
    spec = build_twin(objects).spec
    for ends in why.ends.sets if why.ends is not None else ():
        assert after_ends(spec, "alpha/target", ends).admitted_in is not None
        for size in range(1, len(ends)):
            for part in combinations(ends, size):
                assert after_ends(spec, "alpha/target", part).admitted_in is None
    for q in why.queues:
        held = sum(h.uses.get(FR, 0) for h in why.holders if h.cluster_queue == q.name)
        assert held == q.usage.get(FR, 0)
        assert q.borrowed.get(FR, 0) == max(0, q.usage.get(FR, 0) - q.nominal.get(FR, 0))
