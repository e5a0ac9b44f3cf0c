"""What a live workload's owner declared of its runtime, read from the objects the API server returns.

The forecast's first runtime source (``runtimes.RuntimeHistory.draw``): an expected runtime, taken as
it is while the workload has not run past it (named ``declared`` in the answer), and deadlines, each
a bound on a draw from history (``history ≤ deadline``). Where each is found, as Kueue v0.19.2 leaves
it (``jobframework.NewWorkload``, the Job integration's ``PodSets``):

- the annotation ``gpufleet.io/expected-runtime`` (seconds, or a duration such as ``2h30m``, the
  grammar ``--at`` takes): on the Workload's owner (a Job, a JobSet, a RayJob...: ``explain.live.owner``),
  where a user writes it, read from the owner itself, since Kueue copies none of its annotations to
  the Workload but the provisioning-request ones; else on a pod template, which Kueue copies whole
  into the Workload's pod set; else on the Workload itself (one written directly). The first found is
  the declaration: a malformed one is not skipped for a later one, since what the owner meant is then
  unknown;
- deadlines, the earliest of: the owner's own (``OWNER_DEADLINES``: a Job's
  ``spec.activeDeadlineSeconds``, where the Job controller fails it, counted from its start, which
  Kueue's admission sets off; the same field of a RayJob or a TrainJob, a Kubeflow job's
  ``spec.runPolicy.activeDeadlineSeconds``, and a JobSet's replicated Jobs' own), the Workload's
  ``spec.maximumExecutionTimeSeconds`` less its ``status.accumulatedPastExecutionTimeSeconds`` (Kueue
  deactivates it there, counted from its current admission: the time it was admitted before, in
  admissions ended by an eviction, is spent; Kueue sets the maximum from the Job's label
  ``kueue.x-k8s.io/max-exec-time-seconds``; ``reconcileMaxExecutionTime``), and the pod template's
  ``spec.activeDeadlineSeconds`` (the kubelet ends each pod there, counted from its start). An
  owner's deadline counts from each start: the Job, KubeRay and Kubeflow controllers reset the start
  time when Kueue resumes it.

A value that does not parse is the owner's mistake, not the forecaster's: the workload's answer
names the field and what was expected (``MalformedDeclaredRuntime``), never a traceback.
"""

from __future__ import annotations

from typing import Any

from gpufleet.forecast.answer import duration_seconds
from gpufleet.forecast.runtimes import Declared

Obj = dict[str, Any]
EXPECTED_RUNTIME = "gpufleet.io/expected-runtime"
MALFORMED = "MalformedDeclaredRuntime"
EXPECTED_TEXT = "seconds or a duration such as 2h30m, greater than 0"
_KUBEFLOW = ("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")  # kubeflow.org's, v1 and v2beta1
_DEADLINE = ("spec", "activeDeadlineSeconds")
#: Where an owner Kueue v0.19.2 integrates declares a deadline on its whole run, by (API group, kind):
#: a path of field names, ``[]`` for every item of a list. Owners not named declare none (a RayCluster,
#: a LeaderWorkerSet, an AppWrapper: what they run has no end of its own).
OWNER_DEADLINES: dict[tuple[str, str], tuple[str, ...]] = {
    ("batch", "Job"): _DEADLINE,
    ("ray.io", "RayJob"): _DEADLINE,  # KubeRay's, from the RayJob's start
    ("trainer.kubeflow.org", "TrainJob"): _DEADLINE,  # Kubeflow Trainer v2.2's, reset on resume
    **{("kubeflow.org", kind): ("spec", "runPolicy", *_DEADLINE[1:]) for kind in _KUBEFLOW},
    # each replicated Job's own: without a failure policy the JobSet fails with the first Job that does;
    # with one it may recreate them, each with its deadline afresh, so none bounds the whole (``_deadlines``)
    ("jobset.x-k8s.io", "JobSet"): ("spec", "replicatedJobs", "[]", "template", *_DEADLINE),
}


def _annotation(obj: Obj) -> str | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(EXPECTED_RUNTIME)
    return None if value is None else str(value)


def _seconds(value: object) -> int | None:
    """A positive whole number of seconds as the API server returns it (an int), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _execution_left(wl: Obj) -> int | None:
    """What Kueue's maximum execution time leaves the Workload's current (or next) admission. Spent:
    Kueue deactivates it as soon as it is admitted, so it runs about a second."""
    maximum = _seconds((wl.get("spec") or {}).get("maximumExecutionTimeSeconds"))
    if maximum is None:
        return None
    spent = _seconds((wl.get("status") or {}).get("accumulatedPastExecutionTimeSeconds")) or 0
    return max(maximum - spent, 1)


def _templates(wl: Obj) -> list[Obj]:
    return [p.get("template") or {} for p in (wl.get("spec") or {}).get("podSets") or [] if isinstance(p, dict)]


def _at(obj: object, path: tuple[str, ...]) -> list[object]:
    """Every value at ``path`` in ``obj`` (``[]``: each item of a list); none where a step is missing."""
    if not path:
        return [obj]
    step, rest = path[0], path[1:]
    if step == "[]":
        return [v for item in obj for v in _at(item, rest)] if isinstance(obj, list) else []
    return _at(obj.get(step), rest) if isinstance(obj, dict) else []


def _deadlines(owner: Obj | None) -> list[int | None]:
    """The deadlines ``owner`` declares on its whole run (``OWNER_DEADLINES``)."""
    if owner is None:
        return []
    api_version, kind = str(owner.get("apiVersion") or ""), str(owner.get("kind") or "")
    group = api_version.rpartition("/")[0]
    path = OWNER_DEADLINES.get((group, kind))
    if path is None or (kind == "JobSet" and (owner.get("spec") or {}).get("failurePolicy") is not None):
        return []
    return [_seconds(v) for v in _at(owner, path)]


def declared_of(wl: Obj, owner: Obj | None) -> tuple[Declared | None, str]:
    """The Workload's declaration (None: nothing declared), or a message naming the malformed field.
    ``owner`` is the object Kueue made it for, as the API server returns it (None: not read)."""
    meta = wl.get("metadata") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    found: list[tuple[str, str]] = []
    if owner is not None:
        ometa = owner.get("metadata") or {}
        where = f"{owner.get('kind') or 'owner'} {ometa.get('namespace')}/{ometa.get('name')}"
        found.append((where, _annotation(owner) or ""))
    found += [(f"the pod template of Workload {name}", _annotation(t) or "") for t in _templates(wl)]
    found.append((f"Workload {name}", _annotation(wl) or ""))
    expected: int | None = None
    for where, text in found:
        if not text:
            continue
        expected = duration_seconds(text)
        if not expected:
            return None, f"annotation {EXPECTED_RUNTIME} on {where}: expected {EXPECTED_TEXT}, got {text!r}"
        break
    bounds = [
        *_deadlines(owner),
        _execution_left(wl),
        *(_seconds((t.get("spec") or {}).get("activeDeadlineSeconds")) for t in _templates(wl)),
    ]
    deadline = min((b for b in bounds if b is not None), default=None)
    if expected is None and deadline is None:
        return None, ""
    return Declared(expected, deadline), ""
