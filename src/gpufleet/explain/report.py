"""The stable JSON of ``gpufleet why --json`` and ``gpufleet what-if --json`` (keys in docs/why.md).

New keys may be added; existing ones keep their meaning. Quantities are Kueue's integer units
(milli-CPU for ``cpu``, bytes for memory, counts otherwise), keyed ``flavor/resource``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpufleet.explain.diff import ObjectChange
from gpufleet.explain.whatif import Change, WhatIf
from gpufleet.explain.why import Why

VERSION = 1


def why_json(why: Why) -> dict[str, Any]:
    ends = why.ends
    view = why.preemption
    return {
        "version": VERSION,
        "workload": why.workload,
        "job": why.job,
        "ownerKind": why.owner_kind,
        "state": why.state,
        "clusterQueue": why.cluster_queue or None,
        "priority": why.priority,
        "requests": why.requests,
        "verdict": {"reason": why.reason, "message": why.message},
        "dispatch": None
        if why.dispatch is None
        else {
            "reason": why.dispatch.reason,
            "cluster": why.dispatch.cluster,
            "nominated": list(why.dispatch.nominated),
            "check": why.dispatch.check,
            "state": why.dispatch.state,
            "message": why.dispatch.message,
            "text": why.dispatch.text,
        },
        "kueue": {"reason": why.kueue_reason or None, "message": why.kueue_message or None},
        "twin": {
            "reason": why.twin_reason or None,
            "message": why.twin_message or None,
            "admittedInCycle": why.twin_admits_in,
            "preempts": list(why.twin_preempts),
        },
        "shortfall": [{"flavor": s.flavor, "resource": s.resource, "needed": s.needed} for s in why.shortfall],
        "holders": [
            {
                "workload": h.workload,
                "clusterQueue": h.cluster_queue,
                "team": h.team,
                "priority": h.priority,
                "uses": h.uses,
                "borrowing": h.borrowing,
            }
            for h in why.holders
        ],
        "clusterQueues": [
            {
                "name": q.name,
                "team": q.team,
                "nominal": q.nominal,
                "borrowingLimit": q.borrowing_limit,
                "usage": q.usage,
                "borrowed": q.borrowed,
            }
            for q in why.queues
        ],
        "ahead": list(why.ahead),
        "ends": None
        if ends is None
        else {
            "sufficientSets": [list(s) for s in ends.sets],
            "candidates": list(ends.candidates),
            "trials": ends.trials,
            "complete": ends.complete,
        },
        "preemption": None
        if view is None
        else {
            "policy": view.policy,
            "reason": view.reason,
            "message": view.message,
            "alternatives": [
                {"change": a.change, "admittedInCycle": a.outcome.admitted_in, "preempts": list(a.outcome.preempts)}
                for a in view.alternatives
            ],
        },
        "disagreements": [{"reason": d.reason, "message": d.message} for d in why.disagreements],
        "skipped": list(why.skipped),
    }


def _change(c: Change) -> dict[str, Any]:
    return {
        "workload": c.workload,
        "clusterQueue": c.cluster_queue,
        "reason": c.reason,
        "message": c.message,
        "alsoWithoutPolicy": c.before,
    }


def whatif_json(result: WhatIf, objects: Sequence[ObjectChange]) -> dict[str, Any]:
    return {
        "version": VERSION,
        "admitted": [_change(c) for c in result.admitted],
        "preempted": [_change(c) for c in result.preempted],
        "inadmissible": [_change(c) for c in result.inadmissible],
        "stillPending": result.still_pending,
        "objects": [
            {
                "kind": o.kind,
                "name": o.name,
                "namespace": o.namespace,
                "action": o.action,
                "error": o.error,
                "fields": [{"path": f.path, "before": f.before, "after": f.after} for f in o.fields],
            }
            for o in objects
        ],
        "fairSharing": "fairSharing" in result.configuration,
        "skipped": list(result.skipped),
    }
