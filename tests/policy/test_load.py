"""Loading a policy: every example loads; every mistake is reported with file, line, column and path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.errors import InputError
from gpufleet.policy import load_policy, parse_policy
from tests.support import EXAMPLES

BASE = """\
apiVersion: gpufleet.io/v1alpha1
kind: FleetPolicy
cluster: {kubernetes: "1.34", dra: off}
pools:
  - name: train
    gpu: H100-SXM5-80GB
    nodes: [n1, n2]
    gpusPerNode: 8
    role: training
  - name: eval
    gpu: A100-SXM4-80GB
    nodes: 1
    gpusPerNode: 8
    role: batch
    slicing: {mode: mig, layout: all-balanced}
  - name: serve
    gpu: L40S
    nodes: 1
    gpusPerNode: 4
    role: serving
teams:
  - name: a
    namespaces: [team-a]
    quota:
      train: {gpus: 8}
      eval: {mig: {3g.40gb: 4}}
    priorityClasses: [batch]
    dataClasses: [internal]
  - name: b
    namespaces: [team-b]
    quota:
      train: {gpus: 8, borrowingLimit: 4}
    priorityClasses: [batch]
    dataClasses: [internal]
priorityClasses: [{name: batch, value: 100}]
dataClasses: [{name: internal, checkpointLocations: ["s3://eu-central-1/"]}]
serving:
  pool: serve
  deployments: [{name: chat, model: m/x, replicas: 2, gpusPerReplica: 1}]
