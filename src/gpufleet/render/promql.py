"""PromQL for one pool or team, built from the policy: the series ``gpufleet evidence`` reads, in rule form.

Evidence ties a DCGM series to a pool by its host and to a team by its namespace, and weighs each
device by its share of a card (a MIG instance its compute slices over the card's, a time-sliced
card whole). These builders say the same in PromQL, so a recorded figure and an evidence figure
mean one thing:

- a pool that names its nodes matches the host with a regex of those names (``Hostname`` or
  dcgm-exporter's other spelling ``hostname``); a pool given as a count is joined with
  kube-state-metrics' ``kube_node_labels`` on its selector labels (kube-state-metrics must allow
  those labels: ``--metric-labels-allowlist=nodes=[...]``, see docs/monitoring.md);
- a team's namespace is ``exported_namespace`` where Prometheus moved it there (the GPU Operator's
  ServiceMonitor does not honour the exporter's labels), ``namespace`` otherwise;
- a MIG pool counts instance series only, other pools whole-card series only; a full card without
  engine activity falls back to ``DCGM_FI_DEV_GPU_UTIL`` / 100.
"""

from __future__ import annotations

import re
from fractions import Fraction

from gpufleet.policy.capacity import PoolCapacity

# the series evidence reads (gpufleet.evidence.tracks / allocation; a test keeps them equal)
ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
REQUESTS = "kube_pod_container_resource_requests"
PHASE = "kube_pod_status_phase"
NODE_LABELS = "kube_node_labels"
# Kueue v0.19 labels its metrics with replica_role; in HA the followers report too, so read the
# leader's (or a standalone manager's, or an older Kueue's without the label)
KUEUE_LEADER = 'replica_role!="follower"'
IDLE_BELOW = 0.05  # engine activity under which a device counts as idle


def ksm_label(key: str) -> str:
    """kube-state-metrics' name for a Kubernetes label: ``gpufleet.io/pool`` → ``label_gpufleet_io_pool``."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def ksm_resource(resource: str) -> str:
    """kube-state-metrics' spelling of a resource: ``nvidia.com/mig-3g.40gb`` → ``nvidia_com_mig_3g_40gb``."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", resource)


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator} / {value.denominator}"


def _matchers(items: list[str]) -> str:
    return "{" + ", ".join(items) + "}"


def node_regex(cap: PoolCapacity) -> str | None:
    """The pool's node names as one anchored alternation (Prometheus anchors regexes), or None."""
    return "|".join(cap.pool.node_names) or None


def _node_join(cap: PoolCapacity, on: str) -> str:
    """``* on (<on>) group_left () <the pool's nodes>``: for pools whose nodes are a count."""
    selector = _matchers([f'{ksm_label(k)}="{v}"' for k, v in sorted(cap.pool.selector.items())])
    nodes = f"max by (node) ({NODE_LABELS}{selector})"
    if on != "node":
        nodes = f'label_replace({nodes}, "{on}", "$1", "node", "(.*)")'
    return f" * on ({on}) group_left () {nodes}"


def dcgm(metric: str, cap: PoolCapacity, matchers: list[str]) -> str:
    """``metric``'s series from the pool's hosts, the host always in label ``Hostname``."""
    regex = node_regex(cap)
    if regex is not None:
        upper = _matchers([f'Hostname=~"{regex}"', *matchers])
        lower = _matchers([f'hostname=~"{regex}"', *matchers])
        return f'({metric}{upper} or label_replace({metric}{lower}, "Hostname", "$1", "hostname", "(.+)"))'
    plain = f'label_replace({metric}{_matchers(matchers)}, "Hostname", "$1", "hostname", "(.+)")'
    return f"({plain}{_node_join(cap, 'Hostname')})"


def _team(namespaces: tuple[str, ...] | None) -> list[list[str]]:
    """Matcher sets that select a team's series: by ``exported_namespace``, else by ``namespace``."""
    if namespaces is None:
        return [[]]
    regex = "|".join(namespaces)
    return [[f'exported_namespace=~"{regex}"'], [f'namespace=~"{regex}"', 'exported_namespace=""']]


def _weighted(expr: str, share: Fraction) -> str:
    return expr if share == 1 else f"{expr} * {_number(share)}"


