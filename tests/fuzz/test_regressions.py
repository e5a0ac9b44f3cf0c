"""Every bug the issue named and the fuzzing found, as the user meets it: the message and the exit code.

One row per bug, through the command line (typer's CliRunner on ``gpufleet.cli.app``). ``{dir}`` in
an argument is the row's temporary folder, where its files are written first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from tests.fuzz.strategies import BOMB
from tests.fuzz.test_prometheus_answers import _Answer, prometheus  # noqa: F401 (a fixture)
from tests.support import EXAMPLES

runner = CliRunner()
FLEET = str(EXAMPLES / "fleet.yaml")
TINY = (EXAMPLES / "tiny.yaml").read_text()
HEADER = "job_id,team,submit_s,duration_s,kind"
QUEUE = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: '4'}]}]
"""
ADMITTED_WITHOUT_ASSIGNMENT = """\
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {namespace: default, name: w}
spec:
  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c}]}}}]
status:
  admission: {clusterQueue: cq, podSetAssignments: [{name: other, flavors: {cpu: default}}]}
"""

# (id, files to write, arguments, exit code, fragments the error output must hold)
CASES = [
    # named by the issue
    ("plan-alias-bomb", {"bomb.yaml": BOMB}, ["plan", "{dir}/bomb.yaml"], 2,
     ["bomb.yaml:1:1: not valid YAML: aliases expand this document to 490,329,064 values from 100 written (at most 10,000)", "alias bomb"]),
    ("plan-duplicate-key", {"fleet.yaml": TINY.replace("role: training,", "role: training, role: dev,")},
     ["plan", "{dir}/fleet.yaml"], 2, ["fleet.yaml:6:82: not valid YAML: duplicate key 'role' (first at line 6)"]),
    ("plan-duplicate-top-level-key", {"fleet.yaml": TINY + "teams: []\n"}, ["plan", "{dir}/fleet.yaml"], 2,
     ["fleet.yaml:24:1: not valid YAML: duplicate key 'teams' (first at line 8)"]),
    ("check-empty-file", {"empty.yaml": ""}, ["check", FLEET, "{dir}/empty.yaml"], 2,
     ["empty.yaml: no Kubernetes objects in this file (nothing to check)"]),
    ("check-only-comments", {"c.yaml": "# nothing yet\n---\n---\n"}, ["check", FLEET, "{dir}/c.yaml"], 2,
     ["c.yaml: no Kubernetes objects in this file"]),
    ("check-empty-list", {"l.yaml": "apiVersion: v1\nkind: List\nitems: []\n"}, ["check", FLEET, "{dir}/l.yaml"], 2,
     ["l.yaml: no Kubernetes objects in this file"]),
    ("render-check-empty-crds", {"crds/.keep": ""}, ["render", FLEET, "-o", "{dir}/out", "--check", "--crds",
     "{dir}/crds"], 2, ["crds: no CustomResourceDefinitions found here (expected Kueue's config/components/crd/bases)"]),
    ("plan-missing-field", {"fleet.yaml": TINY.replace("gpu: L40S, ", "")}, ["plan", "{dir}/fleet.yaml"], 2,
     ["fleet.yaml:6:5: pools[0].gpu: field required"]),
    ("plan-missing-fields-each-named", {"fleet.yaml": TINY.replace("gpu: L40S, ", "").replace("role: training, ", "")},
     ["plan", "{dir}/fleet.yaml"], 2, ["pools[0].gpu: field required", "pools[0].role: field required"]),
    ("plan-slicing-without-mode", {"fleet.yaml": TINY.replace("role: training,", "role: training, slicing: {},")},
     ["plan", "{dir}/fleet.yaml"], 2, ["fleet.yaml:6:91: pools[0].slicing.mode: field required"]),
    # found by tests/fuzz
    ("plan-control-character", {"fleet.yaml": TINY.replace("Qwen/", "Qwen\x08/")}, ["plan", "{dir}/fleet.yaml"], 2,
     ["fleet.yaml:23:41: not valid YAML: control character U+0008 is not allowed"]),
    ("plan-int-of-5000-digits", {"fleet.yaml": TINY.replace("gpusPerNode: 1,", "gpusPerNode: 1" + "0" * 5000 + ",", 1)},
     ["plan", "{dir}/fleet.yaml"], 2, ["fleet.yaml:6:", "cannot read '1000", "as int: Exceeds the limit (4300 digits)"]),
    ("plan-empty-int-tag", {"fleet.yaml": "kind: !!int\n"}, ["plan", "{dir}/fleet.yaml"], 2,
     ["fleet.yaml:1:7: not valid YAML: cannot read '' as int"]),
    ("plan-impossible-date", {"fleet.yaml": "kind: 2024-02-30\n"}, ["plan", "{dir}/fleet.yaml"], 2,
     ["fleet.yaml:1:7: not valid YAML: cannot read '2024-02-30' as timestamp: day is out of range for month"]),
    ("plan-recursive-alias", {"fleet.yaml": "pools: &p [*p]\n"}, ["plan", "{dir}/fleet.yaml"], 2,
     ["fleet.yaml:1:8: not valid YAML: an alias refers to a node that contains it"]),
    ("plan-nested-too-deep", {"fleet.yaml": "pools: " + "[" * 600 + "]" * 600}, ["plan", "{dir}/fleet.yaml"], 2,
     ["fleet.yaml:1:", "not valid YAML: nested deeper than 100 levels"]),
    ("plan-empty-file", {"fleet.yaml": ""}, ["plan", "{dir}/fleet.yaml"], 2,
     ["fleet.yaml:1:1: expected a FleetPolicy mapping at the top level, got an empty file"]),
    ("plan-lone-surrogate-key", {"fleet.yaml": '{"kind": "FleetPolicy", "\\udc80": 1}'}, ["plan", "{dir}/fleet.yaml"],
     2, ["fleet.yaml:1:25: not valid YAML: '\\udc80' holds a lone surrogate, which is no Unicode character"]),
    ("check-duplicate-key", {"m.yaml": "apiVersion: v1\nkind: Pod\nkind: Job\n"}, ["check", FLEET, "{dir}/m.yaml"], 2,
     ["m.yaml:3:1: not valid YAML: duplicate key 'kind' (first at line 2)"]),
    ("twin-alias-bomb", {"k.yaml": BOMB}, ["twin", "step", "{dir}/k.yaml"], 2, ["k.yaml:1:1: not valid YAML: aliases"]),
    ("twin-spec-is-a-string", {"k.yaml": QUEUE.replace("spec:\n  namespaceSelector: {}", "spec: x\nx:\n  a: {}")},
     ["twin", "step", "{dir}/k.yaml"], 2, ["k.yaml:5: spec: ClusterQueue cq: expected a mapping, got str 'x'"]),
    ("twin-flavors-not-a-list", {"k.yaml": QUEUE.replace("flavors: [", "flavors: {x: [").replace("}]}]", "}]}]}")},
     ["twin", "step", "{dir}/k.yaml"], 2, ["spec.resourceGroups[0].flavors: ClusterQueue cq: expected a list"]),
    ("twin-quantity-beyond-int64", {"k.yaml": QUEUE.replace("'4'", "'1e30'")}, ["twin", "step", "{dir}/k.yaml"], 2,
     ["nominalQuota: ClusterQueue cq: quantity '1e30' is beyond what Kubernetes can hold"]),
    ("twin-admitted-without-assignment", {"k.yaml": QUEUE + ADMITTED_WITHOUT_ASSIGNMENT},
     ["twin", "step", "{dir}/k.yaml"], 2,
     ["k.yaml:14: Workload/default/w.status.admission.podSetAssignments: Workload default/w is admitted without"]),
    ("trace-beyond-int64", {"t.csv": f"{HEADER}\nj,t,9223372036854775808,1,dev\n"},
     ["trace", "convert", "{dir}/t.csv", "-o", "{dir}/t.parquet"], 2,
     ["t.csv:2:3: submit_s: submit_s: '9223372036854775808' is beyond the 64-bit integer range"]),
    ("trace-underscore-digits", {"t.csv": f"{HEADER}\nj,t,1_000,1,dev\n"}, ["trace", "show", "{dir}/t.csv"], 2,
     ["t.csv:2:3: submit_s: submit_s: expected an integer, got '1_000'"]),
    ("trace-repeated-column", {"t.csv": f"{HEADER},kind\nj,t,1,1,dev,dev\n"}, ["trace", "show", "{dir}/t.csv"], 2,
     ["t.csv:1: kind: column 'kind' appears more than once"]),
]  # fmt: skip


