"""The evidence on disk: ``evidence.json``, one PNG chart per window and a self-contained ``evidence.html``.

Everything is written into a temporary folder beside the target and renamed into place at the end,
so a failure leaves either the old folder or the new one, never half of each; a folder gpufleet did not
write is never replaced (``gpufleet.outputs``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jinja2

from gpufleet.evidence.build import Evidence, WindowEvidence
from gpufleet.evidence.coverage import Cell
from gpufleet.evidence.figures import FIGURES
from gpufleet.outputs import Target, check, location, replace_folder

SIMULATED = "simulated"
REPORT = "evidence.json"
_DASHES = ("-", "--", ":", "-.")
LABELS = {
    "capacity": "capacity GPU-h",
    "allocated": "allocated GPU-h",
    "busy": "busy GPU-h",
    "utilization": "utilization %",
    "idle_while_allocated": "idle while allocated GPU-h",
    "idle_while_work_waited": "idle while work waited GPU-h",
    "memory_headroom": "memory headroom %",
}


def as_dict(evidence: Evidence) -> dict[str, Any]:
    return {
        "kind": "gpufleet.evidence/v1",
        "source": evidence.source,
        "simulated": evidence.simulated,
        "pools_from": "policy" if evidence.declared else "series seen",
        "min_coverage": evidence.min_coverage,
        "windows": {w.window.name: _window(w, evidence.simulated) for w in (evidence.before, evidence.after)},
        "changes": [c.as_dict() | ({"simulated": True} if evidence.simulated else {}) for c in evidence.changes],
    }


def _window(w: WindowEvidence, simulated: bool) -> dict[str, Any]:
    return {
        "from": w.window.start.isoformat(),
        "to": w.window.end.isoformat(),
        "scrape_interval_s": w.window.step_s,
        "slots": w.window.slots,
        "notes": w.notes,
        "rows": [
            {
                "pool": r.pool,
                "team": r.team,
                "figures": {k: c.as_dict() | ({"simulated": True} if simulated else {}) for k, c in r.cells.items()},
            }
            for r in w.rows
        ],
    }


def cell_text(cell: Cell | None, simulated: bool) -> str:
    """How a cell reads in the terminal and the page: the value (with its range), or 'not measured'."""
    if cell is None:
        return ""
    if not cell.measured:
        return f"not measured ({cell.reason})"
    assert cell.value is not None
    text = f"{cell.value:.2f}"
    if cell.low is not None and cell.high is not None and cell.high - cell.low >= 0.005:
        text += f" [{cell.low:.2f}–{cell.high:.2f}]"
    return text + (f" ({SIMULATED})" if simulated else "")


def chart(w: WindowEvidence, path: Path, simulated: bool) -> None:
    import matplotlib  # loaded when a chart is drawn, not with every command

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100)
    for i, line in enumerate(w.lines):
        values = [float("nan") if v is None else v for v in line.utilization]
        # pools at the same level would hide each other: vary the dash as well as the colour
        ax.plot(line.hours, values, label=line.pool, linewidth=1.6, linestyle=_DASHES[i % len(_DASHES)])
    title = f"{w.window.name}: {w.window.label()}"
    ax.set_title(f"{title} ({SIMULATED})" if simulated else title, fontsize=10)
    ax.set_xlabel("hours since the window's start")
    ax.set_ylabel("utilization % of the pool's cards")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    if w.lines:
        ax.legend(fontsize=8, loc="upper right")
    else:
        ax.text(0.5, 0.5, "not measured: no series", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def _html(evidence: Evidence, charts: dict[str, bytes]) -> str:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpufleet.evidence", "."), autoescape=True, undefined=jinja2.StrictUndefined
    )
    template = env.get_template("evidence.html.j2")
    return template.render(
        ev=evidence,
        figures=FIGURES,
        labels=LABELS,
        cell_text=lambda c: cell_text(c, evidence.simulated),
        charts={name: base64.b64encode(data).decode("ascii") for name, data in charts.items()},
    )


def check_target(out: Path, *, force: bool = False) -> Target:
    """``out`` may be new, empty, or an earlier gpufleet output; never a file or someone else's folder."""
    return check(out, force=force)


def write(evidence: Evidence, out: Path, *, force: bool = False) -> list[Path]:
    """Write every output into a folder beside ``out`` and rename it into place (``gpufleet.outputs``)."""
    names = [REPORT]
    with replace_folder(out, "evidence", force=force) as tmp:
        (tmp / REPORT).write_text(json.dumps(as_dict(evidence), indent=2) + "\n", encoding="utf-8")
        charts: dict[str, bytes] = {}
        for w in (evidence.before, evidence.after):
            name = f"utilization-{w.window.name}.png"
            chart(w, tmp / name, evidence.simulated)
            charts[w.window.name] = (tmp / name).read_bytes()
            names.append(name)
        (tmp / "evidence.html").write_text(_html(evidence, charts), encoding="utf-8")
        names.append("evidence.html")
    final = location(out)
    return [final / n for n in names]
