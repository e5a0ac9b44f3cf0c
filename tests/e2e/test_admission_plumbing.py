"""The testbed's API server enforces ValidatingAdmissionPolicies, as gpufleet's admission rules need.

This policy is the test's own, a stand-in for the one the admission work renders: it proves the
plugin is on and that CEL compiles and runs on this API server, with the message a user would see.
"""

from __future__ import annotations

from typing import Any

import yaml

MESSAGE = "testbed: a Job needs the gpufleet.io/team label"


def _policy() -> list[dict[str, Any]]:
    api = "admissionregistration.k8s.io/v1"
    return [
        {
            "apiVersion": api,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "testbed-team-label"},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}
                    ]
                },
                "validations": [
                    {
                        "expression": "has(object.metadata.labels) && 'gpufleet.io/team' in object.metadata.labels",
                        "message": MESSAGE,
                    }
                ],
            },
        },
        {
            "apiVersion": api,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "testbed-team-label"},
            "spec": {
                "policyName": "testbed-team-label",
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "vap-check"}}},
            },
        },
    ]


def _job(labels: dict[str, str]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "probe", "namespace": "vap-check", "labels": labels},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
        }
    )


def test_a_validating_admission_policy_refuses_an_unlabelled_job(cluster: Any) -> None:
    cluster.kubectl("create", "namespace", "vap-check", check=False)
    cluster.apply(_policy())
    try:

        def refused() -> str | None:
            result = cluster.kubectl("create", "--dry-run=server", "--filename=-", stdin=_job({}), check=False)
            return result.stderr if result.returncode != 0 else None

        error = cluster.eventually(refused, "the policy to take effect")
        assert MESSAGE in error
        labelled = cluster.kubectl(
            "create", "--dry-run=server", "--filename=-", stdin=_job({"gpufleet.io/team": "alpha"}), check=False
        )
        assert labelled.returncode == 0, labelled.stderr
    finally:
        cluster.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "testbed-team-label")
