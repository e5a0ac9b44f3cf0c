"""kwok's Stages: how fake nodes become Ready and how pods on them run, finish and go away.

kwok simulates kubelets by patching object status when a Stage's selector matches. These four stages
are the whole life the testbed needs: a node turns Ready; a scheduled pod starts Running; a Job's pod
succeeds after the duration in its ``RUN_FOR_ANNOTATION`` (a Go duration such as ``30s``; a day when
absent, so an unannotated pod holds its GPUs until deleted); and a deleted pod is removed, finalizers
and all, at its ``deletionTimestamp``: the API server sets that to the deletion's instant plus the
pod's ``terminationGracePeriodSeconds`` (``pkg/registry/core/pod/strategy.go`` ``CheckGracefulDelete``
and ``apiserver/pkg/registry/rest/delete.go`` ``BeforeDelete``, Kubernetes v1.36.5), so a terminating
pod holds its node's resources for its whole grace period, as a kubelet whose containers use all of it
does. kwok v0.8 reads a delay from a time-valued field as that time minus now
(``pkg/utils/lifecycle/value_duration_from.go``); its own ``pod-delete`` stage puts the field in
``jitterDurationFrom``, which draws a random instant between one second and the deletionTimestamp;
the testbed puts it in ``durationFrom`` so the delay is exactly the grace period. A pod that never ran
or already finished has a grace period of 0 (the API server deletes it at once).
"""

from __future__ import annotations

from typing import Any

RUN_FOR_ANNOTATION = "testbed.gpufleet.io/run-for"
DEFAULT_RUN_MS = 24 * 3600 * 1000
API = "kwok.x-k8s.io/v1alpha1"

Stage = dict[str, Any]

_NODE_READY = """\
{{ $now := Now }}
conditions:
- {type: Ready, status: "True", reason: KubeletReady, message: kwok fake kubelet is ready,
   lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
{{ range $t := list "MemoryPressure" "DiskPressure" "PIDPressure" "NetworkUnavailable" }}
- {type: {{ $t }}, status: "False", reason: KubeletHasNo{{ $t }}, message: fine,
   lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $now | Quote }}}
{{ end }}
addresses:
- {type: InternalIP, address: {{ NodeIP | Quote }}}
- {type: Hostname, address: {{ .metadata.name | Quote }}}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
phase: Running
"""

_POD_RUNNING = """\
{{ $now := Now }}
phase: Running
startTime: {{ $now | Quote }}
conditions:
{{ range $t := list "PodScheduled" "Initialized" "ContainersReady" "Ready" }}
- {type: {{ $t }}, status: "True", lastTransitionTime: {{ $now | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- {name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: true, started: true, restartCount: 0,
   state: {running: {startedAt: {{ $now | Quote }}}}}
{{ end }}
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
{{ end }}
{{ with PodIPsWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- {ip: {{ . | Quote }}}
{{ end }}
{{ end }}
"""

_POD_SUCCEEDED = """\
{{ $now := Now }}
phase: Succeeded
conditions:
{{ range $t := list "Ready" "ContainersReady" }}
- {type: {{ $t }}, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- {name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: false, started: false, restartCount: 0,
   state: {terminated: {exitCode: 0, reason: Completed, finishedAt: {{ $now | Quote }}}}}
{{ end }}
"""


def _stage(name: str, kind: str, expressions: list[dict[str, Any]], nxt: dict[str, Any], **extra: Any) -> Stage:
    return {
        "apiVersion": API,
        "kind": "Stage",
        "metadata": {"name": f"gpufleet-{name}"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": kind},
            "selector": {"matchExpressions": expressions},
            **extra,
            "next": nxt,
        },
    }


def _is(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _exists(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def _absent(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "DoesNotExist"}


_READY = '.status.conditions.[] | select( .type == "Ready" ) | .status'


def stages() -> list[Stage]:
    return [
        _stage(
            "node-ready",
            "Node",
            [{"key": _READY, "operator": "NotIn", "values": ["True"]}],
            {"statusTemplate": _NODE_READY},
        ),
        _stage(
            "pod-running",
            "Pod",
            [_absent(".metadata.deletionTimestamp"), _exists(".spec.nodeName"), _is(".status.phase", "Pending")],
            {"statusTemplate": _POD_RUNNING},
        ),
        _stage(
            "pod-succeeded",
            "Pod",
            [
                _absent(".metadata.deletionTimestamp"),
                _is(".status.phase", "Running"),
                _is(".metadata.ownerReferences.[].kind", "Job"),
            ],
            {"statusTemplate": _POD_SUCCEEDED},
            delay={
                "durationMilliseconds": DEFAULT_RUN_MS,
                "durationFrom": {"expressionFrom": f'.metadata.annotations["{RUN_FOR_ANNOTATION}"]'},
            },
        ),
        _stage(
            "pod-gone",
            "Pod",
            [_exists(".metadata.deletionTimestamp")],
            {"finalizers": {"empty": True}, "delete": True},
            delay={"durationMilliseconds": 0, "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}},
        ),
    ]
