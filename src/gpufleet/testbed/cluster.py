"""A real Kubernetes control plane on loopback, with Kueue and kwok fake GPU nodes from a policy.

``up`` runs numbered steps, each health-checked before the next: certificates, etcd, kube-apiserver (client
certificates, RBAC, ValidatingAdmissionPolicy and admission webhooks on), Kueue's CRDs, the
kube-controller-manager (Job, namespace, garbage-collector, service-account, Deployment and
ReplicaSet controllers), kube-scheduler, Kueue with its webhooks, and kwok with the policy's nodes,
which must all turn Ready. Every process logs into ``<run>/logs``; a failed start stops what it had
started and keeps the logs. ``down`` stops the recorded processes and deletes etcd's data.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

import gpufleet.testbed.dra as dra_driver
from gpufleet import files
from gpufleet.policy.fleet import Fleet
from gpufleet.render import dra
from gpufleet.render import kueue as render_kueue
from gpufleet.render import scheduler as render_scheduler
from gpufleet.testbed import etcd, kueue, kwok, nodes, pki, scheduler
from gpufleet.testbed.binaries import Binaries
from gpufleet.testbed.processes import (
    Started,
    TestbedError,
    alive,
    http_ok,
    insecure_context,
    start,
    stop,
    wait_until,
)
from gpufleet.testbed.state import Certificates, Ports, State, admin_kubeconfig

START_TIMEOUT_S = 120.0
SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"
NODE_IP = "10.240.0.1"
CONTROLLERS = (
    "job-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "deployment-controller",
    "replicaset-controller",
)
ADMISSION_PLUGINS = (
    "NamespaceLifecycle",
    "ServiceAccount",
    "Priority",
    "DefaultTolerationSeconds",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)
# TaintNodesByCondition taints every new node not-ready until the node-lifecycle controller sees its
# kubelet's heartbeats; kwok's nodes are Ready from the start and no lifecycle controller runs here.
DISABLED_ADMISSION_PLUGINS = ("TaintNodesByCondition",)
# Kueue reads its metrics-server certificate from this fixed path when it does not manage certificates.
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")


def _write_yaml(path: Path, docs: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return path


class Testbed:
    """One testbed in one run folder. Not thread-safe; one ``up`` per folder at a time."""

    __test__ = False

    def __init__(self, run_dir: Path, binaries: Binaries | None = None) -> None:
        """``binaries`` may be omitted to only inspect or stop a testbed started earlier."""
        self.run = run_dir.resolve()
        self._binaries = binaries
        self.pki = self.run / "pki"
        self.logs = self.run / "logs"
        self.config = self.run / "config"
        self.kubeconfig = self.run / "kubeconfig"
        self.state_file = self.run / "state.json"
        self._started: list[Started] = []

    @property
    def bin(self) -> Binaries:
        if self._binaries is None:
            raise TestbedError("this Testbed was opened without binaries; it can only stop or inspect")
        return self._binaries

    # -- helpers -------------------------------------------------------------------------------

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.bin.path("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and result.returncode != 0:
            raise TestbedError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def _start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Started:
        proc = start(name, argv, self.logs / f"{name}.log", env)
        self._started.append(proc)
        return proc

    # -- lifecycle -----------------------------------------------------------------------------

    def up(self, fleet: Fleet, *, kueue_config: dict[str, Any] | None = None, fake_nodes: bool = True) -> State:
        """Start everything for ``fleet``'s nodes; on failure stop what started and keep the logs.

        ``kueue_config`` replaces the Kueue Configuration rendered from ``fleet`` (a MultiKueue manager's);
        without ``fake_nodes`` neither kwok nor any node starts (a manager holds no GPUs)."""
        if self.state_file.exists():
            raise TestbedError(f"a testbed may already run from {self.run}; run down first")
        for folder in (self.logs, self.config, self.pki, self.run / "etcd"):
            shutil.rmtree(folder, ignore_errors=True)
        self.logs.mkdir(parents=True)
        try:
            return self._up(fleet, kueue_config, fake_nodes)
        except BaseException:
            for proc in reversed(self._started):
                stop(proc)
            raise

    def _up(self, fleet: Fleet, kueue_config: dict[str, Any] | None, fake_nodes: bool) -> State:
        ports = Ports.free()
        timings: dict[str, float] = {}
        began = time.monotonic()

        def done(step: str) -> None:
            nonlocal began
            timings[step] = round(time.monotonic() - began, 3)
            began = time.monotonic()

        certs = self._certificates(ports)
        done("certificates")
        self._etcd(ports)
        done("etcd")
        self._apiserver(ports, certs)
        done("kube-apiserver")
        self._kueue_crds()
        done("kueue-crds")
        self._controllers(fleet, ports, certs)
        done("controllers")
        self._kueue(fleet, ports, certs, kueue_config)
        done("kueue")
        if fake_nodes:
            self._kwok(fleet)
            done("kwok-nodes")
        state = State(
            kubeconfig=str(self.kubeconfig),
            server=certs.server,
            ports=ports,
            processes=list(self._started),
            timings=timings,
        )
        self.state_file.write_text(state.dump(), encoding="utf-8")
        return state

    def _certificates(self, ports: Ports) -> Certificates:
        """Step 1: the CA, serving and client certificates, the token key, and the kubeconfig."""
        ca = pki.Authority.create(self.pki)
        certs = Certificates(
            server=f"https://127.0.0.1:{ports.apiserver}",
            ca=ca.pair,
            apiserver=ca.serving(
                "apiserver", "kube-apiserver", extra_dns=pki.APISERVER_NAMES, extra_ips=(pki.APISERVER_SERVICE_IP,)
            ),
            admin=ca.issue("admin", "gpufleet-testbed-admin", organization="system:masters", client=True),
            webhook=ca.serving("webhook", "testbed-webhooks"),
            tokens=pki.signing_key(self.pki),
        )
        _write_yaml(self.kubeconfig, [admin_kubeconfig(certs.server, certs.ca.cert, certs.admin)])
        os.chmod(self.kubeconfig, 0o600)
        return certs

    def _etcd(self, ports: Ports) -> None:
        """Step 2: etcd, without fsync (the data is thrown away at ``down``)."""
        peer = f"http://127.0.0.1:{ports.etcd_peer}"
        client = f"http://127.0.0.1:{ports.etcd}"
        etcd = self._start("etcd", [
            str(self.bin.path("etcd")), "--name=testbed", f"--data-dir={self.run / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=testbed={peer}", "--unsafe-no-fsync", "--log-level=warn",
        ])  # fmt: skip
        wait_until(etcd, http_ok(f"{client}/health"), "healthy etcd", START_TIMEOUT_S)

    def _apiserver(self, ports: Ports, certs: Certificates) -> None:
        """Step 3: kube-apiserver with the admission plugins gpufleet relies on."""
        apiserver = self._start("kube-apiserver", [
            str(self.bin.path("kube-apiserver")), f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={certs.apiserver.cert}", f"--tls-private-key-file={certs.apiserver.key}",
            f"--client-ca-file={certs.ca.cert}", "--authorization-mode=RBAC",
            f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
            f"--disable-admission-plugins={','.join(DISABLED_ADMISSION_PLUGINS)}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={certs.tokens.cert}", f"--service-account-signing-key-file={certs.tokens.key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--enable-priority-and-fairness=false",
            "--profiling=false", "--v=1",
        ])  # fmt: skip
        context = ssl.create_default_context(cafile=str(certs.ca.cert))
        context.load_cert_chain(str(certs.admin.cert), str(certs.admin.key))
        wait_until(apiserver, http_ok(f"{certs.server}/readyz", context), "ready API server", START_TIMEOUT_S)

    def _kueue_crds(self) -> None:
        """Step 4: Kueue's CRDs from the built module, and its namespace."""
        self.kubectl("apply", "--server-side", "--force-conflicts", *(f"--filename={p}" for p in self.bin.kueue_crds()))
        self.kubectl("create", "namespace", kueue.NAMESPACE)
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

    def _controllers(self, fleet: Fleet, ports: Ports, certs: Certificates) -> None:
        """Step 5: kube-controller-manager (the controllers listed in CONTROLLERS) and kube-scheduler,
        stock or with the profile the policy renders (``testbed.scheduler``)."""
        kc = str(self.kubeconfig)
        delegated = [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
        ]
        kcm = self._start("kube-controller-manager", [
            str(self.bin.path("kube-controller-manager")), *delegated, f"--secure-port={ports.controller_manager}",
            f"--cert-dir={self.run / 'kcm-certs'}", f"--controllers={','.join(CONTROLLERS + dra_driver.controllers(fleet))}",
            f"--service-account-private-key-file={certs.tokens.key}", f"--root-ca-file={certs.ca.cert}",
            "--use-service-account-credentials=false", "--v=1",
        ])  # fmt: skip
        argv = scheduler.argv([
            str(self.bin.path("kube-scheduler")), *delegated, f"--secure-port={ports.scheduler}",
            f"--cert-dir={self.run / 'scheduler-certs'}", "--v=1",
        ], self._scheduler_config(render_scheduler.scheduler_configuration(fleet)))  # fmt: skip
        sched = self._start("kube-scheduler", argv)
        for proc, port in ((kcm, ports.controller_manager), (sched, ports.scheduler)):
            check = http_ok(f"https://127.0.0.1:{port}/healthz", insecure_context())
            wait_until(proc, check, "healthz", START_TIMEOUT_S)

    def _scheduler_config(self, rendered: list[Any]) -> Path | None:
        """Write kube-scheduler's ``--config`` file for a rendered profile; None (and no file) for stock."""
        path = self.config / "kube-scheduler.yaml"
        config = scheduler.configuration(rendered, self.kubeconfig)
        if config is None:
            path.unlink(missing_ok=True)
            return None
        self.config.mkdir(parents=True, exist_ok=True)
        files.write_text(path, yaml.safe_dump(config, sort_keys=False))
        return path

    def reconfigure_scheduler(self, rendered: list[Any], timeout_s: float = START_TIMEOUT_S) -> None:
        """Restart kube-scheduler with ``rendered`` (``render.scheduler``'s documents; empty: stock)."""
        state = self.state()
        if state is None:
            raise TestbedError(f"no testbed runs from {self.run}")
        old = next(p for p in state.processes if p.name == "kube-scheduler")
        self.restart("kube-scheduler", timeout_s, argv=scheduler.argv(old.argv, self._scheduler_config(rendered)))

    def _kueue(self, fleet: Fleet, ports: Ports, certs: Certificates, rendered: dict[str, Any] | None = None) -> None:
        """Step 6: Kueue as a local process, then its webhooks pointed at it."""
        kueue_certs = self.run / "kueue-certs"
        kueue_certs.mkdir(exist_ok=True)
        shutil.copyfile(certs.webhook.cert, kueue_certs / "tls.crt")
        shutil.copyfile(certs.webhook.key, kueue_certs / "tls.key")
        _metrics_certs(certs.webhook)
        if rendered is None:
            rendered = render_kueue.configuration(fleet, dra.device_class_mappings(fleet) if dra.enabled(fleet) else [])
        config = kueue.manager_config(
            webhook_port=ports.kueue_webhook, health_port=ports.kueue_health,
            cert_dir=str(kueue_certs), rendered=rendered,
        )  # fmt: skip
        config_file = _write_yaml(self.config / "kueue.yaml", [config])
        argv = [str(self.bin.path("kueue")), f"--config={config_file}", "--zap-log-level=info"]
        manager = self._start("kueue", argv, {"KUBECONFIG": str(self.kubeconfig)})
        wait_until(manager, http_ok(f"http://127.0.0.1:{ports.kueue_health}/readyz"), "ready Kueue", START_TIMEOUT_S)
        manifests = list(yaml.safe_load_all(self.bin.kueue_webhooks().read_text(encoding="utf-8")))
        hooks = kueue.local_webhooks(manifests, port=ports.kueue_webhook, ca_pem=certs.ca.cert.read_bytes())
        self.kubectl("apply", "--server-side", f"--filename={_write_yaml(self.config / 'kueue-webhooks.yaml', hooks)}")

    def _kwok(self, fleet: Fleet) -> None:
        """Step 7: kwok with the testbed's stages, then the policy's nodes, until all are Ready."""
        stages = _write_yaml(self.config / "kwok.yaml", kwok.stages())
        fake = self._start("kwok", [
            str(self.bin.path("kwok")), f"--kubeconfig={self.kubeconfig}", f"--config={stages}",
            f"--manage-nodes-with-annotation-selector={nodes.KWOK_ANNOTATION}={nodes.KWOK_VALUE}",
            f"--node-ip={NODE_IP}", f"--cidr={POD_CIDR}", "--node-lease-duration-seconds=0",
        ])  # fmt: skip
        fake_nodes = [dra_driver.without_device_plugin(n, fleet) for n in nodes.fake_nodes(fleet)]
        self.kubectl("create", f"--filename={_write_yaml(self.config / 'nodes.yaml', fake_nodes)}")
        wait_until(fake, self._nodes_ready, "Ready nodes", START_TIMEOUT_S)
        slices = dra_driver.resource_slices(fleet)
        if slices:  # DRA mode: what NVIDIA's DRA kubelet plugin would publish on each node
            _write_yaml(self.config / "resourceslices.yaml", slices)
            dra_driver.publish(slices, self.kubeconfig)

    def _nodes_ready(self) -> bool:
        result = self.kubectl("get", "nodes", "--selector=type=kwok", "--output=json", check=False)
        if result.returncode != 0:
            return False
        items = json.loads(result.stdout)["items"]
        return bool(items) and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
            for n in items
        )

    def state(self) -> State | None:
        return State.load(self.state_file.read_text(encoding="utf-8")) if self.state_file.exists() else None

    def running(self) -> list[str]:
        state = self.state()
        return [p.name for p in state.processes if alive(p)] if state else []

    def restart(self, name: str, timeout_s: float = START_TIMEOUT_S, argv: list[str] | None = None) -> None:
        """Stop one component and start it again with the same arguments (or ``argv``), as an operator's restart.

        Waits until the new process runs and the API server answers ``/readyz`` again; the state file
        records the new pid. Tests use it to show that nothing is lost across a restart.
        """
        state = self.state()
        if state is None:
            raise TestbedError(f"no testbed runs from {self.run}")
        old = next((p for p in state.processes if p.name == name), None)
        if old is None:
            raise TestbedError(f"no component named {name}; running: {', '.join(p.name for p in state.processes)}")
        stop(old)
        new = start(old.name, argv if argv is not None else old.argv, old.log, dict(old.env))
        processes = [new if p.name == name else p for p in state.processes]
        self._started = processes
        self.state_file.write_text(replace(state, processes=processes).dump(), encoding="utf-8")

        def api_ready() -> bool:
            return self.kubectl("get", "--raw=/readyz", check=False).returncode == 0

        own = self._health(name, state.ports)
        wait_until(new, lambda: own() and api_ready(), f"a healthy {name} after the restart", timeout_s)

    def reconfigure_kueue(self, fields: dict[str, Any], timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
        """Set top-level fields of Kueue's manager Configuration (``None`` removes one) and restart Kueue.

        Kueue reads fair sharing and its preemption strategies only at start, so a test that varies them
        restarts Kueue on the same testbed (seconds) instead of starting another testbed. Returns the
        Configuration now in force; the file is replaced whole, never left half-written.
        """
        path = self.config / "kueue.yaml"
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        for key, value in fields.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        files.write_text(path, yaml.safe_dump(config, sort_keys=False))
        self.restart("kueue", timeout_s)
        return dict(config)

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision (what kube-apiserver does every five minutes); returns it."""
        state = self.state()
        if state is None:
            raise TestbedError(f"no testbed runs from {self.run}")
        return etcd.compact(f"http://127.0.0.1:{state.ports.etcd}")

    def _health(self, name: str, ports: Ports) -> Callable[[], bool]:
        """The component's own health endpoint, where it has one (kwok shows health by Ready nodes)."""
        local = insecure_context()
        checks = {
            "etcd": http_ok(f"http://127.0.0.1:{ports.etcd}/health"),
            "kube-controller-manager": http_ok(f"https://127.0.0.1:{ports.controller_manager}/healthz", local),
            "kube-scheduler": http_ok(f"https://127.0.0.1:{ports.scheduler}/healthz", local),
            "kueue": http_ok(f"http://127.0.0.1:{ports.kueue_health}/readyz"),
            "kwok": self._nodes_ready,
        }
        return checks.get(name, lambda: True)

    def down(self) -> None:
        """Stop every recorded process, newest first, and drop etcd's data; logs stay."""
        state = self.state()
        for proc in reversed(state.processes if state else self._started):
            stop(proc)
        shutil.rmtree(self.run / "etcd", ignore_errors=True)
        self.state_file.unlink(missing_ok=True)
        self._started = []


def _metrics_certs(webhook: pki.KeyPair) -> None:
    """Give Kueue the metrics certificate it insists on reading (metrics serving itself is off)."""
    if (KUEUE_METRICS_CERTS / "tls.crt").exists() and (KUEUE_METRICS_CERTS / "tls.key").exists():
        return
    try:
        KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(webhook.cert, KUEUE_METRICS_CERTS / "tls.crt")
        shutil.copyfile(webhook.key, KUEUE_METRICS_CERTS / "tls.key")
    except OSError as exc:
        raise TestbedError(
            f"Kueue reads a certificate from {KUEUE_METRICS_CERTS} and it cannot be written ({exc}); "
            "create it once as root with any key pair (tls.crt, tls.key)"
        ) from exc