"""


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_bundled_example_loads(example: Path) -> None:
    policy = load_policy(example)
    assert policy.pools


def test_the_base_policy_of_these_tests_is_valid() -> None:
    policy = parse_policy(BASE, "base.yaml")
    assert [p.name for p in policy.pools] == ["train", "eval", "serve"]


# (id, old text, new text, expected path, expected line, a fragment of the message)
CASES = [
    ("unknown-gpu", "gpu: L40S", "gpu: L41S", "pools[2].gpu", 17, "unknown GPU model 'L41S'; expected one of"),
    ("empty-layout", "layout: all-balanced", "layout: all-disabled", "pools[1].slicing.layout", 15, "no MIG instances"),
    (
        "mig-without-mig",
        "role: serving",
        "role: serving\n    slicing: {mode: mig, layout: all-1g.10gb}",
        "pools[2].slicing.mode",
        21,
        "L40S has no MIG",
    ),
    (
        "bad-layout",
        "layout: all-balanced",
        "layout: {3g.40gb: 2, 1g.10gb: 1}",
        "pools[1].slicing.layout",
        15,
        "invalid MIG layout for A100-SXM4-80GB",
    ),
    (
        "unknown-pool-quota",
        "train: {gpus: 8}\n",
        "trian: {gpus: 8}\n",
        "teams[0].quota.trian",
        25,
        "unknown pool 'trian'",
    ),
    (
        "quota-on-serving",
        "train: {gpus: 8, borrowingLimit: 4}",
        "serve: {gpus: 1}",
        "teams[1].quota.serve",
        32,
        "reserved for serving",
    ),
    ("gpus-on-mig-pool", "eval: {mig: {3g.40gb: 4}}", "eval: {gpus: 2}", "teams[0].quota.eval.gpus", 26, "MIG-sliced"),
    (
        "profile-not-in-layout",
        "eval: {mig: {3g.40gb: 4}}",
        "eval: {mig: {4g.40gb: 1}}",
        "teams[0].quota.eval.mig.4g.40gb",
        26,
        "not in pool 'eval''s layout",
    ),
    (
        "over-capacity",
        "train: {gpus: 8, borrowingLimit: 4}",
        "train: {gpus: 9, borrowingLimit: 4}",
        "pools[0].name",
        5,
        "guaranteed 17 nvidia.com/gpu in pool 'train' but it yields only 16",
    ),
    ("serving-pool-not-reserved", "role: serving", "role: dev", "serving.pool", 38, "must be reserved"),
    (
        "serving-too-big",
        "replicas: 2, gpusPerReplica: 1",
        "replicas: 5, gpusPerReplica: 1",
        "serving.deployments",
        39,
        "need 5 nvidia.com/gpu but pool 'serve' yields 4",
    ),
    (
        "unknown-priority",
        "priorityClasses: [batch]\n    dataClasses: [internal]\n  - name: b",
        "priorityClasses: [urgent]\n    dataClasses: [internal]\n  - name: b",
        "teams[0].priorityClasses[0]",
        27,
        "unknown priority class 'urgent'",
    ),
    (
        "unknown-field",
        "gpusPerNode: 4",
        "gpusPerNode: 4\n    gpuPerNode: 4",
        "pools[2].gpuPerNode",
        20,
        "unknown field",
    ),
    ("wrong-type", "gpusPerNode: 4", "gpusPerNode: four", "pools[2].gpusPerNode", 19, "valid integer"),
    (
        "bad-limit",
        "borrowingLimit: 4",
        "borrowingLimit: lots",
        "teams[1].quota.train.borrowingLimit",
        32,
        "expected one of",
    ),
    ("bad-mode", "{mode: mig, layout: all-balanced}", "{mode: split}", "pools[1].slicing", 15, "mode"),
    (
        "duplicate-namespace",
        "namespaces: [team-b]",
        "namespaces: [team-a]",
        "teams[1].namespaces[0]",
        30,
        "already belongs to team 'a'",
    ),
]


@pytest.mark.parametrize(("old", "new", "path", "line", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_mistake_is_located(old: str, new: str, path: str, line: int, fragment: str) -> None:
    assert old in BASE, "the case must change the base policy"
    with pytest.raises(InputError) as caught:
        parse_policy(BASE.replace(old, new, 1), "fleet.yaml")
    problems = caught.value.problems
    matching = [p for p in problems if p.path == path]
    assert matching, f"no problem at {path}; got {[str(p) for p in problems]}"
    assert matching[0].file == "fleet.yaml"
    assert matching[0].line == line
    assert fragment in matching[0].message


def test_all_field_problems_are_reported_at_once() -> None:
    text = BASE.replace("gpusPerNode: 8\n    role: training", "gpusPerNode: 99\n    role: trainer")
    with pytest.raises(InputError) as caught:
        parse_policy(text, "fleet.yaml")
    located = {(p.path, p.line) for p in caught.value.problems}
    assert located == {("pools[0].gpusPerNode", 8), ("pools[0].role", 9)}


def test_cross_field_problems_are_all_reported() -> None:
    text = (
        BASE.replace("gpu: L40S", "gpu: L41S").replace("trian", "x").replace("train: {gpus: 8}\n", "trian: {gpus: 8}\n")
    )
    with pytest.raises(InputError) as caught:
        parse_policy(text, "fleet.yaml")
    paths = {p.path for p in caught.value.problems}
    assert {"pools[2].gpu", "teams[0].quota.trian"} <= paths


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(InputError) as caught:
        parse_policy(BASE.replace("role: batch", "role: [batch"), "fleet.yaml")
    (problem,) = caught.value.problems
    assert problem.line is not None and problem.line >= 14
    assert "not valid YAML" in problem.message


@pytest.mark.parametrize(("written", "expected"), [("off", "off"), ("on", "on"), ("auto", "auto"), ('"off"', "off")])
def test_yaml_booleans_for_dra_mean_the_word_written(written: str, expected: str) -> None:
    policy = parse_policy(BASE.replace("dra: off", f"dra: {written}"), "fleet.yaml")
    assert policy.cluster.dra.value == expected


def test_cli_prints_every_problem_and_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text(BASE.replace("gpu: L40S", "gpu: L41S"))
    result = CliRunner().invoke(app, ["plan", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:17:10: pools[2].gpu: unknown GPU model 'L41S'" in result.output
    assert "Traceback" not in result.output


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["plan", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "no such file" in result.output


@pytest.mark.parametrize(
    ("written", "accepted"),
    [
        ("[LessThanOrEqualToFinalShare, LessThanInitialShare]", True),
        ("[LessThanOrEqualToFinalShare]", True),
        ("[LessThanInitialShare]", True),
        ("[LessThanInitialShare, LessThanOrEqualToFinalShare]", False),
        ("[LessThanOrEqualToFinalShare, LessThanOrEqualToFinalShare]", False),
        ("[]", False),
        ("[MostFair]", False),
    ],
    ids=["kueue-default", "final-share-only", "initial-share-only", "reversed", "repeated", "empty", "unknown"],
)
def test_preemption_strategies_take_the_orders_kueue_accepts(written: str, accepted: bool) -> None:
    text = BASE + f"queueing:\n  preemptionStrategies: {written}\n"
    line = text.count("\n")  # the last line
    if accepted:
        assert parse_policy(text, "fleet.yaml").queueing.preemptionStrategies == yaml.safe_load(written)
        return
    with pytest.raises(InputError) as caught:
        parse_policy(text, "fleet.yaml")
    (problem,) = [p for p in caught.value.problems if p.path.startswith("queueing.preemptionStrategies")]
    assert problem.line == line
