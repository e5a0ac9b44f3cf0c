"""``gpufleet tune-job``: write the Kubernetes Job whose pods run tune workers on one PostgreSQL study."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
import yaml

from gpufleet import __version__, outputs
from gpufleet.cli.common import ForceOpt, console, guarded, output_option, print_kept
from gpufleet.errors import InputError
from gpufleet.policy import load_policy
from gpufleet.policy.images import PUBLISHED, image_problem
from gpufleet.render.tune_job import CONFIGMAP_LIMIT, SECRET_KEY, TuneJob, inputs_size, tune_job
from gpufleet.trace import read_trace

MANIFEST = "tune-job.yaml"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?$")
NAME_MAX = 52  # a Job's pods are named NAME-INDEX-xxxxx and labelled with the Job's name: 63 with room for both


def _label(value: str, option: str, limit: int = 63) -> None:
    if len(value) > limit or not _DNS_LABEL.match(value):
        raise InputError.one(
            f"{value!r} is not a Kubernetes name: lower-case letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {limit} characters",
            path=option,
        )


def _quantity(value: str, option: str) -> None:
    if not _QUANTITY.match(value):
        raise InputError.one(f"{value!r} is not a Kubernetes quantity (e.g. 1, 500m, 2Gi)", path=option)


@guarded
def tune_job_command(
    policy: Annotated[Path, typer.Argument(help="The fleet policy to tune (YAML)", show_default=False)],
    *,
    trace: Annotated[Path, typer.Option("--trace", help="The job trace the workers tune on (.csv or .parquet)")],
    workers: Annotated[int, typer.Option("--workers", min=1, max=1000, help="Worker pods (the Job's completions)")],
    trials: Annotated[
        int, typer.Option("--trials", min=1, help="The study's total trials, the input policy included")
    ] = 30,
    study: Annotated[str, typer.Option("--study", help="The study's name in its storage")] = "gpufleet-tune",
    secret: Annotated[
        str, typer.Option("--secret", help=f"The Secret whose key '{SECRET_KEY}' holds the postgresql:// URL")
    ] = "gpufleet-tune-storage",
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="The gpufleet image the workers run (`make image`, pushed) [default: the policy's cluster.image]",
        ),
    ] = None,
    name: Annotated[str, typer.Option("--name", help="The Job's name")] = "gpufleet-tune",
    namespace: Annotated[str, typer.Option("--namespace", help="The namespace the Job runs in")] = "gpufleet-system",
    cpu: Annotated[str, typer.Option("--cpu", help="CPU each worker requests (a trial uses one core)")] = "1",
    memory: Annotated[str, typer.Option("--memory", help="Memory each worker requests and may use")] = "2Gi",
    trace_claim: Annotated[
        str | None,
        typer.Option(
            "--trace-claim",
            help="A PersistentVolumeClaim holding the trace under its file name, for a trace over the "
            "ConfigMap's 1 MiB [default: the trace travels in the ConfigMap]",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="The sampler's seed (worker INDEX samples with seed+1+INDEX)")] = 0,
    output_dir: Annotated[Path, output_option("Folder for tune-job.yaml")] = Path("tune-job"),
    force: ForceOpt = False,
) -> None:
    """Write the Kubernetes Job whose pods run tune workers on one PostgreSQL study.

    An Indexed Job of --workers pods in gpufleet's image, each running `gpufleet tune --worker INDEX`
    against the study in the database the Secret names, with the policy and the trace mounted from a
    ConfigMap (or the trace from --trace-claim). Then `gpufleet tune POLICY --trace FILE --storage URL
    --study NAME` recommends from the finished study (docs/tune.md, "Cluster workers")."""
    _label(name, "--name", NAME_MAX)
    _label(namespace, "--namespace")
    _label(secret, "--secret", 253)
    if trace_claim is not None:
        _label(trace_claim, "--trace-claim", 253)
    _quantity(cpu, "--cpu")
    _quantity(memory, "--memory")
    if not study.strip():
        raise InputError.one("the study needs a name", path="--study")
    loaded = load_policy(policy)
    chosen = image or loaded.cluster.image or f"{PUBLISHED}:{__version__}"
    problem = image_problem(chosen)
    if problem is not None:
        raise InputError.one(
            f"{chosen!r}: {problem}", path="--image" if image else "cluster.image", file="" if image else str(policy)
        )
    if not read_trace(trace):  # a trace the workers could not read is refused here, not in every pod
        raise InputError.one("the trace holds no jobs", file=str(trace))
    suffix = ".parquet" if trace.suffix.lower() == ".parquet" else ".csv"
    policy_text = policy.read_text(encoding="utf-8")
    trace_bytes = trace.read_bytes()
    size = inputs_size(policy_text.encode("utf-8"), None if trace_claim else trace_bytes)
    if size > CONFIGMAP_LIMIT:
        raise InputError.one(
            f"the policy and the trace are {size:,} bytes, over a ConfigMap's {CONFIGMAP_LIMIT:,}: put the "
            f"trace on a volume and name its claim with --trace-claim (the file trace{suffix} at its root)",
            file=str(trace),
        )
    job = TuneJob(
        name=name,
        namespace=namespace,
        image=chosen,
        workers=workers,
        trials=trials,
        study=study,
        secret=secret,
        trace_name=f"trace{suffix}",
        cpu=cpu,
        memory=memory,
        trace_claim=trace_claim,
        seed=seed,
    )
    objects = tune_job(job, policy_text, None if trace_claim else trace_bytes)
    target = outputs.check(output_dir, force=force)
    with outputs.replace_folder(output_dir, "tune-job", force=force) as staging:
        (staging / MANIFEST).write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    console.print(
        f"wrote {output_dir / MANIFEST}: ConfigMap {name}-inputs and Job {name} ({workers} workers, "
        f"{trials} trials in study {study!r}); create Secret {namespace}/{secret} (key {SECRET_KEY}: the "
        "postgresql:// URL) before applying it",
        highlight=False,
        soft_wrap=True,
    )
    print_kept(target)
