"""Where the twin's view and Kueue's status disagree, said plainly.

A default Kueue v0.19 install writes the legacy ``QuotaReserved`` reasons (``Pending``,
``Inadmissible``) while its ``UnadmittedWorkloadsObservability`` gate is off; the twin reports the
granular ones (``WaitingForQuota``, ...). The two agree when Kueue's reason is the twin's or its
legacy form (``twin.reasons.written_reason``). Messages are
compared word for word, and each ClusterQueue's reserved quota against its
``status.flavorsReservation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.explain.live import Obj, of_kind
from gpufleet.explain.release import Outcome
from gpufleet.twin.apis.reasons import written_reason
from gpufleet.twin.resources import QuantityError, format_quantity, parse_quantity
from gpufleet.twin.results import ClusterQueueStatus, Pending

PREEMPTION_PENDING = "Pending the preemption"


@dataclass(frozen=True)
class Disagreement:
    reason: str
    message: str


def reasons_agree(kueue: str, twin: str) -> bool:
    """Kueue's reason is the twin's granular one, or its legacy form (the gate's either way)."""
    return kueue in (twin, written_reason(twin, observability=False))


def reserved(cq: Obj) -> dict[str, int]:
    """A ClusterQueue's ``status.flavorsReservation`` as ``flavor/resource`` → integer (zeros left out)."""
    out: dict[str, int] = {}
    for flavor in (cq.get("status") or {}).get("flavorsReservation") or []:
        for res in flavor.get("resources") or []:
            try:
                amount = parse_quantity(res.get("total", 0), str(res.get("name")))
            except QuantityError:
                continue
            if amount:
                out[f"{flavor.get('name')}/{res.get('name')}"] = amount
    return out


def _amounts(table: dict[str, int]) -> str:
    return ", ".join(f"{k}={format_quantity(v, k.split('/', 1)[-1])}" for k, v in sorted(table.items())) or "nothing"


def compare(
    objects: Sequence[Obj],
    key: str,
    *,
    kueue: tuple[str, str],
    now: Outcome,
    last: Pending | None,
    before: dict[str, ClusterQueueStatus],
    cluster_queues: Sequence[str],
) -> list[Disagreement]:
    kueue_reason, kueue_message = kueue
    out: list[Disagreement] = []
    if not kueue_reason:
        out.append(Disagreement("NotYetJudged", "Kueue has not judged it yet: it has no QuotaReserved condition"))
    waiting_for_victims = kueue_message.startswith(PREEMPTION_PENDING)
    if now.admitted_in is not None and not (waiting_for_victims and now.preempts):
        how = f", preempting {', '.join(now.preempts)}" if now.preempts else ""
        out.append(
            Disagreement(
                "TwinWouldAdmit",
                f"Kueue keeps {key} pending ({kueue_reason or 'no reason yet'}), but the twin admits it on the same "
                f"objects in cycle {now.admitted_in}{how}: either Kueue has not run a cycle since the last change, or "
                "the cluster uses something the twin does not model (docs/twin.md, Not covered)",
            )
        )
    if last is not None and kueue_reason and not reasons_agree(kueue_reason, last.reason):
        out.append(Disagreement("ReasonDiffers", f"Kueue's reason is {kueue_reason}, the twin's {last.reason}"))
    if last is not None and kueue_message and last.message != kueue_message:
        out.append(Disagreement("MessageDiffers", f"Kueue says {kueue_message!r}; the twin says {last.message!r}"))
    live = {str(cq["metadata"].get("name")): cq for cq in of_kind(objects, "ClusterQueue")}
    for name in cluster_queues:
        if name not in live or name not in before or "flavorsReservation" not in (live[name].get("status") or {}):
            continue  # Kueue has not reported this ClusterQueue's usage yet: nothing to compare
        theirs = reserved(live[name])
        ours = {k: v for k, v in before[name].usage.items() if v}
        if theirs != ours:
            out.append(
                Disagreement(
                    "UsageDiffers",
                    f"ClusterQueue {name}: Kueue's status reserves {_amounts(theirs)}; the admitted Workloads "
                    f"add up to {_amounts(ours)} (Kueue may not have caught up with a recent change)",
                )
            )
    return out
