"""``gpufleet check``: verdicts, JSON, exit codes 0/1/2, multi-document files and kubectl Lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app

HERE = Path(__file__).resolve().parent
POLICY = str(HERE.parents[1] / "examples" / "fleet.yaml")
JOBS = HERE / "manifests" / "jobs.yaml"
runner = CliRunner()


def documents() -> list[dict[str, object]]:
    return list(yaml.safe_load_all(JOBS.read_text()))


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_denied_job_exits_1_with_every_reason() -> None:
    result = runner.invoke(app, ["check", POLICY, str(JOBS)])
    assert result.exit_code == 1
    assert "✗ denied   Job research/finetune-llama" in result.stdout
    for reason in (
        "MissingLabel",
        "WrongQueueName",
        "ServingPoolToleration",
        "CheckpointLocationNotAllowed",
        "GPURequestTooLarge",
    ):
        assert f"    {reason}: " in result.stdout
    assert "✓ admitted Job nlp-eval/eval-mistral" in result.stdout
    assert "LocalQueue nlp, ClusterQueue nlp, flavors: a100-mig" in result.stdout


def test_admitted_objects_exit_0(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", POLICY, write(tmp_path, "ok.yaml", yaml.safe_dump(documents()[1]))])
    assert result.exit_code == 0, result.stdout
    assert "1 objects: 1 admitted, 0 denied" in result.stdout


def test_json_lists_reasons_queue_flavors_and_what_the_webhook_fills() -> None:
    result = runner.invoke(app, ["check", POLICY, str(JOBS), "--json"])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    denied, admitted = out["objects"]
    assert (out["admitted"], out["denied"]) == (1, 1)
    assert [d["reason"] for d in denied["denials"]][:2] == ["MissingLabel", "WrongQueueName"]
    assert admitted["localQueue"] == admitted["clusterQueue"] == "nlp"
    assert admitted["flavors"] == ["a100-mig"]
    assert admitted["requestsGPUs"] is True
    assert [(f["label"], f["value"]) for f in admitted["filled"]] == [
        ("kueue.x-k8s.io/queue-name", "nlp"),
        ("kueue.x-k8s.io/priority-class", "dev"),
    ]


def test_reads_a_kubectl_list(tmp_path: Path) -> None:
    listing = {"apiVersion": "v1", "kind": "List", "items": documents(), "metadata": {"resourceVersion": ""}}
    result = runner.invoke(app, ["check", POLICY, write(tmp_path, "list.yaml", yaml.safe_dump(listing)), "--json"])
    assert [o["item"] for o in json.loads(result.stdout)["objects"]] == [0, 1]


def test_reads_kubectl_output_from_stdin() -> None:
    listing = {"apiVersion": "v1", "kind": "List", "items": documents()}
    result = runner.invoke(app, ["check", POLICY, "-", "--json"], input=yaml.safe_dump(listing))
    assert result.exit_code == 1
    assert [o["file"] for o in json.loads(result.stdout)["objects"]] == ["-", "-"]


def test_objects_without_a_namespace_take_the_option(tmp_path: Path) -> None:
    doc = documents()[1]
    del doc["metadata"]["namespace"]  # type: ignore[index]
    path = write(tmp_path, "nons.yaml", yaml.safe_dump(doc))
    assert runner.invoke(app, ["check", POLICY, path]).exit_code == 0  # "default" is no team's: not governed
    result = runner.invoke(app, ["check", POLICY, path, "-n", "research", "--json"])
    assert json.loads(result.stdout)["objects"][0]["denials"][0]["reason"] == "WrongTeam"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Job\nmetadata: {name: [\n", "not valid YAML"),
        ("- just\n- a list\n", "is not a Kubernetes object"),
        ("kind: List\nitems: [1]\n", "item 0 of document 1 is not a Kubernetes object"),
    ],
    ids=["broken-yaml", "not-an-object", "bad-list-item"],
)
def test_unreadable_input_exits_2(tmp_path: Path, text: str, message: str) -> None:
    result = runner.invoke(app, ["check", POLICY, write(tmp_path, "bad.yaml", text)])
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_missing_file_exits_2() -> None:
    result = runner.invoke(app, ["check", POLICY, "/nonexistent/jobs.yaml"])
    assert result.exit_code == 2
    assert "no such file" in result.stderr


def test_webhook_serve_refuses_a_missing_certificate(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["webhook", "serve", POLICY, "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "k.pem")]
    )
    assert result.exit_code == 2
    assert "no such certificate file" in result.stderr
