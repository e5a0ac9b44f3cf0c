"""The real Kueue as the judge: seeded random scenarios, the twin's prediction against what Kueue does.

Each seed of ``CI_SEEDS`` is a scenario of ``tests/e2e/random_scenarios.py``; the method (two
namespaces per scenario, one relabel releases the Jobs under test, scenarios side by side in disjoint
cohorts, one Kueue restart per Configuration) is described in ``tests/e2e/random_differential.py``. The
scenarios run on a testbed of their own, because Kueue is restarted with other fair-sharing settings
and the e2e fleet's testbed must keep its Configuration. Every seed is a test of its own, so a miss
names its seed; rerun it with ``python -m bench twin_differential --first SEED --count 1``. The 300+
on-demand run is ``python -m bench twin_differential --count 300``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator

import pytest
import yaml

from gpufleet.testbed import Testbed
from tests.e2e.conftest import own_testbed
from tests.e2e.pinned_scenarios import KUEUE_ADMITS, PINNED
from tests.e2e.random_differential import Outcome, clean_up, configure, run_batch, run_seeds
from tests.e2e.random_scenarios import (
    GPU,
    LT_INITIAL,
    LTE_FINAL,
    STRATEGIES,
    Scenario,
    generate,
    job_object,
    queue_objects,
)
from tests.e2e.random_scenarios import Names as ScenarioNames

CI_SEEDS = list(range(32))
BATCH = 13  # the largest Configuration group of CI_SEEDS runs as one batch


# -- the generator (pure) ------------------------------------------------------------------------


def test_a_seed_gives_the_same_scenario_and_it_reads_back_from_its_yaml() -> None:
    for seed in CI_SEEDS:
        scn = generate(seed)
        assert generate(seed) == scn
        assert Scenario.from_dict(yaml.safe_load(scn.to_yaml())) == scn
    assert len({generate(s) for s in CI_SEEDS}) == len(CI_SEEDS)


def _space(seeds: list[int]) -> collections.Counter[str]:
    """Which of the issue's dimensions the seeds' scenarios exercise, counted."""
    seen: collections.Counter[str] = collections.Counter()
    for scn in map(generate, seeds):
        seen[f"config {scn.config.key}"] += 1
        seen[f"{len(scn.cohorts)} cohorts"] += 1
        seen[f"{len(scn.queues)} ClusterQueues"] += 1
        seen[f"{len({f.flavor for q in scn.queues for f in q.flavors})} flavors"] += 1
        seen[f"resources {'+'.join(scn.resources)}"] += 1
        seen["hierarchical cohorts"] += any(c.parent for c in scn.cohorts)
        seen["ClusterQueue without cohort"] += any(q.cohort is None for q in scn.queues)
        for q in scn.queues:
            seen[f"withinClusterQueue {q.within}"] += 1
            seen[f"reclaimWithinCohort {q.reclaim}"] += 1
            seen[f"borrowWithinCohort {q.borrow_within}"] += 1
            seen[f"queueing {q.strategy}"] += 1
            seen[f"weight {q.weight}"] += scn.config.fair_sharing
            quotas = [x for f in q.flavors for x in f.quotas]
            seen["borrowingLimit"] += any(x.borrowing is not None for x in quotas)
            seen["lendingLimit"] += any(x.lending is not None for x in quotas)
        seen["cohort weight 0"] += any(c.weight == "0" for c in scn.cohorts)
        shapes = collections.Counter((j.queue, j.pods, j.requests, j.priority) for j in scn.jobs if not j.before)
        seen["backlog of equivalent Jobs"] += any(n > 1 for n in shapes.values())
        seen["Jobs admitted before the export"] += any(j.before for j in scn.jobs)
        seen["priorities"] += len({j.priority for j in scn.jobs}) > 1
        dominant = {max(j.requests, key=lambda r: r[1] / {GPU: 4, "cpu": 8, "memory": 16}[r[0]])[0] for j in scn.jobs}
        seen["dominant resource varies"] += len(dominant) > 1
        seen["DRA claim Jobs"] += any(j.claims for j in scn.jobs)
        seen["claim Jobs beside device-plugin Jobs"] += any(j.claims for j in scn.jobs) and any(
            not j.claims and dict(j.requests).get(GPU) for j in scn.jobs
        )
    return seen


def test_the_ci_seeds_cover_every_dimension_the_issue_names() -> None:
    seen = _space(CI_SEEDS)
    wanted = [
        *(f"{n} cohorts" for n in (1, 2, 3)),
        *(f"{n} ClusterQueues" for n in range(2, 7)),
        *(f"{n} flavors" for n in (1, 2, 3)),
        "config classical",
        *(f"config fair:{'+'.join(s)}" for s in STRATEGIES),
        *(f"withinClusterQueue {p}" for p in ("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
        *(f"reclaimWithinCohort {p}" for p in ("Never", "LowerPriority", "Any")),
        "borrowWithinCohort LowerPriority",
        "queueing BestEffortFIFO",
        "queueing StrictFIFO",
        "weight 0",
        "weight 2",
        "cohort weight 0",
        "hierarchical cohorts",
        "borrowingLimit",
        "lendingLimit",
        "backlog of equivalent Jobs",
        "Jobs admitted before the export",
        "priorities",
        "dominant resource varies",
        f"resources {GPU}+cpu+memory",
        "DRA claim Jobs",
        "claim Jobs beside device-plugin Jobs",
    ]
    assert [w for w in wanted if not seen[w]] == []
    assert {LTE_FINAL, LT_INITIAL} == {s for group in STRATEGIES for s in group}


@pytest.mark.parametrize("seed", CI_SEEDS[:8])
def test_the_manifests_are_valid_for_the_api_server_names(seed: int) -> None:
    scn, names = generate(seed), ScenarioNames(f"rnd-{seed}")
    objects = [*queue_objects(scn, names), *(job_object(j, names) for j in scn.jobs)]
    assert all(len(o["metadata"]["name"]) <= 63 for o in objects)
    held = [o for o in objects if o["kind"] == "Job" and o["metadata"]["namespace"] == names.held]
    assert len(held) == sum(not j.before for j in scn.jobs)  # the Jobs under test wait in the held namespace


# -- against the real Kueue --------------------------------------------------------------------


@pytest.fixture(scope="module")
def random_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    with own_testbed(tmp_path_factory.mktemp("random-testbed"), "the random-scenario testbed") as own:
        yield own.bed


@pytest.fixture(scope="module")
def outcomes(random_bed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Outcome]:
    """Every CI seed against Kueue, once for the module (scenarios run in batches, not one by one)."""
    out = tmp_path_factory.mktemp("random-scenarios")
    done = {o.scenario.seed: o for o in run_seeds(random_bed, CI_SEEDS, out, batch_size=BATCH)}
    counts = collections.Counter(d for o in done.values() for d in o.disagreements or ["agree"])
    phases: dict[str, float] = collections.defaultdict(float)
    for timings in {id(o.timings): o.timings for o in done.values()}.values():
        for phase, seconds in timings.items():
            phases[phase] += seconds
    print(f"\n{counts['agree']} of {len(done)} agree; {dict(counts)}; phases {dict(phases)}")
    for o in done.values():
        if set(o.disagreements) - {"KueueWroteNothing", "UnmarkedTwinMessage"}:
            print(f"seed {o.scenario.seed}: {o.disagreements}; reproducer {o.save(out / f'seed-{o.scenario.seed}')}")
    return done


# Open twin findings, with reproducers under /work/diff-findings (see docs/twin.md, "The real Kueue as the
# judge"). Not strict: which Job loses depends on the UIDs the API server draws in each run, so the seed
# agrees in some runs.
OPEN_TWIN_FINDINGS = {
    24: "Kueue writes QuotaReserved in whole wall-clock seconds: three equivalent Jobs admitted in one "
    "settling tie (the victim is then the lower UID, which the twin now models) unless the settling "
    "straddles a second boundary, so Kueue may take a higher-UID Job as the more recent one (seen on "
    "main: reclamation took j03 over the lower-UID j01); the twin stamps one second per settling",
}


@pytest.mark.parametrize(
    "seed",
    [
        pytest.param(s, marks=pytest.mark.xfail(reason=OPEN_TWIN_FINDINGS[s], strict=False))
        if s in OPEN_TWIN_FINDINGS
        else s
        for s in CI_SEEDS
    ],
)
def test_the_twin_predicts_what_kueue_does(outcomes: dict[int, Outcome], seed: int) -> None:
    outcome = outcomes[seed]
    found = [d for d in outcome.disagreements if d not in ("KueueWroteNothing", "UnmarkedTwinMessage")]
    assert found == [], (
        f"seed {seed}: {found}\n  kueue: {outcome.real.describe()}\n  twin:  {outcome.twin.describe()}\n"
        f"  twin input: {outcome.released} {outcome.config}\n{outcome.scenario.to_yaml()}"
    )


def test_the_twin_marks_its_own_words_where_kueue_writes_nothing(outcomes: dict[int, Outcome]) -> None:
    """Issue 18, 'What Kueue writes': behind a blocked StrictFIFO head and for equivalents bulk-moved by
    the scheduling hash Kueue writes no new condition; the twin may explain, but marks it its own."""
    assert any(o.unwritten for o in outcomes.values()), "no CI scenario has a Workload Kueue writes nothing for"
    unmarked = {seed: o.unmarked for seed, o in outcomes.items() if o.unmarked}
    assert unmarked == {}


def test_kueue_counts_the_claim_jobs_as_gpus(outcomes: dict[int, Outcome]) -> None:
    """DRA (issue 35): the claim Jobs are admitted with nvidia.com/gpu (deviceClassMappings) and never held
    back by Kueue's DRA checks, so the per-seed agreement above covers claims counted, not refused alike."""
    claims = {(seed, j.name) for seed, o in outcomes.items() for j in o.scenario.jobs if j.claims}
    admitted = {(s, j) for s, j in claims if j in outcomes[s].real.admitted}
    counted = {(s, j) for s, j in admitted if any(r == GPU for _, r, _ in outcomes[s].real.admitted[j][1])}
    refused = {(s, j) for s, j in claims if "DRA" in outcomes[s].real.pending.get(j, "")}
    print(f"{len(claims)} claim Jobs in {len({s for s, _ in claims})} seeds; Kueue admitted {len(admitted)}")
    assert admitted and counted == admitted and refused == set()


