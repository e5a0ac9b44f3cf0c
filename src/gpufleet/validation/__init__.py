"""Offline validation of rendered manifests (``gpufleet render --check``).

Built-in kinds are checked against the target Kubernetes version's strict schema, custom resources
against their CRD's ``openAPIV3Schema`` plus the ``x-kubernetes-*`` semantics and CEL rules. Pure: no
network, no cluster. See docs/validation.md.
"""

from gpufleet.validation.crds import CrdIndex, load_crds
from gpufleet.validation.finding import Finding
from gpufleet.validation.validator import validate

__all__ = ["CrdIndex", "Finding", "load_crds", "validate"]