def _devices(cap: PoolCapacity, namespaces: tuple[str, ...] | None) -> list[tuple[list[str], Fraction]]:
    """Matchers of each kind of device series the pool counts, with its card share."""
    out: list[tuple[list[str], Fraction]] = []
    for team in _team(namespaces):
        if cap.decision.mode == "mig" and cap.gpu.mig is not None:
            for resource in cap.units:
                profile = resource.removeprefix("nvidia.com/mig-")
                share = Fraction(int(profile.split("g.", 1)[0]), cap.gpu.mig.compute_slices)
                out.append(([f'GPU_I_PROFILE="{profile}"', 'GPU_I_ID!=""', *team], share))
        else:
            out.append((['GPU_I_PROFILE=""', *team], Fraction(1)))
    return out


def _activity(cap: PoolCapacity, matchers: list[str]) -> str:
    """Engine activity; on a whole card that reports none, DCGM_FI_DEV_GPU_UTIL / 100 stands in."""
    engine = dcgm(ENGINE, cap, matchers)
    if cap.decision.mode == "mig":
        return engine
    return f"({engine} or on (Hostname, gpu) ({dcgm(GPU_UTIL, cap, matchers)} / 100))"


def busy(cap: PoolCapacity, namespaces: tuple[str, ...] | None = None) -> str:
    """Busy GPUs: engine activity × card share over the pool's (or the team's) devices; none when no series."""
    parts = [_weighted(_activity(cap, m), share) for m, share in _devices(cap, namespaces)]
    return f"sum({' or '.join(parts)})"


def idle(cap: PoolCapacity) -> str:
    """Idle GPUs: the card share of devices whose engine activity is under IDLE_BELOW (0 when none is)."""
    parts = [f"(({_activity(cap, m)} < {IDLE_BELOW}) * 0 + {_number(share)})" for m, share in _devices(cap, None)]
    return f"sum({' or '.join(parts)}) or {busy(cap)} * 0"


def memory_headroom(cap: PoolCapacity) -> str:
    """Framebuffer free over used + free, on the devices evidence counts."""
    free = " or ".join(dcgm(FB_FREE, cap, m) for m, _ in _devices(cap, None))
    used = " or ".join(dcgm(FB_USED, cap, m) for m, _ in _devices(cap, None))
    return f"sum({free}) / (sum({used}) + sum({free}))"


def _request_weight(cap: PoolCapacity, resource: str) -> Fraction:
    if cap.decision.mode == "mig" and cap.gpu.mig is not None:
        compute = int(resource.removeprefix("nvidia.com/mig-").split("g.", 1)[0])
        return Fraction(compute, cap.gpu.mig.compute_slices)
    if cap.decision.mode == "timeslice" and cap.decision.replicas:
        return Fraction(1, cap.decision.replicas)
    return Fraction(1)


def requests(cap: PoolCapacity, matchers: list[str], resources: tuple[str, ...] | None = None) -> str:
    """GPU requests of running pods on the pool's nodes (kube-state-metrics keeps finished pods' requests)."""
    wanted = "|".join(ksm_resource(r) for r in (resources or cap.units))
    base = [f'resource=~"{wanted}"', *matchers]
    regex = node_regex(cap)
    if regex is not None:
        selected = f"{REQUESTS}{_matchers([*base, f'node=~{chr(34)}{regex}{chr(34)}'])}"
    else:
        selected = f"({REQUESTS}{_matchers(base)}{_node_join(cap, 'node')})"
    running = f'max by (namespace, pod) ({PHASE}{{phase="Running"}})'
    return f"sum by (namespace, pod, node, resource) ({selected}) * on (namespace, pod) group_left () {running}"


def allocated(cap: PoolCapacity, namespaces: tuple[str, ...] | None = None) -> str:
    """Allocated GPUs: requests of running pods × the card share of the resource requested."""
    team = [f'namespace=~"{"|".join(namespaces)}"'] if namespaces else []
    parts = [_weighted(f"({requests(cap, team, (r,))})", _request_weight(cap, r)) for r in cap.units]
    return f"sum({' or '.join(parts)})"


def allocatable(cap: PoolCapacity, resource: str) -> str:
    """Units of ``resource`` the pool's nodes advertise (kube-state-metrics)."""
    metric = "kube_node_status_allocatable"
    matcher = f'resource="{ksm_resource(resource)}"'
    regex = node_regex(cap)
    if regex is not None:
        return f'sum({metric}{{{matcher}, node=~"{regex}"}})'
    return f"sum({metric}{{{matcher}}}{_node_join(cap, 'node')})"


def node_matchers(cap: PoolCapacity) -> str:
    """Matchers that pick the pool's nodes in kube_node_labels: their names, or the pool's selector labels."""
    regex = node_regex(cap)
    if regex is not None:
        return f'node=~"{regex}"'
    return ", ".join(f'{ksm_label(k)}="{v}"' for k, v in sorted(cap.pool.selector.items()))
