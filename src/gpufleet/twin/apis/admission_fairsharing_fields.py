"""Kueue v0.19.2: ``pkg/config/validation.go``, ``apis/kueue/v1beta2/clusterqueue_types.go``,
``apis/kueue/v1beta2/localqueue_types.go``.

Reading AdmissionFairSharing's fields, refusing what Kueue's API and config validation refuse.

* the Configuration's ``admissionFairSharing`` (``pkg/config/validation.go``
  ``validateAdmissionFairSharing``): ``usageHalfLifeTime`` a Go duration of 0 or more,
  ``usageSamplingInterval`` one above 0 (5m when left out, ``SetDefaults_Configuration``),
  ``resourceWeights`` numbers of 0 or more;
* a ClusterQueue's ``spec.admissionScope.admissionMode``: ``UsageBasedAdmissionFairSharing`` or
  ``NoAdmissionFairSharing`` (the CRD enum);
* a LocalQueue's ``spec.fairSharing.weight`` (the fair-sharing weight's rules) and
  ``status.fairSharing.admissionFairSharingStatus`` as ``kubectl get -o yaml`` prints it:
  ``consumedResources`` non-negative quantities, ``lastUpdate`` an RFC 3339 time.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

from gpufleet.twin.apis import specs as s
from gpufleet.twin.apis.fields import MAX_QUANTITY, Doc, choice, shown, timestamp, type_name
from gpufleet.twin.resources import QuantityError, parse_decimal

_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
            "h": 3600 * 10**9}  # fmt: skip
MODES = (s.USAGE_BASED_ADMISSION_FAIR_SHARING, s.NO_ADMISSION_FAIR_SHARING)
STATUS = "status.fairSharing.admissionFairSharingStatus"


def parse_duration(text: str) -> int:
    """Go's ``time.ParseDuration`` in nanoseconds (``1h30m``, ``90s``, ``0``); ValueError if malformed."""
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0
    if not body:
        raise ValueError(text)
    total, at = Decimal(0), 0
    while at < len(body):
        match = _DURATION_PART.match(body, at)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(text)
        try:
            total += int(Decimal(match.group(1)) * _UNIT_NS[match.group(2)])
        except InvalidOperation:
            raise ValueError(text) from None
        at = match.end()
    if total > MAX_QUANTITY:
        raise ValueError(text)
    return -int(total) if text.startswith("-") else int(total)


def duration(doc: Doc, path: str, value: Any, default: int) -> int:
    """A ``metav1.Duration`` field: a Go duration string (a bare number is refused, as by Kueue)."""
    if value is None:
        return default
    if not isinstance(value, str):
        doc.fail(path, f"expected a duration such as 5m or 1h30m, got {type_name(value)}")
        return default
    try:
        return parse_duration(value.strip())
    except ValueError:
        doc.fail(path, f"malformed duration {shown(value)} (expected e.g. 5m, 1h30m, 90s)")
        return default


def read_admission_fair_sharing(doc: Doc, raw: Any) -> s.AdmissionFairSharingSpec | None:
    """The Configuration's ``admissionFairSharing`` section (None when absent)."""
    if raw is None:
        return None
    section = doc.mapping("admissionFairSharing", raw)
    default = s.AdmissionFairSharingSpec()
    half_life = duration(doc, "admissionFairSharing.usageHalfLifeTime", section.get("usageHalfLifeTime"), 0)
    if half_life < 0:
        doc.fail("admissionFairSharing.usageHalfLifeTime", f"must be 0 or more, got {section['usageHalfLifeTime']}")
        half_life = 0
    path = "admissionFairSharing.usageSamplingInterval"
    sampling = duration(doc, path, section.get("usageSamplingInterval"), default.usage_sampling_interval_ns)
    if sampling == 0:  # Go's zero value is defaulted (cmp.Or)
        sampling = default.usage_sampling_interval_ns
    if sampling < 0:
        doc.fail(path, f"must be greater than 0, got {section['usageSamplingInterval']}")
        sampling = default.usage_sampling_interval_ns
    weights = []
    for name, value in doc.mapping("admissionFairSharing.resourceWeights", section.get("resourceWeights")).items():
        wpath = f"admissionFairSharing.resourceWeights.{name}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            doc.fail(wpath, f"expected a number, got {type_name(value)}")
        elif not 0 <= value <= 1e300:  # negative (Kueue's validation), NaN or infinite
            doc.fail(wpath, f"expected a weight of 0 or more, got {shown(value)}")
        else:
            weights.append((str(name), float(value)))
    return s.AdmissionFairSharingSpec(half_life, sampling, tuple(sorted(weights)))


def admission_mode(doc: Doc, spec: dict[str, Any]) -> str | None:
    """A ClusterQueue's ``spec.admissionScope.admissionMode`` (None without ``admissionScope``)."""
    scope = spec.get("admissionScope")
    if scope is None:
        return None
    mode = doc.mapping("spec.admissionScope", scope).get("admissionMode")
    return choice(doc, "spec.admissionScope.admissionMode", mode, MODES, s.NO_ADMISSION_FAIR_SHARING)


def consumed_resources(doc: Doc, status: dict[str, Any]) -> tuple[tuple[tuple[str, int], ...], int | None]:
    """A LocalQueue's ``consumedResources`` (nano-units, rounded up as a Quantity is) and
    ``lastUpdate`` (epoch ms; None without a status)."""
    afs = doc.mapping(f"{STATUS}", doc.mapping("status.fairSharing", status.get("fairSharing")).get(
        "admissionFairSharingStatus"))  # fmt: skip
    if not afs:
        return (), None
    out = []
    for name, value in doc.mapping(f"{STATUS}.consumedResources", afs.get("consumedResources")).items():
        path = f"{STATUS}.consumedResources.{name}"
        try:
            amount = parse_decimal(value)
        except QuantityError as exc:
            doc.fail(path, str(exc))
            continue
        if not 0 <= amount <= MAX_QUANTITY:
            doc.fail(path, f"expected a quantity between 0 and {MAX_QUANTITY}, got {shown(value)}")
            continue
        out.append((str(name), int((amount * 10**9).to_integral_value(rounding=ROUND_CEILING))))
    last = afs.get("lastUpdate")
    return tuple(sorted(out)), None if last is None else timestamp(doc, f"{STATUS}.lastUpdate", last, 0)
