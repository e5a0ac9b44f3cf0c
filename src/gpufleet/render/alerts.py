"""Alerting rules a platform team pages or tickets on, with the policy's thresholds in them.

Every alert carries ``severity`` (critical pages, warning tickets), ``gpufleet_impact`` (``serving``:
the chat service hurts now; ``batch``: queued work waits; ``platform``: gpufleet's own parts, whose
gaps show up in the ledger and the evidence later) which the Alertmanager routing reads, the team
or pool it is about, a summary that names them, and a ``runbook_url`` into docs/runbooks/.

Metric sources: gpufleet's recorder and webhook (``/metrics``), Kueue v0.19 (``pkg/metrics``), the
API server (admission metrics), DCGM (through the recording rules) and kube-state-metrics.
"""

from __future__ import annotations

from typing import Any

from gpufleet.check.manifests import NAME as ADMISSION_POLICY
from gpufleet.check.manifests import NAMESPACE
from gpufleet.policy.fleet import Fleet
from gpufleet.policy.model import Monitoring
from gpufleet.recorder.manifests import NAME as RECORDER
from gpufleet.render import promql
from gpufleet.render.recording import POOL_IDLE

Rule = dict[str, Any]
RUNBOOKS = "https://github.com/gpufleet/gpufleet/blob/main/docs/runbooks"
WEBHOOK_JOB = "gpufleet-webhook"
WEBHOOK_NAMES = "validate.gpufleet.io|mutate.gpufleet.io"
CHECKPOINT_METRIC = "gpufleet_recorder_last_checkpoint_timestamp_seconds"  # gauge, unix seconds
MIG_STATE = promql.ksm_label("nvidia.com/mig.config.state")
SERVING, BATCH, PLATFORM = "serving", "batch", "platform"


def _alert(name: str, expr: str, *, wait: str, impact: str, summary: str, description: str, **labels: str) -> Rule:
    severity = "critical" if impact == SERVING else "warning"
    return {
        "alert": name,
        "expr": expr,
        "for": wait,
        "labels": {"severity": severity, "gpufleet_impact": impact, **labels},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{RUNBOOKS}/{name}.md",
        },
    }


def recorder_alerts(m: Monitoring) -> list[Rule]:
    job = f'job="{RECORDER}"'
    return [
        _alert(
            "GpufleetRecorderDown",
            f"(sum(up{{{job}}} * on (instance) gpufleet_recorder_leader{{{job}}}) or vector(0)) < 1",
            wait="5m",
            impact=PLATFORM,
            summary=f"the gpufleet recorder in {NAMESPACE} is down or holds no Lease: nothing writes the ledger",
            description="No scraped recorder replica reports gpufleet_recorder_leader 1, so no allocation or wait is recorded "
            "until one does; the ledger will have a gap for this time.",
        ),
        _alert(
            "GpufleetRecorderLagging",
            f"max(gpufleet_recorder_lag_seconds{{{job}}}) > {m.recorderLagSeconds}",
            wait="10m",
            impact=PLATFORM,
            summary="the gpufleet recorder is {{ $value | humanizeDuration }} behind the API server",
            description=f"The newest condition change in the recorder's last write is older than {m.recorderLagSeconds} s.",
        ),
        _alert(
            "GpufleetLedgerCheckpointStale",
            f"time() - max({CHECKPOINT_METRIC}{{{job}}}) > {m.checkpointMaxAgeMinutes * 60}",
            wait="5m",
            impact=PLATFORM,
            summary="the gpufleet ledger's newest checkpoint is {{ $value | humanizeDuration }} old",
            description=f"No signed ledger checkpoint was published in the last {m.checkpointMaxAgeMinutes} minutes, so records "
            "since then are not yet anchored against tampering.",
        ),
    ]


def admission_alerts(m: Monitoring) -> list[Rule]:
    job = f'job="{WEBHOOK_JOB}"'
    errors = (
        f'sum by (endpoint) (rate(gpufleet_webhook_reviews_total{{{job}, outcome="bad_request"}}[5m])) '
        f'or sum by (endpoint) (rate(gpufleet_webhook_denials_total{{{job}, reason="InternalError"}}[5m])) '
        'or sum by (endpoint) (label_replace(rate(apiserver_admission_webhook_rejection_count{name=~"'
        f'{WEBHOOK_NAMES}", error_type=~"calling_webhook_error|apiserver_internal_error"}}[5m]), '
        '"endpoint", "$1", "name", "(.*)"))'
    )
    latency = f"rate(gpufleet_webhook_review_seconds_bucket{{{job}}}[5m])"
    denials = (
        f'sum(rate(apiserver_validating_admission_policy_check_total{{policy="{ADMISSION_POLICY}", '
        'enforcement_action="deny"}[10m])) * 600'
    )
    return [
        _alert(
            "GpufleetWebhookErrors",
            f"({errors}) > 0",
            wait="5m",
            impact=PLATFORM,
            summary="the gpufleet admission webhook fails on {{ $labels.endpoint }}",
            description="The webhook answered malformed reviews, failed on an object (InternalError), or the API server "
            "could not call it. Its configurations fail closed for the team namespaces: new batch work is refused.",
        ),
        _alert(
            "GpufleetWebhookSlow",
            f"histogram_quantile(0.99, sum by (le, endpoint) ({latency})) > {m.webhookP99Seconds}",
            wait="10m",
            impact=PLATFORM,
            summary="the gpufleet admission webhook's p99 on {{ $labels.endpoint }} is {{ $value | humanizeDuration }}",
            description=f"Above the policy's {m.webhookP99Seconds} s; the API server gives up after its timeout.",
        ),
        _alert(
            "GpufleetAdmissionDenialBurst",
            f"{denials} > 20",
            wait="0m",
            impact=BATCH,
            summary="the admission policy denied {{ $value | humanize }} requests in 10 minutes",
            description=f"ValidatingAdmissionPolicy {ADMISSION_POLICY} denies a burst: usually one team's pipeline submits "
            "manifests without the required labels, or the policy changed under running CI.",
        ),
    ]


