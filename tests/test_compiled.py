"""The compiled simulator (``gpufleet.compiled``): its manifest judges a build stale when any source
differs, and a stale or unwanted build is never run, the sources are imported instead."""

from __future__ import annotations

import ast
import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpufleet import compiled
from gpufleet.demo import example_text, workload_spec
from gpufleet.policy import parse_policy, resolve
from gpufleet.simulate.config import SimulationConfig
from gpufleet.simulate.measures import as_dict, common_window, measure
from gpufleet.simulate.meter import Meter
from gpufleet.simulate.run import simulate
from gpufleet.trace import synthesize
from gpufleet.twin import Twin

KUEUE = "gpufleet/twin/kueue.py"


def _tree(tmp_path: Path) -> Path:
    """A source tree holding exactly the compiled modules' files (their text, not their code)."""
    src = tmp_path / "src"
    for source in compiled.sources():
        target = src / source.relative_to(compiled.SRC)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    return src


def _built(src: Path) -> None:
    (src / compiled.MANIFEST).write_text(json.dumps(compiled.digests(src)))
    (src / f"{compiled.GROUP}__mypyc.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")


def _edit(src: Path) -> None:
    with (src / KUEUE).open("a") as out:
        out.write("# edited after the build\n")


def _add(src: Path) -> None:
    (src / "gpufleet/twin/new.py").write_text("X = 1\n")


def _no_manifest(src: Path) -> None:
    (src / compiled.MANIFEST).unlink()


def _nothing(src: Path) -> None:
    pass


@pytest.mark.parametrize(
    ("built", "change", "why"),
    [
        (False, _nothing, None),  # a wheel or a fresh clone: nothing compiled, nothing to guard
        (True, _nothing, None),
        (True, _edit, f"{KUEUE} changed since it was compiled"),
        (True, _add, "gpufleet/twin/new.py changed since it was compiled"),
        (True, _no_manifest, "no manifest of a finished build"),  # an interrupted build
    ],
    ids=["not-compiled", "fresh", "source-edited", "source-added", "build-interrupted"],
)
def test_a_build_is_stale_when_its_sources_differ_from_its_manifest(
    tmp_path: Path, built: bool, change: Callable[[Path], None], why: str | None
) -> None:
    src = _tree(tmp_path)
    if built:
        _built(src)
    change(src)
    assert compiled.stale(src) == why


def test_two_changed_sources_are_both_counted(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    _built(src)
    _edit(src)
    _add(src)
    assert compiled.stale(src) == f"{KUEUE} and 1 more changed since it was compiled"


def _compiled_here() -> Path:
    if not compiled.native(Twin):
        pytest.skip("gpufleet is not compiled here (`make compiled`; `make test` compiles it first)")
    return compiled.SRC


def _origin(src: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Where a fresh interpreter imports the twin's Kueue and its scheduling cycle from."""
    code = "import gpufleet.twin.kueue as k, gpufleet.twin.scheduler.cycle as c; print(k.__file__); print(c.__file__)"
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(src), **env},
        capture_output=True,
        text=True,
        check=True,
    )


def test_the_compiled_build_runs_where_it_is_fresh_and_the_sources_where_asked() -> None:
    src = _compiled_here()
    fresh = _origin(src, {"GPUFLEET_PURE": "0"})
    assert all(line.endswith(".so") for line in fresh.stdout.split()), fresh.stdout
    assert fresh.stderr == ""
    pure = _origin(src, {"GPUFLEET_PURE": "1"})
    assert [Path(line).name for line in pure.stdout.split()] == ["kueue.py", "cycle.py"]
    assert pure.stderr == ""  # asked for: no warning


