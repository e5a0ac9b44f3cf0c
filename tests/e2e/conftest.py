"""One testbed per test session: a real control plane with Kueue and the e2e policy's fake nodes.

Every test here is marked ``e2e``. The suite runs with ``--dist loadfile``: a file's tests share one
xdist worker, so a module's testbed (the random differential's, the fair-sharing one) starts once and
the session's testbed at most once per worker. (``--dist loadgroup`` with the ``xdist_group`` mark
below does not group under pytest 9, whose nodes no longer read the ``_nodeid`` xdist rewrites.) The
binaries come from ``testbed/build.sh`` (cached; CI builds them in ``.ci/setup.d/testbed.sh``). Where
neither Go nor built binaries exist, the tests skip and say so. The run folder, with every
component's log, stays in pytest's temporary folder (the last three sessions are kept).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.policy import load_policy, resolve
from gpufleet.policy.fleet import Fleet
from gpufleet.testbed import Testbed, TestbedError, ensure
from gpufleet.testbed.binaries import ENV_BIN, Binaries
from tests.recorder import recorder_children

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
POLICY = HERE / "fleet.yaml"
GO = Path("/usr/local/go/bin/go")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.xdist_group("testbed"))


@pytest.fixture(autouse=True)
def _no_recorder_left() -> Iterator[None]:
    """However a test ends (passed, failed, interrupted), no ``gpufleet record`` child it started runs on."""
    yield
    recorder_children.stop_all()


def eventually(
    check: Callable[[], Any],
    what: str,
    timeout_s: float = 120.0,
    *,
    poll_s: float = 0.5,
    fail: Callable[[str], NoReturn] = pytest.fail,
) -> Any:
    """Poll until ``check`` returns something truthy; ``fail`` with ``what`` and the last value (a test
    failure; outside pytest, as for the benchmarks, whatever error ``fail`` raises)."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(poll_s)
    fail(f"timed out after {timeout_s:.0f}s waiting for {what}; last: {last!r}")


@dataclass
class Cluster:
    bed: Testbed
    fleet: Fleet
    kubeconfig: str
    policy: Path = POLICY

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.bed.kubectl(*args, stdin=stdin, check=check)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "--output=json").stdout)

    def apply(self, objects: list[dict[str, Any]], *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        text = yaml.safe_dump_all(objects)
        return self.kubectl(
            "apply", "--server-side", "--field-manager=gpufleet-e2e", "--filename=-", *extra, stdin=text, check=check
        )

    @staticmethod
    def render(policy: Path, out: Path) -> Path:
        """``gpufleet render`` as a user runs it, into ``out``."""
        result = CliRunner().invoke(app, ["render", str(policy), "--out", str(out)])
        assert result.exit_code == 0, result.output
        return out

    def prepare_namespaces(self, bundle: Path) -> None:
        """Create the bundle's namespaces (and the GPU Operator's, which the operator would own)."""
        self.kubectl("apply", "--server-side", f"--filename={bundle / 'namespaces.yaml'}")
        self.kubectl("create", "namespace", "gpu-operator", check=False)

    eventually = staticmethod(eventually)


def _buildable() -> bool:
    return bool(os.environ.get(ENV_BIN)) or shutil.which("go") is not None or GO.exists()


def built_testbed() -> Binaries:
    """The built testbed (skipped where it cannot be built, failed where the build fails)."""
    if not _buildable():
        pytest.skip("the testbed needs Go (to build it) or GPUFLEET_TESTBED_BIN; see docs/testbed.md")
    if shutil.which("go") is None and GO.exists():
        os.environ["PATH"] = f"{GO.parent}:{os.environ['PATH']}"
    try:
        return ensure(REPO)
    except TestbedError as exc:
        pytest.fail(f"cannot build the testbed: {exc}")


@contextlib.contextmanager
def own_testbed(
    folder: Path, what: str, kueue: dict[str, Any] | None = None, policy: Path = POLICY
) -> Iterator[Cluster]:
    """A testbed of ``policy``'s fleet (the e2e one by default) in ``folder`` (skipped where it cannot be
    built), its Kueue Configuration extended by ``kueue`` when given (``Testbed.reconfigure_kueue``);
    down at the end."""
    binaries = built_testbed()
    fleet = resolve(load_policy(policy))
    bed = Testbed(folder, binaries)
    try:
        state = bed.up(fleet)
        if kueue:
            bed.reconfigure_kueue(kueue)
    except TestbedError as exc:
        pytest.fail(f"{what} did not start: {exc}")
    try:
        yield Cluster(bed=bed, fleet=fleet, kubeconfig=state.kubeconfig, policy=policy)
    finally:
        bed.down()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with own_testbed(tmp_path_factory.mktemp("testbed"), "the testbed") as shared:
        yield shared


@pytest.fixture(scope="session")
def applied(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The e2e policy's bundle, checked by a server-side dry-run and then applied for real."""
    bundle = cluster.render(POLICY, tmp_path_factory.mktemp("bundle") / "manifests")
    cluster.prepare_namespaces(bundle)
    cluster.kubectl("apply", "--server-side", "--dry-run=server", f"--kustomize={bundle}")
    cluster.kubectl("apply", "--server-side", f"--kustomize={bundle}")
    for name in [team.name for team in cluster.fleet.policy.teams]:

        def reconciled(name: str = name) -> Any:
            return cluster.get("clusterqueue", name).get("status", {}).get("conditions")

        eventually(reconciled, f"ClusterQueue {name} to be reconciled by Kueue")
    return bundle
