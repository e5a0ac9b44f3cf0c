"""``gpufleet tune-job``: the rendered Job of tune workers, and the workers on one real PostgreSQL study."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.outputs import MARKER
from gpufleet.render.tune_job import CONFIGMAP_LIMIT, STORAGE_ENV, TuneJob, tune_job
from gpufleet.trace import write_trace
from gpufleet.tune.study import FINISHED
from tests.tune.cases import HOUR, LIMITED, a_alone, job

runner = CliRunner()
IMAGE = "registry.example.com/gpufleet:0.1.0"


def spec(**changes: Any) -> TuneJob:
    base: dict[str, Any] = {
        "name": "tune",
        "namespace": "research",
        "image": IMAGE,
        "workers": 3,
        "trials": 12,
        "study": "week-49",
        "secret": "pg",
        "trace_name": "trace.csv",
    }
    return TuneJob(**{**base, **changes})


def _job(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (job,) = [o for o in objects if o["kind"] == "Job"]
    return job


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _job(objects)["spec"]["template"]["spec"]["containers"]
    return container


def _arg(container: dict[str, Any], flag: str) -> str:
    args: list[str] = container["args"]
    return args[args.index(flag) + 1]


@pytest.mark.parametrize(
    ("changes", "completions", "trials", "trace_path", "claim"),
    [
        pytest.param({}, 3, "12", "/inputs/trace.csv", None, id="three-workers-trace-in-configmap"),
        pytest.param({"workers": 1, "trials": 5}, 1, "5", "/inputs/trace.csv", None, id="one-worker"),
        pytest.param(
            {"workers": 40, "trials": 400, "trace_claim": "traces", "trace_name": "trace.parquet"},
            40,
            "400",
            "/trace/trace.parquet",
            "traces",
            id="forty-workers-trace-on-a-claim",
        ),
    ],
)
def test_the_job_runs_indexed_workers_on_one_study(
    changes: dict[str, Any], completions: int, trials: str, trace_path: str, claim: str | None
) -> None:
    objects = tune_job(spec(**changes), LIMITED, None if claim else b"id,team\n")
    job = _job(objects)
    s = job["spec"]
    assert (s["completionMode"], s["completions"], s["parallelism"]) == ("Indexed", completions, completions)
    assert s["backoffLimitPerIndex"] == 2 and s["template"]["spec"]["restartPolicy"] == "Never"
    c = _container(objects)
    assert c["image"] == IMAGE and c["args"][:2] == ["tune", "/inputs/policy.yaml"]
    assert (_arg(c, "--trace"), _arg(c, "--trials"), _arg(c, "--study")) == (trace_path, trials, "week-49")
    assert _arg(c, "--worker") == "$(GPUFLEET_WORKER)" and _arg(c, "--jobs") == "1"
    env = {e["name"]: e for e in c["env"]}
    assert env["GPUFLEET_WORKER"]["valueFrom"]["fieldRef"]["fieldPath"].endswith(
        "['batch.kubernetes.io/job-completion-index']"
    )
    assert env[STORAGE_ENV]["valueFrom"]["secretKeyRef"] == {"name": "pg", "key": "url"}
    mounted = {m["mountPath"] for m in c["volumeMounts"]}
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in s["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == ([claim] if claim else []) and ("/trace" in mounted) == (claim is not None)
    configmap = next(o for o in objects if o["kind"] == "ConfigMap")
    assert configmap["data"]["policy.yaml"] == LIMITED
    assert ("trace.csv" in configmap["data"]) == (claim is None)


def test_no_credentials_and_no_root_in_the_manifest() -> None:
    url = "postgresql://tuner:s3cret@db.internal/optuna"
    text = yaml.safe_dump_all(tune_job(spec(), LIMITED, b"id\n"))
    assert "s3cret" not in text and "postgresql://" not in text
    c = _container(tune_job(spec(), LIMITED, b"id\n"))
    assert c["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]  # optuna's and Python's scratch
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}
    assert url not in text


def test_a_binary_trace_travels_as_binary_data() -> None:
    parquet = b"PAR1\xff\x00\x15"
    configmap = tune_job(spec(trace_name="trace.parquet"), LIMITED, parquet)[0]
    assert base64.b64decode(configmap["binaryData"]["trace.parquet"]) == parquet
    assert "trace.parquet" not in configmap["data"]


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    policy, trace = tmp_path / "policy.yaml", tmp_path / "trace.csv"
    policy.write_text(LIMITED)
    write_trace(a_alone(), trace)
    return policy, trace


def test_cli_writes_the_manifest_into_a_marked_folder(tmp_path: Path) -> None:
    policy, trace = _inputs(tmp_path)
    out = tmp_path / "job"
    args = ["tune-job", str(policy), "--trace", str(trace), "--workers", "4", "--image", IMAGE, "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "tune-job.yaml"])
    objects = list(yaml.safe_load_all((out / "tune-job.yaml").read_text()))
    assert _job(objects)["spec"]["completions"] == 4
    assert objects[0]["data"]["trace.csv"] == trace.read_text()
    assert runner.invoke(app, args).exit_code == 0  # its own folder is replaced


@pytest.mark.parametrize(
    ("extra", "where"),
    [
        pytest.param(["--image", "Registry/GPUfleet"], "--image", id="bad-image"),
        pytest.param(["--workers", "0"], "--workers", id="no-workers"),
        pytest.param(["--name", "Tune_Job"], "--name", id="bad-name"),
        pytest.param(["--name", "a" * 53], "--name", id="name-too-long"),
        pytest.param(["--memory", "two gigs"], "--memory", id="bad-memory"),
        pytest.param(["--trace-claim", "My Claim"], "--trace-claim", id="bad-claim"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path, extra: list[str], where: str) -> None:
    policy, trace = _inputs(tmp_path)
    out = tmp_path / "job"
    args = ["tune-job", str(policy), "--trace", str(trace), "--workers", "2", "-o", str(out), *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert where in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_a_trace_over_the_configmap_limit_asks_for_a_claim(tmp_path: Path) -> None:
    policy, trace = _inputs(tmp_path)
    write_trace([job(f"a-{i}", "a", i, HOUR) for i in range(CONFIGMAP_LIMIT // 40)], trace)  # rows over 40 bytes
    assert trace.stat().st_size > CONFIGMAP_LIMIT
    out = tmp_path / "job"
    args = ["tune-job", str(policy), "--trace", str(trace), "--workers", "2", "--image", IMAGE, "-o", str(out)]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2 and "--trace-claim" in refused.output and not out.exists()
    claimed = runner.invoke(app, [*args, "--trace-claim", "traces"])
    assert claimed.exit_code == 0, claimed.output
    assert "trace.csv" not in next(yaml.safe_load_all((out / "tune-job.yaml").read_text()))["data"]


def test_a_foreign_folder_is_never_overwritten(tmp_path: Path) -> None:
    policy, trace = _inputs(tmp_path)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    args = ["tune-job", str(policy), "--trace", str(trace), "--workers", "2", "--image", IMAGE, "-o", str(foreign)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and (foreign / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_a_worker_needs_a_database(tmp_path: Path) -> None:
    policy, trace = _inputs(tmp_path)
    result = runner.invoke(app, ["tune", str(policy), "--trace", str(trace), "--worker", "0"], env={STORAGE_ENV: ""})
    assert result.exit_code == 2 and "--storage" in result.output, result.output


def test_three_worker_processes_share_one_postgresql_study(postgres_url: str, tmp_path: Path) -> None:
    """What the Job's pods do, as three local processes started together on a real PostgreSQL:
    the study is seeded once, its trials are split among the workers, none twice, up to the total."""
    from tests.ledger.ledger_pgserver import create_database

    url = create_database(postgres_url, "tune_job_workers")
    policy, trace = _inputs(tmp_path)
    total = 8
    command = [sys.executable, "-m", "gpufleet", "tune", str(policy), "--trace", str(trace), "--study", "cluster"]
    env = {**__import__("os").environ, STORAGE_ENV: url}
    procs = [
        subprocess.Popen(
            [*command, "--trials", str(total), "--worker", str(i)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(3)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    assert all("worker done" in o for o in outputs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.yaml", "trace.csv"]  # a worker writes nothing
    study = optuna.load_study(study_name="cluster", storage=url.replace("postgresql://", "postgresql+psycopg://", 1))
    trials = study.get_trials(deepcopy=False)
    done = [t for t in trials if t.state in FINISHED]
    # MaxTrialsCallback stops a worker after its trial: the others' trials in flight may finish past the total
    assert total <= len(done) <= total + 2, [(t.number, t.state) for t in trials]
    assert sorted(t.number for t in trials) == list(range(len(trials)))
    sources = Counter(t.user_attrs.get("source") for t in done)
    assert sources["input"] == 1, sources  # seeded once, though three processes opened the study together
    ran = [tuple(sorted(t.params.items())) for t in done if t.user_attrs.get("source") == "candidate"]
    assert len(ran) == len(set(ran)), ran  # each enqueued candidate ran once
    print(f"\n{len(done)} finished trials of {total}: {dict(sources)}")


def test_a_worker_refuses_a_study_made_for_another_trace(postgres_url: str, tmp_path: Path) -> None:
    """A pod given another trace than the study's (a stale ConfigMap) stops with exit 2, adding nothing."""
    from tests.ledger.ledger_pgserver import create_database

    url = create_database(postgres_url, "tune_job_other_trace")
    policy, trace = _inputs(tmp_path)
    other = tmp_path / "other.csv"
    write_trace(a_alone()[:4], other)
    base = ["tune", str(policy), "--study", "s", "--trials", "2", "--worker", "0"]
    first = runner.invoke(app, [*base, "--trace", str(trace)], env={STORAGE_ENV: url})
    assert first.exit_code == 0, first.output
    storage = url.replace("postgresql://", "postgresql+psycopg://", 1)
    before = len(optuna.load_study(study_name="s", storage=storage).trials)
    refused = runner.invoke(app, [*base, "--trace", str(other)], env={STORAGE_ENV: url})
    assert refused.exit_code == 2 and "another policy, trace" in refused.output, refused.output
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == before
