"""``gpufleet tune-job``'s ConfigMap and Job, created on the testbed's API server by a server-side dry run.

The API server runs the Job's own validation (an Indexed Job's completions and parallelism,
``backoffLimitPerIndex`` only on an Indexed Job, the downward-API index annotation), the
admission chain (Kueue's webhooks, the ValidatingAdmissionPolicies) and defaulting, which the schema
check of tests/validation does not. Nothing is persisted: a dry run, as a platform lead would check
the folder before ``kubectl apply``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.trace import write_trace
from tests.e2e.conftest import Cluster
from tests.tune.cases import LIMITED, a_alone

pytestmark = pytest.mark.e2e
NAMESPACE = "tune-workers"


def _rendered(tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    policy, trace = tmp_path / "policy.yaml", tmp_path / "trace.csv"
    policy.write_text(LIMITED)
    write_trace(a_alone(), trace)
    out = tmp_path / "job"
    args = ["tune-job", str(policy), "--trace", str(trace), "--workers", "3", "--trials", "9"]
    args += ["--namespace", NAMESPACE, "--image", "registry.example.com/gpufleet:0.1.0", "-o", str(out), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return list(yaml.safe_load_all((out / "tune-job.yaml").read_text()))


def _dry_run(cluster: Cluster, obj: dict[str, Any]) -> Any:
    done = cluster.kubectl(
        "create", "--dry-run=server", "--output=json", "--filename=-", stdin=yaml.safe_dump(obj), check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("extra", [(), ("--trace-claim", "traces")], ids=["trace-in-configmap", "trace-on-claim"])
def test_the_api_server_accepts_the_job(cluster: Cluster, tmp_path: Path, extra: tuple[str, ...]) -> None:
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    cluster.eventually(
        lambda: cluster.kubectl("get", "namespace", NAMESPACE, check=False).returncode == 0, "the namespace"
    )
    configmap, job = _rendered(tmp_path, *extra)
    stored_cm = _dry_run(cluster, configmap)
    assert stored_cm["data"]["policy.yaml"] == LIMITED
    stored = _dry_run(cluster, job)
    spec = stored["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimitPerIndex"]) == (
        "Indexed",
        3,
        3,
        2,
    )
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert cluster.kubectl("get", "jobs", "--namespace", NAMESPACE, "--output=name").stdout.strip() == ""  # a dry run


def test_the_dry_run_refuses_what_the_job_controller_would(cluster: Cluster, tmp_path: Path) -> None:
    """The check above can fail: a per-index backoff needs an Indexed Job, and the server says so."""
    cluster.kubectl("create", "namespace", NAMESPACE, check=False)
    _configmap, job = _rendered(tmp_path)
    job["spec"]["completionMode"] = "NonIndexed"
    done = cluster.kubectl("create", "--dry-run=server", "--filename=-", stdin=yaml.safe_dump(job), check=False)
    assert done.returncode != 0 and "requires indexed completion mode" in done.stderr, done.stderr
