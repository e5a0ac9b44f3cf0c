"""Shared fixtures: Kueue v0.19.2's CRDs from the ``shared`` folder beside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.validation import CrdIndex, load_crds

KUEUE_CRDS = Path(__file__).resolve().parents[2] / ".." / "shared" / "schemas" / "kueue-v0.19.2"


@pytest.fixture(scope="session")
def kueue_crds() -> CrdIndex:
    if not KUEUE_CRDS.is_dir():
        pytest.skip(f"Kueue CRDs not found at {KUEUE_CRDS} (the read-only 'shared' folder beside the repository)")
    return load_crds(KUEUE_CRDS)
