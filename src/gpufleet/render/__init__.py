"""Render a resolved fleet into a kustomize-ready folder of manifests, one file per concern."""

from __future__ import annotations

from gpufleet.check.manifests import DEFAULT_IMAGE as DEFAULT_WEBHOOK_IMAGE
from gpufleet.check.manifests import NAMESPACE, validating_admission_policy, webhook_objects
from gpufleet.policy.fleet import Fleet
from gpufleet.recorder.manifests import recorder_objects as recorder_manifests
from gpufleet.render import dra, gpu_operator, kueue, nodes, scheduler, serving
from gpufleet.render.bundle import Bundle, RenderedFile, describe, write_bundle
from gpufleet.render.common import Obj, meta, obj
from gpufleet.render.forecast_exporter import forecast_objects
from gpufleet.render.monitoring import monitoring_files

CONFIG_HEADER = """Kueue manager Configuration fields gpufleet relies on. This is not an API object: merge it into
the controller_manager_config.yaml key of the kueue-manager-config ConfigMap (kueue-system), then
restart kueue-controller-manager."""


WEBHOOK_HEADER = """The admission webhook: it fills in a missing queue name and default priority class, and serves
clusters older than ValidatingAdmissionPolicy. Its serving certificate comes from cert-manager (the
Issuer and Certificate below; cert-manager.io/inject-ca-from fills each caBundle) or from gpufleet:
`gpufleet webhook certs --configuration admission-webhook.yaml -o certs` writes the Secret and a copy of
this file with caBundle filled in and no cert-manager objects. So it is not in kustomization.yaml: apply
it after cert-manager (`kubectl apply -f admission-webhook.yaml`) or apply the two files in certs/.
The ValidatingAdmissionPolicy in admission-policy.yaml enforces the same rules without it."""


def namespaces(fleet: Fleet) -> list[Obj]:
    team_label = fleet.policy.cluster.labels.team
    out = [
        obj("v1", "Namespace", meta(ns, labels={team_label: team.name}))
        for team in fleet.policy.teams
        for ns in team.namespaces
    ]
    if fleet.policy.serving is not None:
        out.append(
            obj(
                "v1",
                "Namespace",
                meta(fleet.policy.serving.namespace, labels={"gpufleet.io/role": "serving"}),
            )
        )
    return out


def kueue_objects(fleet: Fleet) -> list[Obj]:
    """What Kueue reads of the bundle, in the bundle's order: the teams' Namespaces, ResourceFlavors,
    Cohort, ClusterQueues, LocalQueues, WorkloadPriorityClasses and the Configuration (the twin's
    input; ``render`` writes the same objects into their files)."""
    mappings = dra.device_class_mappings(fleet) if dra.enabled(fleet) else []
    return [
        *namespaces(fleet),
        *kueue.resource_flavors(fleet),
        kueue.cohort(fleet),
        *(kueue.cluster_queue(fleet, t) for t in fleet.policy.teams),
        *kueue.local_queues(fleet),
        *kueue.priority_classes(fleet),
        kueue.configuration(fleet, mappings),
    ]


def image_of(fleet: Fleet, image: str | None = None) -> str:
    """The image the webhook and the recorder run: ``render --image``, else the policy's
    ``cluster.image``, else the project's published name (which must be built and pushed first)."""
    return image or fleet.policy.cluster.image or DEFAULT_WEBHOOK_IMAGE


def recorder_objects(fleet: Fleet, image: str = DEFAULT_WEBHOOK_IMAGE, cluster: str | None = None) -> list[Obj]:
    """The recorder that writes the ledger from the cluster's watch (same image as the webhook);
    ``cluster`` names a federation's worker on every record it writes."""
    postgres = fleet.policy.recorder.ledger == "postgresql"
    return recorder_manifests(NAMESPACE, image, "secret" if postgres else None, cluster)


def forecast_exporter_objects(fleet: Fleet, image: str = DEFAULT_WEBHOOK_IMAGE) -> list[Obj]:
    """The forecast exporter (``gpufleet.render.forecast_exporter``), with a PostgreSQL ledger only: it runs
    the policy itself, carried in a ConfigMap as YAML."""
    if fleet.policy.recorder.ledger != "postgresql":
        return []
    import yaml

    text = yaml.safe_dump(fleet.policy.model_dump(mode="json", by_alias=True, exclude_none=True), sort_keys=False)
    return forecast_objects(NAMESPACE, image, text)


def render(fleet: Fleet, *, image: str | None = None) -> Bundle:
    """Every object the policy implies, grouped into files; empty concerns produce no file. ``image``
    (see ``image_of``) is what the webhook and recorder Deployments run."""
    dra_on = dra.enabled(fleet)
    own_image = image_of(fleet, image)
    webhook = webhook_objects(fleet, own_image)
    # gpufleet's own namespace holds the recorder too, so it is applied with the other namespaces
    own_namespace = [o for o in webhook if o["kind"] == "Namespace"]
    webhook = [o for o in webhook if o["kind"] != "Namespace"]
    files = [
        RenderedFile("namespaces.yaml", namespaces(fleet) + own_namespace),
        RenderedFile("kueue-flavors.yaml", kueue.resource_flavors(fleet)),
        RenderedFile("kueue-cohort.yaml", [kueue.cohort(fleet)]),
        RenderedFile("kueue-clusterqueues.yaml", [kueue.cluster_queue(fleet, t) for t in fleet.policy.teams]),
        RenderedFile("kueue-localqueues.yaml", list(kueue.local_queues(fleet))),
        RenderedFile("kueue-priorityclasses.yaml", kueue.priority_classes(fleet)),
        RenderedFile(
            "gpu-operator.yaml",
            [c for c in (gpu_operator.mig_configmap(fleet), gpu_operator.timeslicing_configmap(fleet)) if c],
        ),
        RenderedFile("nodes.yaml", nodes.node_patches(fleet)),
        RenderedFile("serving.yaml", serving.serving_objects(fleet)),
        RenderedFile("admission-policy.yaml", validating_admission_policy(fleet)),
        RenderedFile("recorder.yaml", recorder_objects(fleet, own_image)),
        RenderedFile("forecast-exporter.yaml", forecast_exporter_objects(fleet, own_image)),
        RenderedFile("admission-webhook.yaml", webhook, resource=False, header=WEBHOOK_HEADER),
    ]
    if dra_on:
        files.append(RenderedFile("dra.yaml", dra.device_classes(fleet) + dra.claim_templates(fleet)))
    mappings = dra.device_class_mappings(fleet) if dra_on else []
    files.append(
        RenderedFile(
            "kueue-configuration.yaml",
            [kueue.configuration(fleet, mappings)],
            resource=False,
            header=CONFIG_HEADER,
            api=False,
        )
    )
    # kube-scheduler's --config file (MostAllocated only): no API object, so neither kustomize nor --check
    files.append(
        RenderedFile(
            "kube-scheduler-configuration.yaml",
            scheduler.scheduler_configuration(fleet),
            resource=False,
            header=scheduler.HEADER,
            api=False,
        )
    )
    files += monitoring_files(fleet)  # its own kustomization: kubectl apply -k DIR/monitoring
    return Bundle([f for f in files if f.objects])


__all__ = ["Bundle", "RenderedFile", "describe", "image_of", "kueue_objects", "render", "write_bundle"]
