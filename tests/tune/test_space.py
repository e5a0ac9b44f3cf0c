"""The knobs tune turns and the reasoned candidates, read off the policy they build."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.tune.objectives import lost_guarantees
from gpufleet.tune.output import policy_yaml
from gpufleet.tune.remedies import candidates
from gpufleet.tune.space import SpaceError, build_space, value_of
from tests.support import shared_path
from tests.tune.cases import LIMITED, policy
from tests.tune.test_diff import UNPLACED

runner = CliRunner()


@pytest.mark.parametrize(
    ("path", "value", "field", "expected"),
    [
        ("queueing.prioritizePreemptorWorkloads", "true", "prioritizePreemptorWorkloads", True),
        ("queueing.prioritizePreemptorWorkloads", "false", "prioritizePreemptorWorkloads", False),
        ("queueing.fairSharing", "false", "fairSharing", False),
        ("queueing.reclaimWithinCohort", "Never", "reclaimWithinCohort", "Never"),
    ],
)
def test_a_queueing_knob_sets_its_field_and_reads_back_as_its_choice(
    path: str, value: str, field: str, expected: object
) -> None:
    space = build_space(policy())
    assert value in space.knob(path).choices
    changed = space.apply({path: value})
    assert getattr(changed.queueing, field) == expected
    assert value_of(changed, path) == value


def test_the_preemptor_gate_starts_at_kueues_default() -> None:
    assert build_space(policy()).base_params()["queueing.prioritizePreemptorWorkloads"] == "false"


def test_a_reasoned_candidate_keeps_reclaim_and_turns_the_preemptor_gate_on() -> None:
    space = build_space(policy())
    gated = [c for c in candidates(space) if c.get("queueing.prioritizePreemptorWorkloads") == "true"]
    assert gated, "no candidate tries PrioritizePreemptorWorkloads"
    # The point of that candidate: guaranteed reclaim stays as the input policy has it.
    assert all("queueing.reclaimWithinCohort" not in c for c in gated)
    assert space.apply(gated[0]).queueing.reclaimWithinCohort == policy().queueing.reclaimWithinCohort


# The input with classical preemption that may preempt lower priorities of at most 50 while borrowing.
BORROWING = (
    LIMITED + "queueing: {fairSharing: false, borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 50}}\n"
)

# The input with team a's ClusterQueue never preempting inside itself.
OVERRIDDEN = LIMITED.replace(
    "    namespaces: [a]\n", "    namespaces: [a]\n    preemption: {withinClusterQueue: Never}\n", 1
)
FLEETS = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}

# (id, input policy, knob, value, ClusterQueue a's spec.preemption once rendered)
RENDERED = [
    (
        "team-within",
        LIMITED,
        "teams[a].preemption.withinClusterQueue",
        "Never",
        {**FLEETS, "withinClusterQueue": "Never"},
    ),
    (
        "team-reclaim",
        LIMITED,
        "teams[a].preemption.reclaimWithinCohort",
        "Never",
        {**FLEETS, "reclaimWithinCohort": "Never"},
    ),
    (
        "team-borrow",
        LIMITED,
        "teams[a].preemption.borrowWithinCohort",
        "LowerPriority",
        {**FLEETS, "borrowWithinCohort": {"policy": "LowerPriority"}},
    ),
    ("team-back-to-the-fleets", OVERRIDDEN, "teams[a].preemption.withinClusterQueue", "fleet", FLEETS),
    (
        "borrow-lower",
        LIMITED,
        "queueing.borrowWithinCohort",
        "LowerPriority",
        {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        },
    ),
    (
        "borrow-never-drops-the-threshold",
        BORROWING,
        "queueing.borrowWithinCohort",
        "Never",
        {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
    ),
    (
        "gate",
        LIMITED,
        "queueing.prioritizePreemptorWorkloads",
        "true",
        {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
    ),
]


@pytest.mark.parametrize(
    ("text", "path", "value", "preemption"), [c[1:] for c in RENDERED], ids=[c[0] for c in RENDERED]
)
def test_a_trial_on_a_knob_is_a_policy_plan_and_render_take(
    tmp_path: Path, text: str, path: str, value: str, preemption: dict[str, object]
) -> None:
    space = build_space(policy(text))
    knob = space.knob(path)
    assert value_of(space.base, path) in knob.choices and value in knob.choices
    tuned = space.apply({path: value})
    assert value_of(tuned, path) == value
    file = tmp_path / "tuned.yaml"
    file.write_text(policy_yaml(tuned))
    plan = runner.invoke(app, ["plan", str(file)])
    assert plan.exit_code == 0, plan.output
    out = tmp_path / "m"
    crds = shared_path("schemas", "kueue-v0.19.2")
    rendered = runner.invoke(app, ["render", str(file), "-o", str(out), "--check", "--crds", str(crds)])
    assert rendered.exit_code == 0 and "all valid" in rendered.output, rendered.output
    queues = {d["metadata"]["name"]: d for d in yaml.safe_load_all((out / "kueue-clusterqueues.yaml").read_text())}
    assert queues["a"]["spec"]["preemption"] == preemption


def test_the_threshold_stays_when_the_search_keeps_lower_priority() -> None:
    space = build_space(policy(BORROWING))
    assert space.knob("queueing.borrowWithinCohort").choices == ("Never", "LowerPriority")
    kept = space.apply({"queueing.fairSharing": "true", "queueing.borrowWithinCohort": "LowerPriority"})
    assert kept.queueing.borrowWithinCohort.maxPriorityThreshold == 50


def test_reclaim_never_with_borrowing_preemption_is_no_policy_and_no_candidate_asks_for_it() -> None:
    space = build_space(policy(BORROWING))
    with pytest.raises(SpaceError, match="needs reclaimWithinCohort other than Never"):
        space.apply({"queueing.reclaimWithinCohort": "Never"})
    calm = [c for c in candidates(space) if c.get("queueing.reclaimWithinCohort") == "Never"]
    assert calm, "a candidate stops reclaim"
    for c in calm:  # each stops borrowing preemption with it, so each is a policy Kueue takes
        assert space.apply(c).queueing.borrowWithinCohort.policy == "Never"


def test_a_team_knob_starts_at_the_fleets_and_changes_that_team_only() -> None:
    space = build_space(policy(OVERRIDDEN))
    assert space.base_params()["teams[a].preemption.withinClusterQueue"] == "Never"
    assert space.base_params()["teams[b].preemption.withinClusterQueue"] == "fleet"
    assert space.knob("teams[b].preemption.reclaimWithinCohort").choices == ("fleet", "Never", "LowerPriority", "Any")
    tuned = space.apply({"teams[b].preemption.reclaimWithinCohort": "Never"})
    a, b = tuned.team("a"), tuned.team("b")
    assert a is not None and b is not None
    assert tuned.preemption_of(b).reclaimWithinCohort == "Never"
    assert tuned.preemption_of(a).reclaimWithinCohort == "Any"  # the fleet's
    assert tuned.preemption_of(a).withinClusterQueue == "Never"  # a's own, untouched
    # with the team's reclaim off, b can no longer take back what it lends; a still can
    assert lost_guarantees(space.base, tuned) == ["b/train"]
    back = space.apply({"teams[a].preemption.withinClusterQueue": "fleet"}).team("a")
    assert back is not None and back.preemption is None  # the block goes when nothing in it is left


def test_the_pods_ready_timeout_knob_renders_into_kueues_configuration(tmp_path: Path) -> None:
    space = build_space(policy())
    knob = space.knob("queueing.waitForPodsReady.timeoutSeconds")
    assert space.base_params()[knob.path] == "1800"  # Kueue's default: the input sets none
    assert knob.choices == ("1800", "300", "600", "3600")
    tuned = space.apply({knob.path: "600"})
    assert tuned.queueing.waitForPodsReady.timeoutSeconds == 600
    file = tmp_path / "tuned.yaml"
    file.write_text(policy_yaml(tuned))
    assert runner.invoke(app, ["plan", str(file)]).exit_code == 0
    out = tmp_path / "m"
    crds = shared_path("schemas", "kueue-v0.19.2")
    rendered = runner.invoke(app, ["render", str(file), "-o", str(out), "--check", "--crds", str(crds)])
    assert rendered.exit_code == 0, rendered.output
    config = yaml.safe_load((out / "kueue-configuration.yaml").read_text())
    assert config["waitForPodsReady"] == {"timeout": "10m"}
    # a policy that says 1800 itself reads as Kueue's default, and the search starts from it
    assert build_space(tuned).base_params()[knob.path] == "600"


@pytest.mark.parametrize(
    ("scheduling", "choices", "to", "renders"),
    [
        ("", ("LeastAllocated", "MostAllocated"), "MostAllocated", True),
        ("scheduling: {nodeScoring: MostAllocated}\n", ("MostAllocated", "LeastAllocated"), "LeastAllocated", False),
    ],
    ids=["from-the-default", "from-most-allocated"],
)
def test_the_node_scoring_knob_starts_at_the_inputs_and_renders_a_scheduler_profile(
    tmp_path: Path, scheduling: str, choices: tuple[str, ...], to: str, renders: bool
) -> None:
    """kube-scheduler's two strategies are searched; gpufleet's own FragmentationAware is not (no cluster runs it)."""
    space = build_space(policy(LIMITED + scheduling))
    knob = space.knob("scheduling.nodeScoring")
    assert knob.choices == choices and space.base_params()[knob.path] == choices[0]
    tuned = space.apply({knob.path: to})
    assert tuned.scheduling.nodeScoring == to and value_of(tuned, knob.path) == to
    file = tmp_path / "tuned.yaml"
    file.write_text(policy_yaml(tuned))
    out = tmp_path / "m"
    crds = shared_path("schemas", "kueue-v0.19.2")
    rendered = runner.invoke(app, ["render", str(file), "-o", str(out), "--check", "--crds", str(crds)])
    assert rendered.exit_code == 0, rendered.output
    assert (out / "kube-scheduler-configuration.yaml").exists() is renders


@pytest.mark.parametrize(
    ("scheduling", "asked"),
    [("", "MostAllocated"), ("scheduling: {nodeScoring: MostAllocated}\n", None)],
    ids=["spread-input", "already-packed"],
)
def test_quota_without_node_asks_for_packed_nodes(scheduling: str, asked: str | None) -> None:
    """QuotaWithoutNode names scheduling.nodeScoring; its candidate packs nodes unless the input already does."""
    space = build_space(policy(LIMITED + scheduling))
    found = candidates(space, [UNPLACED])
    asking = [c for c in found if "scheduling.nodeScoring" in c]
    assert [c["scheduling.nodeScoring"] for c in asking] == ([asked] if asked else [])
    if asked:
        assert asking[0] is found[0]  # the finding's own candidate, tried first
        assert space.apply(asking[0]).scheduling.nodeScoring == asked
    assert not [c for c in candidates(space) if "scheduling.nodeScoring" in c]  # only where the finding asks


@pytest.mark.parametrize(
    ("reclaim", "lost"),
    [("Any", []), ("LowerPriority", ["a/train", "b/train"]), ("Never", ["a/train", "b/train"])],
    ids=["any", "lower-priority", "never"],
)
def test_only_reclaiming_from_any_borrower_keeps_a_lent_guarantee(reclaim: str, lost: list[str]) -> None:
    """LIMITED's teams lend without limit and run one priority class: Kueue's LowerPriority reclaim
    cannot take back what a borrower of the same priority holds, so only Any keeps the guarantee."""
    space = build_space(policy())
    tuned = space.apply({"queueing.reclaimWithinCohort": reclaim})
    assert lost_guarantees(space.base, tuned) == lost
    kept = space.apply({"queueing.reclaimWithinCohort": reclaim, "teams[b].quota[train].lendingLimit": "0"})
    assert "b/train" not in lost_guarantees(space.base, kept)  # lending nothing keeps it whatever the reclaim


def test_each_findings_remedy_is_tried_alone_and_all_of_them_combined() -> None:
    """Two findings with different remedies: their union first, each one alone among the candidates too
    (before the sampler explores), so a remedy that helps alone is not hidden by one that hurts with it."""
    from dataclasses import replace

    from gpufleet.simulate.pathologies import Reason

    space = build_space(policy())
    limits = replace(
        UNPLACED,
        reason=Reason.IDLE_BEHIND_LIMITS,
        settings=("teams[a].quota[train].borrowingLimit",),
    )
    found = candidates(space, [UNPLACED, limits])
    packed = {"scheduling.nodeScoring": "MostAllocated"}
    lifted = {"teams[a].quota[train].borrowingLimit": "unlimited"}
    assert found[0] == {**packed, **lifted}  # combined, first
    assert packed in found and lifted in found  # alone
    assert found.index(packed) > 0 and len(found) == len({tuple(sorted(c.items())) for c in found})  # distinct