def queue_alerts(fleet: Fleet) -> list[Rule]:
    m = fleet.policy.monitoring
    bound = f"{m.maxWaitMinutes}m"
    out: list[Rule] = []
    for team in fleet.policy.teams:
        cq = f'cluster_queue="{team.name}", {promql.KUEUE_LEADER}'
        out.append(
            _alert(
                "GpufleetTeamWaitTooLong",
                f"min_over_time(sum(kueue_pending_workloads{{{cq}}})[{bound}:1m]) > 0 "
                f"and on () (sum(increase(kueue_admitted_workloads_total{{{cq}}}[{bound}])) or vector(0)) < 1",
                wait="0m",
                impact=BATCH,
                summary=f"team {team.name}: {{{{ $value }}}} workloads pending for over {m.maxWaitMinutes} min, none admitted",
                description=f"ClusterQueue {team.name} had pending workloads for the whole of the last {m.maxWaitMinutes} "
                "minutes and admitted none, so its oldest workload waited longer than the policy's bound.",
                team=team.name,
            )
        )
    for cap in fleet.queued_pools():
        teams = [t.name for t in fleet.policy.teams if fleet.reachable(t.name, cap.pool)]
        if not teams:
            continue
        pending = f'sum(kueue_pending_workloads{{cluster_queue=~"{"|".join(teams)}", {promql.KUEUE_LEADER}}}) > 0'
        out.append(
            _alert(
                "GpufleetGpusIdleWhileQueued",
                f'{POOL_IDLE}{{pool="{cap.name}"}} >= 1 and on () ({pending})',
                wait=f"{m.idleWhileQueuedMinutes}m",
                impact=BATCH,
                summary=f"pool {cap.name}: {{{{ $value }}}} GPUs idle while workloads of {', '.join(teams)} wait",
                description=f"Engine activity under {promql.IDLE_BELOW:.0%} on at least one card's worth of pool {cap.name} "
                f"for {m.idleWhileQueuedMinutes} minutes while the teams that may use it have pending workloads: "
                "quota, flavors or fragmentation keep waiting work off idle cards.",
                pool=cap.name,
            )
        )
    return out


def serving_alerts(fleet: Fleet) -> list[Rule]:
    serving = fleet.policy.serving
    if serving is None:
        return []
    cap = fleet.pools[serving.pool]
    ns = serving.namespace
    names = "|".join(d.name for d in serving.deployments)
    out = [
        _alert(
            "GpufleetBatchOnServingPool",
            f"sum by (namespace, pod) ({promql.requests(cap, [f'namespace!={chr(34)}{ns}{chr(34)}'])}) > 0",
            wait="2m",
            impact=SERVING,
            summary=f"{{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} holds a GPU on the serving pool {cap.name}",
            description=f"A pod outside namespace {ns} runs with a GPU on the nodes reserved for serving: the chat service "
            "may lack cards to scale, and the admission rules or the pool's taint were bypassed.",
            pool=cap.name,
        )
    ]
    if names:
        out.append(
            _alert(
                "GpufleetServingReplicasUnavailable",
                f'kube_deployment_status_replicas_unavailable{{namespace="{ns}", deployment=~"{names}"}} > 0',
                wait="5m",
                impact=SERVING,
                summary=f"serving deployment {{{{ $labels.deployment }}}} in {ns}: {{{{ $value }}}} replicas unavailable",
                description="Fewer vLLM replicas serve than the Deployment wants: the chat is slower or refuses requests.",
                pool=cap.name,
            )
        )
    return out


def node_alerts(fleet: Fleet) -> list[Rule]:
    serving = fleet.policy.serving.pool if fleet.policy.serving else None
    out: list[Rule] = []
    for cap in fleet.pools.values():
        impact = SERVING if cap.name == serving else BATCH
        nodes = promql.node_matchers(cap)
        if cap.decision.mode == "mig":
            out.append(
                _alert(
                    "GpufleetMigReconfigFailed",
                    f'max by (node) (kube_node_labels{{{nodes}, {MIG_STATE}="failed"}})',
                    wait="5m",
                    impact=impact,
                    summary=f"node {{{{ $labels.node }}}} of pool {cap.name}: MIG reconfiguration failed",
                    description="The GPU Operator's mig-manager set nvidia.com/mig.config.state=failed: the node's MIG "
                    "instances do not match the rendered layout, so its quota in Kueue is not really there.",
                    pool=cap.name,
                )
            )
        for resource, units in cap.units.items():
            have = promql.allocatable(cap, resource)
            out.append(
                _alert(
                    "GpufleetGpusMissing",
                    f"({have} or vector(0)) < {units} and on () count(kube_node_info) > 0",
                    wait="10m",
                    impact=impact,
                    summary=f"pool {cap.name} advertises {{{{ $value }}}} of its {units} {resource}",
                    description="Nodes of the pool advertise fewer GPU units than the policy declares (while kube-state-metrics "
                    "reports nodes at all): a node is gone or "
                    "NotReady, the device plugin lost cards (XID errors, driver), or the MIG layout differs.",
                    pool=cap.name,
                    resource=resource,
                )
            )
    return out
