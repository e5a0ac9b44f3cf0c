"""The package as a user gets it: ``python -m build`` makes a wheel and an sdist that ``twine check``
accepts, and the wheel, installed into a fresh virtual environment, runs the CLI on the example it
bundles (``--version``, ``plan``, ``render``, ``demo``), from a folder outside this checkout so that
nothing is imported from ``src``.

Slow: the fresh environment installs every dependency from the package index (pip's cache makes a
second run about a minute). The image build (``make image``) installs this same wheel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from gpufleet import __version__
from tests.support import ROOT

pytestmark = pytest.mark.slow


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", out, ROOT)
    return out


def test_build_makes_a_wheel_and_an_sdist_that_twine_accepts(dist: Path) -> None:
    wheel, sdist = dist / f"gpufleet-{__version__}-py3-none-any.whl", dist / f"gpufleet-{__version__}.tar.gz"
    assert wheel.is_file() and sdist.is_file(), sorted(p.name for p in dist.iterdir())
    checked = _run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    names = set(zipfile.ZipFile(wheel).namelist())
    bundled = {"gpufleet/examples/fleet.yaml", "gpufleet/policy/init.yaml", "gpufleet/py.typed"}
    assert bundled <= names, bundled - names
    assert not any(n.startswith(("tests/", "bench/")) for n in names)


def test_the_wheel_in_a_fresh_venv_runs_the_cli_on_its_bundled_example(dist: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python, gpufleet = env_dir / "bin" / "python", env_dir / "bin" / "gpufleet"
    _run(python, "-m", "pip", "install", "-q", dist / f"gpufleet-{__version__}-py3-none-any.whl")
    work = tmp_path / "work"  # outside the checkout: only the installed package can be imported
    work.mkdir()
    located = _run(python, "-c", "import gpufleet, importlib.resources as r; print(gpufleet.__file__); "
                   "print(r.files('gpufleet.examples') / 'fleet.yaml')", cwd=work).stdout.split()  # fmt: skip
    assert located[0].startswith(str(env_dir)), located
    example = located[1]

    assert _run(gpufleet, "--version", cwd=work).stdout.strip() == __version__
    plan = json.loads(_run(gpufleet, "plan", example, "--json", cwd=work).stdout)
    assert plan["pools"], plan
    rendered = json.loads(_run(gpufleet, "render", example, "-o", "m", "--json", cwd=work).stdout)
    assert (work / "m" / "kustomization.yaml").is_file() and rendered["files"]
    demo = json.loads(_run(gpufleet, "demo", "-o", "d", "--days", "1", "--trials", "2", "--json", cwd=work).stdout)
    assert (work / "d" / "plan.json").is_file() and demo["manifests"]