@pytest.mark.parametrize(("files", "args", "code", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_user_sees_where_and_what(
    tmp_path: Path, files: dict[str, str], args: list[str], code: int, fragments: list[str]
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    result = runner.invoke(app, [a.replace("{dir}", str(tmp_path)) for a in args])
    assert result.exit_code == code, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    errors = " ".join(result.stderr.split())  # rich wraps long lines
    for fragment in fragments:
        assert fragment in errors, errors
    if args[0] == "render":
        assert not (tmp_path / "out").exists()  # nothing written


NOT_A_NUMBER = {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "abc"]}]}}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (json.dumps(NOT_A_NUMBER).encode(), "sample value 'abc' is not a number"),
        (b"[" * 50_000, "with a JSON body nested too deeply to be a Prometheus answer"),
    ],
    ids=["sample-value-not-a-number", "json-nested-too-deep"],
)
def test_evidence_names_prometheus_when_its_answer_is_wrong(
    prometheus: str,  # noqa: F811 (the stand-in fixture imported above)
    tmp_path: Path,
    body: bytes,
    fragment: str,
) -> None:
    _Answer.status, _Answer.content_type, _Answer.body = 200, "application/json", body
    window = ["--before", "2026-01-01T00:00..2026-01-01T01:00", "--after", "2026-01-02T00:00..2026-01-02T01:00"]
    result = runner.invoke(app, ["evidence", "--prometheus", prometheus, *window, "-o", str(tmp_path / "ev")])
    assert result.exit_code == 2, result.stdout + result.stderr
    errors = " ".join(result.stderr.split())
    assert f"{prometheus}:" in errors
    assert fragment in errors
    assert "Traceback" not in result.stdout + result.stderr


def test_twin_step_on_a_file_that_is_not_utf8_names_it(tmp_path: Path) -> None:
    bad = tmp_path / "k.yaml"
    bad.write_bytes(QUEUE.encode() + b"# \xff\xfe\n")
    result = runner.invoke(app, ["twin", "step", str(bad)])
    assert result.exit_code == 2, result.stdout + result.stderr
    errors = " ".join(result.stderr.split())
    assert "Traceback" not in result.stdout + result.stderr
    assert f"{bad}: not UTF-8 text (byte {len(QUEUE) + 2})" in errors, errors
