"""The prometheus-operator CRDs, taken from its Go module through the module proxy.

``go mod download -json MODULE@VERSION`` fetches the module (checked against the checksum
database) into the module cache and names its folder; the CRDs are the YAML files of
``example/prometheus-operator-crd/`` there. No file is downloaded by hand and nothing joins
testbed/go.mod (which would change the testbed's build hash). The version is pinned here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

MODULE = "github.com/prometheus-operator/prometheus-operator"
VERSION = "v0.85.0"
CRD_FOLDER = "example/prometheus-operator-crd"
NEEDED = ("monitoring.coreos.com_prometheusrules.yaml", "monitoring.coreos.com_podmonitors.yaml")
GO = Path("/usr/local/go/bin/go")


class ModuleUnavailable(RuntimeError):
    """Go is missing, or the module proxy did not answer."""


def crd_files() -> list[Path]:
    """The CRD files the monitoring folder needs, from the module cache (downloaded on first use)."""
    go = shutil.which("go") or (str(GO) if GO.exists() else None)
    if go is None:
        raise ModuleUnavailable("Go is not installed (it fetches the prometheus-operator module)")
    # outside any module, so the command never reads or writes a go.mod
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GO111MODULE": "on"}
        result = subprocess.run(
            [go, "mod", "download", "-json", f"{MODULE}@{VERSION}"],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    if result.returncode != 0:
        raise ModuleUnavailable(f"go mod download {MODULE}@{VERSION} failed: {result.stdout}{result.stderr}")
    folder = Path(json.loads(result.stdout)["Dir"]) / CRD_FOLDER
    files = [folder / name for name in NEEDED]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ModuleUnavailable(f"{MODULE}@{VERSION} has no {', '.join(missing)}")
    return files
