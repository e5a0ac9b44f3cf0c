"""``render --check``: validate a bundle offline, and say plainly what could not be checked.

Built-in kinds and the Kueue CRDs are validated (``gpufleet.validation``). Objects of third-party
APIs whose CRDs were not given (cert-manager's Issuer and Certificate for the webhook's serving
certificate) are listed as not checked instead of passing silently or failing for want of a schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.render.bundle import Bundle, describe
from gpufleet.render.common import Obj
from gpufleet.validation import CrdIndex, Finding, validate


@dataclass(frozen=True)
class CheckReport:
    checked: int
    findings: list[Finding]
    unchecked: list[str]  # objects no schema was at hand for


def _builtin_group(group: str) -> bool:
    return group == "" or "." not in group or group.endswith(".k8s.io")


def check_bundle(bundle: Bundle, *, kubernetes: str, crds: CrdIndex) -> CheckReport:
    checkable: list[Obj] = []
    unchecked: list[str] = []
    for o in bundle.api_objects():
        group = str(o.get("apiVersion", "")).rpartition("/")[0]
        if crds.resolve(str(o.get("apiVersion", "")), str(o.get("kind", ""))).defined or _builtin_group(group):
            checkable.append(o)
        else:
            unchecked.append(f"{describe(o)} ({group}: no CRD given)")
    return CheckReport(len(checkable), validate(checkable, kubernetes=kubernetes, crds=crds), unchecked)
