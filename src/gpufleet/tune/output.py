"""What ``gpufleet tune`` leaves in its output folder, and the policy file it recommends.

- ``recommended.yaml``: the tuned policy, a complete FleetPolicy (``plan``, ``render``, ``simulate``
  take it), written from the pydantic model, never by editing the input's text.
- ``tune.json``: the constraints, the window, the Pareto front, the recommendation, the diff and the
  three worlds' measures (all simulated).
- ``trials.csv``: every trial of the study with its choices, objectives, constraints and measures.
- ``study.journal``: the study itself when no ``--storage`` was given (resume by rerunning into the
  same folder).
- ``simulation/``: the three worlds' results, per-job table, charts and report (``simulate``'s files).
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from gpufleet.files import write_text
from gpufleet.policy import FleetPolicy, resolve
from gpufleet.simulate.measures import as_dict
from gpufleet.simulate.run import Assessment, Written, results_document, write_into
from gpufleet.tune.recommend import Candidate
from gpufleet.tune.tuning import Tuning

SCHEMA = "gpufleet.io/tune/v1"
POLICY = "recommended.yaml"
DOCUMENT = "tune.json"
TRIALS = "trials.csv"
SIMULATION = "simulation"


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Enum):
        return value.value
    return value


def policy_yaml(policy: FleetPolicy, header: str = "") -> str:
    """The policy as YAML: the fields its file set, the tuned ones, nothing else (defaults stay implicit)."""
    data = _plain(policy.model_dump(mode="python", exclude_unset=True))
    lines = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return lines + yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _candidate(c: Candidate) -> dict[str, Any]:
    return {
        "trial": c.number,
        "source": c.source,
        "goodputGpuHours": c.goodput_gpu_h,
        "worstTeamP95WaitHours": c.worst_p95_h,
        "feasible": c.feasible,
        "constraints": list(c.constraints),
        "stranded": c.stranded,
    }


def document(t: Tuning, trace: str) -> dict[str, Any]:
    base = t.space.base_params()
    return {
        "schema": SCHEMA,
        "simulated": True,  # every figure below comes from the simulator, none from a cluster
        "trace": trace,
        "study": {
            "name": t.spec.name,
            "storage": t.spec.storage,
            "trials": len(t.trials),
            "invalid": t.pruned - t.stopped,
            "stoppedEarly": t.stopped,
        },
        "window": {"start": t.window[0], "end": t.window[1]},
        "constraints": t.constraints.describe(),
        "objectives": {"goodputGpuHours": "maximize", "worstTeamP95WaitHours": "minimize"},
        "pareto": [_candidate(c) for c in t.front],
        "recommended": None
        if t.recommended is None
        else {**_candidate(t.recommended), "changes": {k: v for k, v in t.recommended.params.items() if base[k] != v}},
        "diff": [c.as_dict() for c in t.changes],
        "fleetQuestions": [q.as_dict() for q in t.questions],  # a federated policy's; [] for one cluster
        "infeasible": [i.as_dict() for i in t.infeasible],
        "heldOut": {
            "weeks": [b.week.name for b in t.heldout],
            "judged": [
                {
                    "trial": j.candidate.number,
                    "meetsConstraints": j.holds,
                    "beatsFirstApplyWeeks": j.beaten,
                    "failures": j.failures() if not j.holds else "",
                }
                for j in t.judged
            ],
            "table": t.heldout_table(),
        },
        "worlds": {
            w.name: {
                "measures": as_dict(w.measures),
                "findings": [
                    {"reason": f.reason.value, "message": f.message, "remedy": f.remedy, "settings": list(f.settings)}
                    for f in w.findings
                ],
            }
            for w in t.worlds
        },
    }


def trials_csv(t: Tuning) -> str:
    paths = [k.path for k in t.space.knobs]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "trial",
            "source",
            "feasible",
            "goodput_gpu_h",
            "worst_p95_h",
            "starved_replica_min",
            "preemptions_max",
            "jain",
            "stranded",
            *paths,
        ]
    )
    for c in t.trials:
        m = c.measures
        writer.writerow(
            [
                c.number,
                c.source,
                c.feasible,
                c.goodput_gpu_h,
                c.worst_p95_h,
                m.get("servingStarvedReplicaMinutes", ""),
                m.get("preemptionsPerJob", {}).get("max", ""),
                m.get("jain", ""),
                c.stranded,
                *(c.params.get(p, "") for p in paths),
            ]
        )
    return out.getvalue()


def write(t: Tuning, folder: Path, trace: str, jobs: int, *, simulation: bool = True) -> Written | None:
    """Everything but the journal (already there) into ``folder`` (a ``replace_folder`` staging folder);
    ``simulation`` adds the three worlds' report (the demo writes its own, beside)."""
    note = "Recommended by gpufleet tune (simulated figures; see tune.json)."
    write_text(folder / POLICY, policy_yaml(t.policy, note))
    write_text(folder / DOCUMENT, json.dumps(document(t, trace), indent=2) + "\n")
    write_text(folder / TRIALS, trials_csv(t))
    if not simulation:
        return None
    results = [w.result for w in t.worlds]
    judged = [Assessment(w.result, w.measures, list(w.findings)) for w in t.worlds]  # each under its own policy
    summary = results_document(resolve(t.policy), trace, jobs, results, judged)
    return write_into(folder / SIMULATION, summary, results)
