"""Jobs for the real Kueue on the testbed: the one builder every e2e test that submits Jobs uses.

A Job runs ``pods`` pods at once (parallelism = completions), is never retried (``backoffLimit: 0``,
``restartPolicy: Never``) and has one container with ``limits`` (and ``requests`` where given, else
Kubernetes copies the limits). A Job that is not ``scheduled`` has pods selecting a label no node
carries: Kueue admits it, no pod ever runs, so only Kueue's quota decisions are observed. Its pods'
``terminationGracePeriodSeconds`` is ``grace_s``, 0 unless a test studies termination: the testbed's
kwok holds a deleted pod for its grace period (Kubernetes' default would be 30 s), and a test's
clean-up should not wait for it.
"""

from __future__ import annotations

from typing import Any

NEVER_SCHEDULED = {"twin-differential.gpufleet.io/never": "true"}


def batch_job(
    name: str,
    namespace: str,
    labels: dict[str, Any],
    *,
    pods: int,
    limits: dict[str, Any],
    requests: dict[str, Any] | None = None,
    pod_metadata: dict[str, Any] | None = None,
    scheduled: bool = True,
    deadline_s: int | None = None,
    grace_s: int = 0,
) -> dict[str, Any]:
    """The Job; ``pod_metadata`` goes on its pod template, ``deadline_s`` makes the Job controller fail
    it that long after it starts."""
    resources = {"limits": limits} if requests is None else {"requests": requests, "limits": limits}
    pod: dict[str, Any] = {"restartPolicy": "Never", "terminationGracePeriodSeconds": grace_s}
    if not scheduled:
        pod["nodeSelector"] = dict(NEVER_SCHEDULED)
    pod["containers"] = [{"name": "main", "image": "trainer:e2e", "resources": resources}]
    template: dict[str, Any] = {"spec": pod} if pod_metadata is None else {"metadata": pod_metadata, "spec": pod}
    spec: dict[str, Any] = {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template}
    if deadline_s is not None:
        spec["activeDeadlineSeconds"] = deadline_s
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }
