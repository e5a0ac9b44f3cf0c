"""The bundles of a fleet beyond one cluster: one for the MultiKueue manager, one per worker.

The manager holds no GPUs. It queues every Job in a ``<team>-<zone>`` ClusterQueue whose one
admission check is the zone's MultiKueue AdmissionCheck; that check's MultiKueueConfig lists exactly
the zone's clusters, so Kueue dispatches a Job only where its data class may run. Each worker is an
ordinary gpufleet cluster (its pools' flavors, ClusterQueues, nodes, serving, admission policy),
rendered from the policy narrowed to its own pools, plus the ``<team>-<zone>`` LocalQueues that
MultiKueue's copies arrive in and the residency policy as a backstop.

The manager's zone ClusterQueues carry the team's quota on the zone's pools. A pool in two zones is
counted in both: the manager's quota is a gate in front of the workers, whose own ClusterQueues decide
(Kueue's MultiKueue keeps quota on both sides and the worker's admission is what runs a Job).
"""

from __future__ import annotations

from gpufleet.policy.clusters import DISPATCHER_NAMES
from gpufleet.policy.fleet import Fleet, resolve
from gpufleet.policy.model import FleetPolicy
from gpufleet.policy.residency import MAX_CLUSTERS_PER_CONFIG, Zone, project, queue_name, team_zones, zones
from gpufleet.render import kueue
from gpufleet.render.bundle import Bundle, RenderedFile
from gpufleet.render.common import Obj, meta, obj
from gpufleet.render.residency import residency_policy, without_team_queue_rule

CONTROLLER = "kueue.x-k8s.io/multikueue"  # kueue.MultiKueueControllerName
ZONE_LABEL = "gpufleet.io/zone"
CLUSTER_LABEL = "gpufleet.io/cluster"
MANAGER = "manager"
WORKERS = "workers"

MANAGER_CONFIG_HEADER = """Kueue manager Configuration fields for the MultiKueue manager cluster: gpufleet's fields plus the
multiKueue section (the dispatcher). Not an API object: merge it into the controller_manager_config.yaml
key of the kueue-manager-config ConfigMap (kueue-system), then restart kueue-controller-manager.
Create each worker's kubeconfig Secret in kueue-system first (docs/multikueue.md); none is rendered."""


def admission_check_name(zone: str) -> str:
    return f"multikueue-{zone}"


def multikueue_clusters(policy: FleetPolicy) -> list[Obj]:
    """One MultiKueueCluster per worker that some zone uses, reading its kubeconfig from the named Secret."""
    used = {c for z in zones(policy) for c in z.clusters}
    return [
        obj(
            kueue.API,
            "MultiKueueCluster",
            meta(c.name, labels={CLUSTER_LABEL: c.name, "gpufleet.io/region": c.region}),
            spec={"clusterSource": {"kubeConfig": {"location": c.kubeconfigSecret, "locationType": "Secret"}}},
        )
        for c in policy.clusters
        if c.name in used
    ]


def multikueue_configs(policy: FleetPolicy) -> list[Obj]:
    """One MultiKueueConfig per residency zone, listing exactly its clusters in policy order."""
    return [
        obj(
            kueue.API,
            "MultiKueueConfig",
            meta(z.name, labels={ZONE_LABEL: z.name}),
            spec={"clusters": list(z.clusters)},
        )
        for z in zones(policy)
    ]


def admission_checks(policy: FleetPolicy) -> list[Obj]:
    return [
        obj(
            kueue.API,
            "AdmissionCheck",
            meta(admission_check_name(z.name), labels={ZONE_LABEL: z.name}),
            spec={
                "controllerName": CONTROLLER,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": z.name},
            },
        )
        for z in zones(policy)
    ]


def _zone_cluster_queue(policy: FleetPolicy, zone: Zone, team_name: str) -> Obj:
    """The team's ClusterQueue for one zone: its quota on the zone's pools, the zone's one check."""
    zone_fleet = resolve(project(policy, set(zone.clusters)))
    team = zone_fleet.policy.team(team_name)
    assert team is not None  # a projection keeps every team
    cq = kueue.cluster_queue(zone_fleet, team)
    cq["metadata"] = meta(
        queue_name(team_name, zone.name), labels={"gpufleet.io/team": team_name, ZONE_LABEL: zone.name}
    )
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check_name(zone.name)}]}
    return cq


def zone_cluster_queues(policy: FleetPolicy) -> list[Obj]:
    return [_zone_cluster_queue(policy, z, t.name) for t in policy.teams for z in team_zones(policy, t.name)]


def zone_local_queues(policy: FleetPolicy, cluster_queue_of: dict[tuple[str, str], str]) -> list[Obj]:
    """``<team>-<zone>`` LocalQueues in each team namespace, pointing at ``cluster_queue_of[(team, zone)]``."""
    out = []
    for t in policy.teams:
        for z in team_zones(policy, t.name):
            target = cluster_queue_of.get((t.name, z.name))
            if target is None:
                continue
            for ns in t.namespaces:
                labels = {"gpufleet.io/team": t.name, ZONE_LABEL: z.name}
                out.append(
                    obj(
                        kueue.API,
                        "LocalQueue",
                        meta(queue_name(t.name, z.name), ns, labels),
                        spec={"clusterQueue": target},
                    )
                )
    return out


def manager_flavors(fleet: Fleet) -> list[Obj]:
    """The manager's ResourceFlavors: one per queued pool, for quota only, with no node labels or tolerations.

    Kueue merges the admitting flavor's node labels and tolerations into a batch Job's pod template
    when it starts the Job (``startJob`` → ``RunWithPodSetsInfo``), on the manager too, and MultiKueue
    copies that template to the worker. A pool selector picked on the manager would then pin the
    worker's copy to a pool the worker may not have (seen on the testbed: a Job re-dispatched after its
    worker was lost carried ``gpufleet.io/pool`` of the lost worker's pool and was refused on the other).
    The workers' own flavors place the pods."""
    return [
        obj(kueue.API, "ResourceFlavor", meta(p.name, labels={"gpufleet.io/pool": p.name}), spec={})
        for p in fleet.queued_pools()
    ]


def manager_configuration(fleet: Fleet) -> Obj:
    """Kueue's Configuration for the manager: gpufleet's fields and the ``multiKueue`` section."""
    config = kueue.configuration(fleet, [])
    settings = fleet.policy.multiKueue
    section: Obj = {"dispatcherName": DISPATCHER_NAMES[settings.dispatcher]}
    if settings.stepSize is not None:
        section["incrementalDispatcherConfig"] = {"stepSize": settings.stepSize}
    if settings.workerLostTimeoutSeconds is not None:
        section["workerLostTimeout"] = kueue.go_duration(settings.workerLostTimeoutSeconds)
    config["multiKueue"] = section
    return config


def manager_files(fleet: Fleet) -> list[RenderedFile]:
    from gpufleet.check.manifests import validating_admission_policy
    from gpufleet.render import namespaces

    policy = fleet.policy
    team_namespaces = [
        n for n in namespaces(fleet) if n["metadata"]["name"] != (policy.serving.namespace if policy.serving else None)
    ]
    own = {(t.name, z.name): queue_name(t.name, z.name) for t in policy.teams for z in team_zones(policy, t.name)}
    return [
        RenderedFile("namespaces.yaml", team_namespaces),
        RenderedFile("kueue-flavors.yaml", manager_flavors(fleet)),
        RenderedFile("kueue-cohort.yaml", [kueue.cohort(fleet)]),
        RenderedFile(
            "multikueue.yaml", multikueue_clusters(policy) + multikueue_configs(policy) + admission_checks(policy)
        ),
        RenderedFile("kueue-clusterqueues.yaml", zone_cluster_queues(policy)),
        RenderedFile("kueue-localqueues.yaml", zone_local_queues(policy, own)),
        RenderedFile("kueue-priorityclasses.yaml", kueue.priority_classes(fleet)),
        RenderedFile(
            "admission-policy.yaml",
            without_team_queue_rule(validating_admission_policy(fleet)) + residency_policy(policy),
        ),
        RenderedFile(
            "kueue-configuration.yaml",
            [manager_configuration(fleet)],
            resource=False,
            header=MANAGER_CONFIG_HEADER,
            api=False,
        ),
    ]


