"""``tune`` across clusters: trials through the federation, knobs inside residency, clusters named, and
the fleet owner's two questions answered from two real simulations each.

The fleets are small enough to work out by hand (the federated scenarios of
tests/simulate/test_federation.py, and ``FED_LIMITED`` below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.errors import InputError
from gpufleet.policy import FleetPolicy, load_policy, parse_policy, resolve
from gpufleet.policy.residency import cluster_of
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.federation import simulate_federation
from gpufleet.simulate.federation_compare import CLUSTERS, RESIDENCY, fleet_questions, lifted, merged
from gpufleet.simulate.federation_run import federated_run
from gpufleet.simulate.federation_summary import summary
from gpufleet.simulate.measures import Measures, measure
from gpufleet.simulate.run import simulate
from gpufleet.trace import write_trace
from gpufleet.trace.job import Job, JobKind
from gpufleet.tune import clusters
from gpufleet.tune.fidelity import Fidelity
from gpufleet.tune.holdout import Week
from gpufleet.tune.judge import prepare
from gpufleet.tune.objectives import Constraints
from gpufleet.tune.space import build_space
from gpufleet.tune.study import StudySpec
from gpufleet.tune.trial import Problem, evaluate
from gpufleet.tune.tuning import Tuning, tune
from tests.support import EXAMPLES
from tests.tune.cases import policy as one_cluster

HOUR = 3600
ROOT = Path(__file__).resolve().parents[2]
FED = ROOT / "tests" / "e2e" / "federation-fleet.yaml"  # west (restricted, open) and east (open), 4 GPUs each
HAND = SimulationConfig(finish_delay_s=0)

# Two workers of four cards each. Team a's work is `restricted` (west only) and a may not borrow
# there (borrowingLimit 0 on two guaranteed cards); team b's is `open` (either worker). By hand: a's
# eight one-card hour-long jobs run two at a time on west while b is idle; lifting a's borrowing limit
# on train-west (cluster west) runs them four at a time. No knob may touch a's quota on east: a has
# none there, and its residency forbids it.
FED_LIMITED = """
apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {provider: onprem, kubernetes: "1.34", dra: off}
clusters:
  - {name: west, provider: aks, region: westeurope, kubeconfigSecret: west-kubeconfig}
  - {name: east, provider: onprem, region: eastus, kubeconfigSecret: east-kubeconfig}
multiKueue: {dispatcher: AllAtOnce}
pools:
  - {name: train-west, cluster: west, gpu: H100-SXM5-80GB, nodes: [w1], gpusPerNode: 4, role: training,
     slicing: {mode: full}}
  - {name: train-east, cluster: east, gpu: H100-SXM5-80GB, nodes: [e1], gpusPerNode: 4, role: training,
     slicing: {mode: full}}
teams:
  - name: a
    namespaces: [a]
    quota: {train-west: {gpus: 2, borrowingLimit: 0}}
    priorityClasses: [batch]
    dataClasses: [restricted]
  - name: b
    namespaces: [b]
    quota: {train-west: {gpus: 2}, train-east: {gpus: 4}}
    priorityClasses: [batch]
    dataClasses: [open]
priorityClasses: [{name: batch, value: 100}]
dataClasses:
  - {name: restricted, clusters: [west], checkpointLocations: ["s3://westeurope/"]}
  - {name: open, regions: [westeurope, eastus], checkpointLocations: ["s3://open/"]}
