"""Where the testbed's binaries come from: ``testbed/build.sh`` builds or reuses them.

The versions are pinned in one place, the Go tools module ``testbed/go.mod`` (with its ``go.sum``);
the script caches the binaries under ``~/.cache/gpufleet-testbed/<hash of the pins>/`` and prints that
folder. ``GPUFLEET_TESTBED_BIN`` names an already built folder and skips the script.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gpufleet.testbed.processes import TestbedError

TOOLS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kueue", "kwok")
ENV_BIN = "GPUFLEET_TESTBED_BIN"
BUILD_TIMEOUT_S = 90 * 60


@dataclass(frozen=True)
class Binaries:
    root: Path

    def path(self, tool: str) -> Path:
        return self.root / "bin" / tool

    def kueue_crds(self) -> list[Path]:
        return sorted((self.root / "kueue" / "crds").glob("*.yaml"))

    def kueue_webhooks(self) -> Path:
        return self.root / "kueue" / "webhooks.yaml"

    def missing(self) -> list[str]:
        out = [t for t in TOOLS if not os.access(self.path(t), os.X_OK)]
        if not self.kueue_crds() or not self.kueue_webhooks().exists():
            out.append("kueue manifests")
        return out


def build_script(source: Path | None = None) -> Path:
    """``testbed/build.sh`` of the source checkout this package runs from."""
    root = source or Path(__file__).resolve().parents[3]
    return root / "testbed" / "build.sh"


def ensure(source: Path | None = None) -> Binaries:
    """Reuse ``GPUFLEET_TESTBED_BIN`` or the cache; build what is missing (a cold build takes a while)."""
    preset = os.environ.get(ENV_BIN)
    if preset:
        binaries = Binaries(Path(preset))
    else:
        script = build_script(source)
        if not script.exists():
            raise TestbedError(f"{script} not found: the testbed builds from a source checkout of gpufleet")
        result = subprocess.run(
            ["bash", str(script)], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
        )
        if result.returncode != 0:
            raise TestbedError(f"{script} failed:\n{result.stderr[-4000:]}")
        binaries = Binaries(Path(result.stdout.strip().splitlines()[-1]))
    missing = binaries.missing()
    if missing:
        raise TestbedError(f"testbed binaries missing in {binaries.root}: {', '.join(missing)}")
    return binaries