def worker_bundle(fleet: Fleet, cluster: str, *, image: str | None = None) -> Bundle:
    """One worker's bundle: gpufleet's one-cluster render of its pools, with the zone LocalQueues and
    the residency backstop, and without the admission webhook (whose rules want team-named queues).
    Its recorder writes the worker's own ledger with ``--cluster``: the pods and nodes are the worker's,
    the manager's Workload only names the worker (docs/multikueue.md, "Evidence across clusters")."""
    from gpufleet.render import image_of, recorder_objects, render

    policy = fleet.policy
    own = resolve(project(policy, {cluster}))
    base = render(own, image=image)
    targets = {
        (t.name, z.name): t.name for t in policy.teams for z in team_zones(policy, t.name) if cluster in z.clusters
    }
    files = []
    for f in base.files:
        if f.name == "admission-webhook.yaml":
            continue  # its Python rules name queues after teams only; the policies below hold in a federation
        if f.name == "admission-policy.yaml":
            files.append(RenderedFile(f.name, without_team_queue_rule(f.objects) + residency_policy(policy, cluster)))
        elif f.name == "recorder.yaml":  # the worker's own ledger, each record naming the worker
            files.append(RenderedFile(f.name, recorder_objects(own, image_of(own, image), cluster)))
        else:
            files.append(f)
        if f.name == "kueue-localqueues.yaml":
            files.append(RenderedFile("kueue-zone-localqueues.yaml", zone_local_queues(policy, targets)))
    return Bundle(files)


def render_federation(fleet: Fleet, *, image: str | None = None) -> Bundle:
    """The manager's bundle under ``manager/`` and each worker's under ``workers/<cluster>/``, each folder
    with its own kustomization (``kubectl apply -k DIR/manager`` against the manager, and so on)."""
    files = [
        RenderedFile(f"{MANAGER}/{f.name}", f.objects, f.resource, f.header, f.api, f.plain)
        for f in manager_files(fleet)
    ]
    for c in fleet.policy.clusters:
        for f in worker_bundle(fleet, c.name, image=image).files:
            files.append(RenderedFile(f"{WORKERS}/{c.name}/{f.name}", f.objects, f.resource, f.header, f.api, f.plain))
    bundle = Bundle([f for f in files if f.objects])
    problems = kueue_limits(bundle.api_objects())
    if problems:  # the policy checks make this unreachable; a renderer bug must not reach a cluster
        raise AssertionError("; ".join(problems))
    return bundle


def kueue_limits(objects: list[Obj]) -> list[str]:
    """Kueue's MultiKueue limits over rendered objects, each as a message (empty: within them).

    From Kueue v0.19.2: a ClusterQueue may use one MultiKueue AdmissionCheck, never per flavor
    (``pkg/cache/scheduler/clusterqueue.go``: MultipleMultiKueueAdmissionChecks,
    MultiKueueAdmissionCheckAppliedPerFlavor); a MultiKueueConfig lists 1 to 20 distinct clusters
    (``multikueue_types.go``); every cluster and config named must exist.
    """
    by_kind: dict[str, dict[str, Obj]] = {}
    for o in objects:
        by_kind.setdefault(str(o.get("kind")), {})[o["metadata"]["name"]] = o
    checks = by_kind.get("AdmissionCheck", {})
    multikueue = {n for n, ac in checks.items() if ac["spec"].get("controllerName") == CONTROLLER}
    problems: list[str] = []
    for name, cq in by_kind.get("ClusterQueue", {}).items():
        rules = cq["spec"].get("admissionChecksStrategy", {}).get("admissionChecks", [])
        ours = [r["name"] for r in rules if r["name"] in multikueue]
        if len(ours) > 1:
            problems.append(f"ClusterQueue {name}: more than one MultiKueue AdmissionCheck ({', '.join(ours)})")
        if any(r.get("onFlavors") for r in rules if r["name"] in multikueue):
            problems.append(f"ClusterQueue {name}: a MultiKueue AdmissionCheck may not be limited to flavors")
        missing = [r["name"] for r in rules if r["name"] not in checks]
        if missing:
            problems.append(f"ClusterQueue {name}: no AdmissionCheck {', '.join(missing)}")
    configs = by_kind.get("MultiKueueConfig", {})
    workers = by_kind.get("MultiKueueCluster", {})
    for name in multikueue:
        target = checks[name]["spec"].get("parameters", {}).get("name")
        if target not in configs:
            problems.append(f"AdmissionCheck {name}: no MultiKueueConfig {target}")
    for name, config in configs.items():
        listed = config["spec"].get("clusters", [])
        if not 1 <= len(listed) <= MAX_CLUSTERS_PER_CONFIG:
            problems.append(
                f"MultiKueueConfig {name}: {len(listed)} clusters; Kueue takes 1 to {MAX_CLUSTERS_PER_CONFIG}"
            )
        if len(set(listed)) != len(listed):
            problems.append(f"MultiKueueConfig {name}: a cluster is listed twice")
        unknown = [c for c in listed if c not in workers]
        if unknown:
            problems.append(f"MultiKueueConfig {name}: no MultiKueueCluster {', '.join(unknown)}")
    return problems