def test_a_stale_build_is_not_run_the_sources_are_with_a_warning(tmp_path: Path) -> None:
    """A copy of the compiled package with one source edited after its build: every compiled
    module comes from its source (all or none), and stderr says why."""
    src = _compiled_here()
    copy = tmp_path / "src"
    shutil.copytree(src / "gpufleet", copy / "gpufleet", ignore=shutil.ignore_patterns("__pycache__"))
    for lib in src.glob(f"{compiled.GROUP}__mypyc.*"):
        shutil.copy2(lib, copy / lib.name)
    assert compiled.stale(copy) is None
    assert all(line.endswith(".so") for line in _origin(copy, {"GPUFLEET_PURE": "0"}).stdout.split())
    _edit(copy)
    stale = _origin(copy, {"GPUFLEET_PURE": "0"})
    assert [Path(line).name for line in stale.stdout.split()] == ["kueue.py", "cycle.py"]
    assert f"running the compiled modules from source, not their build: {KUEUE} changed" in stale.stderr


def test_a_simulated_run_travels_by_pickle_and_comes_back_the_same() -> None:
    """What a tune worker sends back: a week's run, its jobs, meter, idle watch and placement cluster.
    Compiled, its frozen dataclasses and plain classes need ``gpufleet.picklable``; from source this
    checks Python's own protocol, the same contract."""
    fleet = resolve(parse_policy(example_text(), "fleet.yaml"))
    result = simulate(fleet, synthesize(workload_spec(fleet, days=2), 7), SimulationConfig())
    back = pickle.loads(pickle.dumps(result))
    window = common_window([result])
    assert as_dict(measure(back, fleet, window)) == as_dict(measure(result, fleet, window))
    assert [(r.key, r.attempts) for r in back.outcome.runs] == [(r.key, r.attempts) for r in result.outcome.runs]
    assert back.outcome.watch is not None and result.outcome.watch is not None
    assert back.outcome.watch.cluster.nodes[0].spec == result.outcome.watch.cluster.nodes[0].spec
    assert compiled.native(type(back.outcome.runs[0])) == compiled.native(Twin)  # the build's own classes


def test_every_compiled_class_a_module_initialized_in_the_library_is_registered() -> None:
    """A compiled module imported by another inside the group's library is never seen by Python's
    import system (``picklable.sweep``): in a fresh interpreter, after importing the simulator's loop
    alone, every compiled class now loaded has the reducer."""
    src = _compiled_here()
    code = (
        "import copyreg, enum, sys, gpufleet.simulate.run\n"
        "from gpufleet import picklable\n"
        "loaded = [c for n, m in list(sys.modules.items()) if n.startswith('gpufleet.') for c in vars(m).values()\n"
        "          if isinstance(c, type) and c.__module__ == n and hasattr(c, picklable.ATTRS)\n"
        "          and not issubclass(c, enum.Enum | BaseException)]\n"
        "print(len(loaded), sum(copyreg.dispatch_table.get(c) is picklable.reduce for c in loaded))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded, registered = map(int, out.stdout.split())
    assert loaded > 100  # the twin's, the simulator's and placement's classes
    assert registered == loaded


def test_a_compiled_plain_class_made_from_interpreted_code_is_initialized() -> None:
    """The trap of mypyc's ``serializable=True`` (mypyc/mypyc#1172, 2.4.1): an instance made from
    interpreted code left without its attributes. The classes' own ``__new__`` avoids it."""
    meter = Meter(3600)
    assert (meter.bucket_s, meter.now) == (3600, 0)
    bare = Meter.__new__(Meter)
    assert not hasattr(bare, "bucket_s")  # what pickle builds on


def _compiled_name(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in (m.replace("/", ".") for m in compiled.MODULES))


def _imports_inside_functions(source: Path) -> list[int]:
    """The lines of ``source`` that import a compiled module inside a function or method."""
    found: list[int] = []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import):
                    names = [a.name for a in inner.names]
                elif isinstance(inner, ast.ImportFrom) and inner.module:
                    names = [inner.module, *(f"{inner.module}.{a.name}" for a in inner.names)]
                else:
                    continue
                if any(map(_compiled_name, names)):
                    found.append(inner.lineno)
    return found


def test_no_compiled_module_is_imported_inside_a_function() -> None:
    """``picklable`` sweeps the compiled modules as Python imports them; one first imported inside a
    function would be initialized by the group's library later, unswept, its classes without the
    reducer until the next import."""
    late = {
        source.relative_to(compiled.SRC).as_posix(): lines
        for source in compiled.sources()
        if (lines := _imports_inside_functions(source))
    }
    assert late == {}
