"""Each command imports what it uses and nothing another command needs (the CLI starts at once).

Checked by what a fresh interpreter has in ``sys.modules`` after running the command through
``gpufleet.cli.main``, never by a time: ``bench/cli_start.py`` measures the times. And the root's
listing, drawn from ``gpufleet.cli.commands.COMMANDS`` without importing the commands, must be the
listing the commands themselves give once imported.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import typer.main

from gpufleet.cli import app
from gpufleet.cli.commands import COMMANDS, Entry, LazyGroup
from tests.support import EXAMPLES, ROOT

FLEET = str(EXAMPLES / "fleet.yaml")
JOBS = str(ROOT / "tests" / "check" / "manifests" / "jobs.yaml")

# What only some commands need: the ledger's database, the tuner, charts, dataframes, the servers,
# the Kubernetes and Prometheus clients, the offline validator, the twin.
DATABASE = {"sqlalchemy", "alembic", "psycopg"}
TUNER = {"optuna"}
CHARTS_FRAMES = {"matplotlib", "polars", "numpy"}
SERVERS = {"granian", "starlette", "uvicorn", "prometheus_client"}
CLIENTS = {"lightkube", "httpx2"}
VALIDATOR = {"kubernetes_validate", "openapi_schema_validator", "cel_expr_python"}
HEAVY = DATABASE | TUNER | CHARTS_FRAMES | SERVERS | CLIENTS | VALIDATOR | {"jinja2", "cryptography"}
FEATURES = {
    "gpufleet.twin",
    "gpufleet.simulate",
    "gpufleet.tune",
    "gpufleet.ledger",
    "gpufleet.recorder",
    "gpufleet.webhook",
    "gpufleet.evidence",
    "gpufleet.scan",
    "gpufleet.explain",
    "gpufleet.trace",
    "gpufleet.kube",
    "gpufleet.prom",
}

PROBE = """
import json, sys
from gpufleet.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
"""


def _loaded(args: list[str], tmp_path: Path) -> set[str]:
    """The modules a fresh interpreter holds after running ``gpufleet ARGS``."""
    dump = tmp_path / "modules.json"
    env = {**os.environ, "COLUMNS": "120"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(dump), *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert dump.is_file(), done.stderr
    return set(json.loads(dump.read_text()))


def _present(loaded: set[str], names: set[str]) -> set[str]:
    """Which of ``names`` (packages or modules) ``loaded`` holds, themselves or any submodule."""
    return {n for n in names if any(m == n or m.startswith(n + ".") for m in loaded)}


# (what runs, what it must not import)
CASES: list[tuple[list[str], set[str]]] = [
    (["--help"], HEAVY | FEATURES | {"pydantic", "gpufleet.policy", "gpufleet.check", "gpufleet.render"}),
    (["--version"], HEAVY | FEATURES | {"pydantic", "gpufleet.policy"}),
    (["version"], HEAVY | FEATURES | {"gpufleet.policy"}),  # running any command, typer itself loads pydantic
    # plan's core builds on render's pure builders (the recorder's manifests among them)
    (["plan", FLEET], HEAVY | FEATURES - {"gpufleet.recorder"} | {"gpufleet.validation"}),
    (["plan", "--help"], HEAVY | FEATURES - {"gpufleet.recorder"}),
    (["check", FLEET, JOBS], HEAVY | FEATURES | {"gpufleet.render", "gpufleet.validation"}),
    (["check", FLEET, JOBS, "--json"], HEAVY | FEATURES | {"gpufleet.render"}),
    (["schema"], HEAVY | FEATURES - {"gpufleet.recorder"}),
    (["render", FLEET, "-o", "out"], (HEAVY - {"jinja2"}) | FEATURES - {"gpufleet.recorder"}),
    # the webhook's metrics (prometheus_client) come with its package; the server only with ``serve``
    (["webhook", "certs", "--help"], DATABASE | TUNER | CHARTS_FRAMES | CLIENTS | {"granian", "starlette", "uvicorn"}),
    (["trace", "show", "--help"], DATABASE | TUNER | CHARTS_FRAMES | SERVERS | {"lightkube", "gpufleet.twin"}),
    (["twin", "step", "--help"], DATABASE | TUNER | CHARTS_FRAMES | SERVERS | CLIENTS),
    (["simulate", "--help"], DATABASE | TUNER | SERVERS | CLIENTS | {"matplotlib", "polars"}),
    (["record", "--help"], DATABASE | TUNER | CHARTS_FRAMES | SERVERS | CLIENTS),
    (["audit", "verify", "--help"], DATABASE | TUNER | CHARTS_FRAMES | SERVERS | CLIENTS),
    (["why", "--help"], DATABASE | TUNER | CHARTS_FRAMES | SERVERS),
    (["scan", "--help"], DATABASE | TUNER | CHARTS_FRAMES | SERVERS),
]


@pytest.mark.parametrize(("args", "forbidden"), CASES, ids=[" ".join(a[:2]) for a, _ in CASES])
def test_a_command_imports_nothing_another_command_needs(args: list[str], forbidden: set[str], tmp_path: Path) -> None:
    loaded = _loaded(args, tmp_path)
    assert "typer" in loaded, "the probe ran the command line"
    assert _present(loaded, forbidden) == set()


# Each root command's module, and the other command modules it is built from (demo shows plan,
# simulate and tune's tables; webhook serves check's rules).
SHARED = {
    "demo": {"gpufleet.cli.policy", "gpufleet.cli.simulate", "gpufleet.cli.tune"},
    "what-if": {"gpufleet.cli.why"},
    "webhook": {"gpufleet.cli.check"},
    "audit": {"gpufleet.cli.checkpoint"},
    "record": {"gpufleet.cli.checkpoint"},
}
COMMAND_MODULES = {entry.target.partition(":")[0] for entry in COMMANDS} | {"gpufleet.cli.checkpoint"}


@pytest.mark.parametrize("entry", COMMANDS, ids=[e.name for e in COMMANDS])
def test_a_commands_help_imports_only_its_own_command_module(entry: Entry, tmp_path: Path) -> None:
    own = entry.target.partition(":")[0]
    loaded = _loaded([entry.name, "--help"], tmp_path)
    assert own in loaded
    others = COMMAND_MODULES - {own} - SHARED.get(entry.name, set())
    assert _present(loaded, others) == set()


def _root_help(load_all: bool) -> str:
    """The root's ``--help`` as printed, with the commands as summaries or all of them imported."""
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    if load_all:
        for entry in COMMANDS:
            group.load(entry.name)
    out = io.StringIO()
    with redirect_stdout(out):
        group.main(["--help"], prog_name="gpufleet", standalone_mode=False)
    return out.getvalue()


def test_the_root_listing_is_what_the_commands_themselves_say(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    lazy, loaded = _root_help(load_all=False), _root_help(load_all=True)
    for entry in COMMANDS:
        assert entry.name in lazy
    assert lazy == loaded


def test_every_entry_builds_a_command_of_its_name() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    for entry in COMMANDS:
        group.load(entry.name)
        built = group.commands[entry.name]
        assert built.name == entry.name
        assert type(built).__name__ != "Summary"
        assert (built.help or "").split("\n\n")[0].split() == entry.summary.split(), entry.name


def test_completing_a_commands_options_imports_that_command() -> None:
    """Completion resolves the command first, so ``gpufleet plan --j<TAB>`` offers ``--json``."""
    env = {**os.environ, "_GPUFLEET_COMPLETE": "complete_bash", "COMP_WORDS": "gpufleet plan --j", "COMP_CWORD": "2"}
    done = subprocess.run([sys.executable, "-m", "gpufleet"], check=False, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "--json" in done.stdout.split()
