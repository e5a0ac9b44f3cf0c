"""The bundled example fleet, its admission facts and its ValidatingAdmissionPolicy run offline."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
