"""What a live workload's owner declared of its runtime, read from the objects the API server returns.

The forecast's first runtime source (``runtimes.RuntimeHistory.draw``): an expected runtime, taken as
it is while the workload has not run past it (named ``declared`` in the answer), and deadlines, each
a bound on a draw from history (``history ≤ deadline``). Where each is found, as Kueue v0.19.2 leaves
it (``jobframework.NewWorkload``, the Job integration's ``PodSets``):

- the annotation ``gpufleet.io/expected-runtime`` (seconds, or a duration such as ``2h30m``, the
  grammar ``--at`` takes): on the Job, where a user writes it, read from the Job itself, since Kueue
  copies none of a Job's annotations to its Workload but the provisioning-request ones; else on the
  pod template, which Kueue copies whole into the Workload's pod set; else on the Workload itself
  (one written directly). The first found is the declaration: a malformed one is not skipped for a
  later one, since what the owner meant is then unknown;
- deadlines, the earliest of: the Job's ``spec.activeDeadlineSeconds`` (the Job controller fails it
  there, counted from its start, which Kueue's admission sets off), the Workload's
  ``spec.maximumExecutionTimeSeconds`` less its ``status.accumulatedPastExecutionTimeSeconds`` (Kueue
  deactivates it there, counted from its current admission: the time it was admitted before, in
  admissions ended by an eviction, is spent; Kueue sets the maximum from the Job's label
  ``kueue.x-k8s.io/max-exec-time-seconds``; ``reconcileMaxExecutionTime``), and the pod template's
  ``spec.activeDeadlineSeconds`` (the kubelet ends each pod there, counted from its start). A Job's
  own deadline counts from each start: the Job controller resets its start time when Kueue resumes it.

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


def declared_of(wl: Obj, job: Obj | None) -> tuple[Declared | None, str]:
    """The Workload's declaration (None: nothing declared), or a message naming the malformed field."""
    meta = wl.get("metadata") or {}
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    found: list[tuple[str, str]] = []
    if job is not None:
        jmeta = job.get("metadata") or {}
        found.append((f"Job {jmeta.get('namespace')}/{jmeta.get('name')}", _annotation(job) or ""))
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
        _seconds(((job or {}).get("spec") or {}).get("activeDeadlineSeconds")),
        _execution_left(wl),
        *(_seconds((t.get("spec") or {}).get("activeDeadlineSeconds")) for t in _templates(wl)),
    ]
    deadline = min((b for b in bounds if b is not None), default=None)
    if expected is None and deadline is None:
        return None, ""
    return Declared(expected, deadline), ""