def test_every_ci_scenario_ran(outcomes: dict[int, Outcome]) -> None:
    assert sorted(outcomes) == CI_SEEDS
    assert all(o.real.known == {j.name for j in o.scenario.jobs} for o in outcomes.values())
    assert all(o.real.known == o.twin.known for o in outcomes.values())


def test_the_scenarios_left_nothing_to_kueues_tie_breaks(outcomes: dict[int, Outcome]) -> None:
    """Every Workload of a scenario has its own creation second, so queue order never falls to UIDs."""
    assert {seed: o.ties for seed, o in outcomes.items() if o.ties} == {}


# -- hand-written scenarios (tests/e2e/pinned_scenarios.py) ------------------------------------


@pytest.fixture(scope="module")
def pinned(random_bed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """The pinned scenarios against Kueue, side by side in one batch (they share one Configuration)."""
    (config,) = {scn.config for scn in PINNED.values()}
    configure(random_bed, config)
    batch = {f"pin-{name}": scn for name, scn in PINNED.items()}
    try:
        found = run_batch(random_bed, batch, tmp_path_factory.mktemp("pinned-scenarios"))
    finally:
        clean_up(random_bed, batch)
    return {o.prefix.removeprefix("pin-"): o for o in found}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_twin_predicts_what_kueue_does_in_the_pinned_scenarios(pinned: dict[str, Outcome], name: str) -> None:
    outcome = pinned[name]
    assert set(outcome.real.admitted) == KUEUE_ADMITS[name], "Kueue no longer does what the scenario was written for"
    found = [d for d in outcome.disagreements if d not in ("KueueWroteNothing", "UnmarkedTwinMessage")]
    assert found == [], f"{name}: {found}\n  kueue: {outcome.real.describe()}\n  twin:  {outcome.twin.describe()}"
