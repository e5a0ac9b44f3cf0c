"""docs/twin.md's gate table against Kueue's own list of feature gates.

When Kueue v0.19.2's source is on the machine (the testbed's Go module cache), every gate that
``pkg/features/kube_features.go`` turns on by default must appear in the table or in the list of
default-on gates that do not change admission; without the source the test is skipped and says
where it looked. Every row marked modelled must name a test that exists, and the twin's own list
of defaults (``twin/features.py``) must agree with Kueue's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gpufleet.twin.features import DEFAULTS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "twin.md").read_text(encoding="utf-8")
SECTION = DOC[DOC.index("## Feature gates") : DOC.index("## Conformance")]
KUEUE = "sigs.k8s.io/kueue@v0.19.2"


def _kueue_source() -> Path | None:
    roots = [os.environ.get("GOMODCACHE", ""), str(Path.home() / "go" / "pkg" / "mod"), "/root/go/pkg/mod"]
    for root in roots:
        path = Path(root) / KUEUE / "pkg" / "features" / "kube_features.go" if root else None
        if path is not None and path.is_file():
            return path
    return None


def default_gates(source: str) -> dict[str, bool]:
    """Each gate's default in the versioned table: the last ``Default:`` of its entry."""
    table = source[source.index("defaultVersionedFeatureGates") :]
    gates: dict[str, bool] = {}
    for match in re.finditer(r"^\t(\w+): \{\n(.*?)^\t\},", table, re.MULTILINE | re.DOTALL):
        defaults = re.findall(r"Default: (true|false)", match.group(2))
        if defaults:
            gates[match.group(1)] = defaults[-1] == "true"
    return gates


def rows() -> list[list[str]]:
    lines = [line for line in SECTION.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_parser_reads_kueues_table_shape() -> None:
    sample = (
        "var defaultVersionedFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{\n"
        '\tA: {\n\t\t{Version: version.MustParse("0.1"), Default: false, PreRelease: featuregate.Alpha},\n'
        '\t\t{Version: version.MustParse("0.2"), Default: true, PreRelease: featuregate.Beta},\n\t},\n'
        '\tB: {\n\t\t{Version: version.MustParse("0.1"), Default: false, PreRelease: featuregate.Alpha},\n\t},\n}\n'
    )
    assert default_gates(sample) == {"A": True, "B": False}


def test_every_default_on_gate_is_in_the_table() -> None:
    path = _kueue_source()
    if path is None:
        pytest.skip(f"Kueue's source ({KUEUE}) is not in the Go module cache; build the testbed to get it")
    gates = default_gates(path.read_text(encoding="utf-8"))
    assert len(gates) > 50, "kube_features.go no longer has the expected shape"
    named = set(re.findall(r"`(\w+)`", SECTION))
    missing = sorted(g for g, on in gates.items() if on and g not in named)
    assert not missing, f"default-on gates missing from docs/twin.md's gate table: {missing}"
    for gate, default in DEFAULTS.items():
        assert gates[gate] is default, f"twin/features.py says {gate} defaults to {default}"


MODELLED = [row for row in rows() if row[3].startswith("yes")]


def test_the_table_marks_the_gates_the_issue_names() -> None:
    gates = {re.findall(r"`(\w+)`", row[0])[0]: row[3] for row in rows()}
    for gate in (
        "SchedulingEquivalenceHashing", "FlavorFungibilityPreserveScanProgress", "QuotaCheckStrategy",
        "PrioritySortingWithinCohort", "FairSharingPrioritizeNonBorrowing", "FairSharingPreemptWithinNominal",
        "PartialAdmission", "ReclaimablePods", "HierarchicalCohorts", "AdmissionFairSharing",
    ):  # fmt: skip
        assert gate in gates, gate
        assert gates[gate].startswith(("yes", "no")), f"{gate}: say whether it is modelled"


@pytest.mark.parametrize("row", MODELLED, ids=[r[0].split("`")[1] for r in MODELLED])
def test_a_modelled_gate_names_a_test_that_exists(row: list[str]) -> None:
    scenarios = re.findall(r"`(tests/[\w/.]+?)(?:::(\w+))?`", row[4])
    assert scenarios, f"{row[0]} is marked modelled but names no scenario"
    for file, name in scenarios:
        path = ROOT / file
        if not path.exists() and file == "tests/twin/test_equivalence.py":
            pytest.skip("the scheduling-equivalence tests come with that work's branch")
        assert path.is_file(), f"{row[0]}: {file} does not exist"
        if name:
            assert re.search(rf"^def {name}\(", path.read_text(encoding="utf-8"), re.MULTILINE), f"{file}::{name}"
