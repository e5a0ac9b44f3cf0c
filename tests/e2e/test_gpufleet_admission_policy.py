"""gpufleet's own rendered ValidatingAdmissionPolicy, enforced by the real API server.

The session's bundle (``applied``) includes ``admission-policy.yaml``; the API server compiles its CEL
and judges each Job here. `gpufleet check` judges the same Job offline; both must agree, message for
message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from tests.e2e.conftest import POLICY, eventually

LABELS = {
    "kueue.x-k8s.io/queue-name": "alpha",
    "gpufleet.io/team": "alpha",
    "gpufleet.io/model": "tiny",
    "gpufleet.io/data-class": "internal",
}


def job(name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "alpha", "labels": labels, "annotations": annotations or {}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                }
            }
        },
    }


CASES = [
    ("labelled", job("ok", LABELS), None),
    ("no-model", job("nomodel", {k: v for k, v in LABELS.items() if k != "gpufleet.io/model"}), "MissingLabel"),
    ("other-team", job("otherteam", {**LABELS, "gpufleet.io/team": "beta"}), "WrongTeam"),
    ("wrong-queue", job("wrongq", {**LABELS, "kueue.x-k8s.io/queue-name": "beta"}), "WrongQueueName"),
    (
        "checkpoint-elsewhere",
        job("ckpt", LABELS, {"gpufleet.io/checkpoint": "s3://us-east-1/x"}),
        "CheckpointLocationNotAllowed",
    ),
]


def create_probe(cluster: Any) -> Any:
    """A Job without any label: every version of the policy refuses it."""
    probe = job("probe", {})
    return cluster.kubectl("create", "--dry-run=server", "--filename=-", stdin=yaml.safe_dump(probe), check=False)


def offline(obj: dict[str, Any], tmp_path: Path) -> list[dict[str, str]]:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(obj))
    result = CliRunner().invoke(app, ["check", str(POLICY), str(path), "--json"])
    assert result.exit_code in (0, 1), result.output
    (verdict,) = json.loads(result.stdout)["objects"]
    return list(verdict.get("denials", []))


@pytest.mark.parametrize(("obj", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_api_server_and_gpufleet_check_agree(
    cluster: Any, applied: Path, tmp_path: Path, obj: dict[str, Any], reason: str | None
) -> None:
    denials = offline(obj, tmp_path)

    def create() -> Any:
        return cluster.kubectl("create", "--dry-run=server", "--filename=-", stdin=yaml.safe_dump(obj), check=False)

    # The API server starts enforcing a freshly applied policy asynchronously (its policy informer),
    # so wait until the always-refused probe is refused before judging the case.
    eventually(lambda: create_probe(cluster).returncode != 0 or None, "gpufleet's admission policy to take effect")
    result = create()
    if reason is None:
        assert denials == []
        assert result.returncode == 0, result.stderr
        return
    assert reason in {d["reason"] for d in denials}
    assert result.returncode != 0, "the API server admitted a Job gpufleet check denies"
    assert "gpufleet" in result.stderr and "denied request" in result.stderr
    assert any(d["message"] in result.stderr for d in denials), (denials, result.stderr)
