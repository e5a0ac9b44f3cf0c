"""Shared test helpers: where the bundled examples and the read-only ../shared data live."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from gpufleet.validation import CrdIndex, load_crds

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip: a user's clone has no shared data, CI always does."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared data sits beside the repository in CI, not in a clone")
    return path


@cache
def _crds(path: Path) -> CrdIndex:
    return load_crds(path)


def kueue_crds() -> CrdIndex:
    """Kueue v0.19.2's CRDs from ../shared, read once; called inside a test, so a clone skips it."""
    return _crds(shared_path("schemas", "kueue-v0.19.2"))