queueing: {cohort: fed, fairSharing: false}
monitoring: {enabled: false}
"""


def fed_limited() -> FleetPolicy:
    return parse_policy(FED_LIMITED, "fed-limited.yaml")


def job(i: str, team: str, data_class: str, submit: int, duration: int = 600, gpus: int = 4) -> Job:
    return Job(i, team, team, submit, duration, JobKind.TRAINING, gpus=gpus, data_class=data_class,
               priority_class="batch" if team != "alpha" else "normal")  # fmt: skip


def a_alone() -> list[Job]:
    return [job(f"a-{n}", "a", "restricted", 0, HOUR, gpus=1) for n in range(8)]


POLICIES = [
    ("the example federation", load_policy(EXAMPLES / "federation.yaml")),
    ("the e2e federation", load_policy(FED)),
    ("a restricted team without borrowing", fed_limited()),
]


@pytest.mark.parametrize(("name", "policy"), POLICIES, ids=[p[0] for p in POLICIES])
def test_every_quota_knob_stays_inside_its_teams_residency(name: str, policy: FleetPolicy) -> None:
    space = build_space(policy)
    quota = [k.path for k in space.knobs if ".quota[" in k.path]
    assert quota, f"{name}: the space has quota knobs"
    for path in quota:
        team = path.split("]")[0].removeprefix("teams[")
        pool = path.split(".quota[")[1].split("]")[0]
        assert cluster_of(policy, pool) in clusters.team_clusters(policy, team), path
        assert clusters.cluster_of_knob(policy, path) == cluster_of(policy, pool)


# (path, allowed): research's classes (internal: westeurope and eu-central, confidential: onprem-fra)
# never reach aks-eus; product's (public, internal) reach every cluster
KNOBS = [
    ("teams[research].quota[h100-weu].borrowingLimit", True),
    ("teams[research].quota[h100-fra].lendingLimit", True),
    ("teams[research].quota[a100-eus].borrowingLimit", False),
    ("teams[product].quota[a100-eus].borrowingLimit", True),
    ("queueing.fairSharing", True),
]


@pytest.mark.parametrize(("path", "allowed"), KNOBS)
def test_a_knob_on_a_cluster_the_teams_data_classes_forbid_is_never_allowed(path: str, allowed: bool) -> None:
    policy = load_policy(EXAMPLES / "federation.yaml")
    assert clusters.allowed(policy, path) is allowed
    if not allowed:
        assert path not in {k.path for k in build_space(policy).knobs}


# (path, cluster named in the report)
WHERE = [
    ("teams[a].quota[train-west].borrowingLimit", "west"),
    ("teams[b].quota[train-east].lendingLimit", "east"),
    ("queueing.reclaimWithinCohort", clusters.EVERY),
    ("teams[a].preemption.withinClusterQueue", clusters.EVERY),
    ("priorityClasses[batch].value", clusters.EVERY),
]


@pytest.mark.parametrize(("path", "cluster"), WHERE)
def test_each_setting_is_named_with_its_cluster(path: str, cluster: str) -> None:
    assert clusters.cluster_of_knob(fed_limited(), path) == cluster


def test_a_policy_without_clusters_names_no_cluster() -> None:
    assert clusters.cluster_of_knob(one_cluster(), "teams[a].quota[train].borrowingLimit") == ""


def _tuned(tmp_path: Path, trials: int = 3) -> Tuning:
    spec = StudySpec(str(tmp_path / "study.journal"), "fed", trials, 1, 0)
    return tune(fed_limited(), a_alone(), spec, simplify=False)


def test_tune_runs_every_trial_through_the_federation_and_names_the_cluster(tmp_path: Path) -> None:
    t = _tuned(tmp_path)
    policy = fed_limited()
    # the input world is the federation's own run: every job ran on west, the only cluster a may use
    fed = simulate_federation(resolve(policy), a_alone(), SimulationConfig())
    assert {d.cluster for d in fed.dispatches} == {"west"}
    assert (
        t.worlds[1].measures.goodput_gpu_h
        == measure(
            federated_run(resolve(policy), a_alone(), SimulationConfig())[0], resolve(policy), t.window
        ).goodput_gpu_h
    )
    assert t.recommended is not None, "lifting a's borrowing limit on west is feasible and better"
    assert t.changes, "the recommendation changes a setting"
    for c in t.changes:
        assert c.cluster, c.setting
        if ".quota[" in c.setting:
            pool = c.setting.split(".quota[")[1].split("]")[0]
            assert c.cluster == cluster_of(policy, pool)
            assert c.where.endswith(f"[{c.cluster}]")
    assert any(c.setting == "teams[a].quota[train-west].borrowingLimit" and c.cluster == "west" for c in t.changes)
    base = t.space.base_params()
    for trial in t.trials:  # a residency-bound team's changes stay inside its allowed clusters
        for path, value in trial.params.items():
            if value != base[path] and path.startswith("teams[a].quota["):
                assert clusters.cluster_of_knob(policy, path) in clusters.team_clusters(policy, "a")
    # tuned: a runs four at a time on west (two rounds, not four): its p95 wait falls, from the federation
    before, after = t.worlds[1].measures.team("a"), t.worlds[2].measures.team("a")
    assert before is not None and after is not None
    assert before.wait_p95_s is not None and after.wait_p95_s is not None
    assert after.wait_p95_s < before.wait_p95_s
    assert [q.question for q in t.questions] == [RESIDENCY, CLUSTERS]


def test_rungs_are_refused_for_a_federation_with_a_located_error(tmp_path: Path) -> None:
    spec = StudySpec(str(tmp_path / "study.journal"), "fed", 2, 1, 0)
    with pytest.raises(InputError) as caught:
        tune(fed_limited(), a_alone(), spec, fidelity=Fidelity(first_s=HOUR))
    assert caught.value.problems[0].path == "--rung-hours"
    assert not (tmp_path / "study.journal").exists()


# (name, jobs, team alpha's p95 wait: as declared, residency lifted, one merged cluster), worked by hand
# on the e2e federation (west and east, 4 cards each; `restricted` may only run on west)
QUESTIONS = [
    # j1 (restricted) waits for west while east idles: 596 s (j0's 600 s, less its 5 s start offset, plus
    # Kueue's wake a second after quota frees); lifted or merged, east takes it at once
    ("restricted work queues behind west", [job("j0", "alpha", "restricted", 0), job("j1", "alpha", "restricted", 5)],
     (596, 0, 0)),
    # open work may use either worker already: residency costs nothing
    ("open work has nothing to lose", [job("j0", "alpha", "open", 0), job("j1", "alpha", "open", 5)], (0, 0, 0)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "jobs", "waits"), QUESTIONS, ids=[q[0] for q in QUESTIONS])
def test_residency_and_one_cluster_are_answered_from_two_real_runs(
    name: str, jobs: list[Job], waits: tuple[int, int, int]
) -> None:
    fleet = resolve(load_policy(FED))
    residency, one = fleet_questions(fleet, jobs, HAND)
    assert residency.question == RESIDENCY and one.question == CLUSTERS
    (row,) = residency.teams
    assert row.wait_p95_s == (waits[0], waits[1]), name
    (row,) = one.teams
    assert row.wait_p95_s == (waits[0], waits[2]), name
    # each side is a run of the simulator: the declared side is the federation summary's own figure
    assert summary(simulate_federation(fleet, jobs, HAND))["fleet"]["p95WaitSeconds"] == waits[0]
    doc = residency.as_dict()
    assert doc["basis"] == "simulated" and doc["teams"]["alpha"]["p95WaitSeconds"]["as declared"] == waits[0]


def test_the_alternative_policies_are_valid_and_what_they_say() -> None:
    policy = load_policy(EXAMPLES / "federation.yaml")
    free = lifted(policy)
    every = {c.name for c in policy.clusters}
    assert all(set(clusters.team_clusters(free, t.name)) == every for t in free.teams)
    one = merged(policy)
    assert one.clusters == [] and {p.name for p in one.pools} == {p.name for p in policy.pools}
    assert all(p.cluster is None for p in one.pools)


def test_tune_on_the_federated_example_runs_and_exits_0(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    jobs = [
        Job("r-1", "research", "research", 0, HOUR, JobKind.TRAINING, gpus=2, data_class="internal",
            priority_class="train"),
        Job("r-2", "research", "research", 60, HOUR, JobKind.TRAINING, gpus=2, data_class="confidential",
            priority_class="train"),
        Job("p-1", "product", "product", 0, HOUR, JobKind.TRAINING, gpus=4, data_class="public",
            priority_class="train"),
        Job("p-2", "product", "product", 120, HOUR, JobKind.TRAINING, gpus=2, data_class="internal",
            priority_class="train"),
    ]  # fmt: skip
    write_trace(jobs, trace)
    out = tmp_path / "out"
    args = ["tune", str(EXAMPLES / "federation.yaml"), "--trace", str(trace), "--trials", "2", "--jobs", "1"]
    result = CliRunner().invoke(app, [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "What residency costs" in result.output and "One cluster or the federation" in result.output
    doc = json.loads((out / "tune.json").read_text())
    assert doc["simulated"] is True
    assert [q["question"] for q in doc["fleetQuestions"]] == [RESIDENCY, CLUSTERS]
    assert all(q["basis"] == "simulated" for q in doc["fleetQuestions"])
    assert load_policy(out / "recommended.yaml").clusters, "the recommendation is still the federation"
    refused = CliRunner().invoke(app, [*args, "--rung-hours", "1", "-o", str(tmp_path / "out2")])
    assert refused.exit_code == 2 and "--rung-hours" in refused.output and "Traceback" not in refused.output
    assert not (tmp_path / "out2").exists()


def _alpha_p95(m: Measures) -> int | None:
    (alpha,) = m.teams
    return alpha.wait_p95_s


def test_every_entry_of_tune_simulates_the_federation_not_one_cluster(tmp_path: Path) -> None:
    """Restricted j1 waits 596 s for west in the federation; as one cluster east would take it at once
    (0 s). The input world, a trial and a held-out week's input world all show the federation's 596 s."""
    policy = load_policy(FED)
    jobs = [job("j0", "alpha", "restricted", 0), job("j1", "alpha", "restricted", 5)]
    one = simulate(resolve(merged(policy)), jobs, HAND)
    assert _alpha_p95(measure(one, resolve(merged(policy)), (0, one.outcome.end))) == 0
    space = build_space(policy)
    window = (0, 4 * HOUR)
    problem = Problem(policy, tuple(jobs), HAND, window, Constraints())
    assert _alpha_p95(evaluate(problem, space, space.base_params()).measures) == 596
    held = prepare(policy, space, Week("again", tuple(jobs)), HAND, Constraints())
    assert _alpha_p95(held.given.measures) == 596
    spec = StudySpec(str(tmp_path / "study.journal"), "fed", 1, 1, 0)
    t = tune(policy, jobs, spec, config=HAND, reasoned=False, simplify=False)
    assert _alpha_p95(t.worlds[1].measures) == 596
