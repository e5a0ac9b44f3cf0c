"""A rendered bundle: files of objects, serialised deterministically and written atomically.

Re-rendering the same policy gives byte-identical files: keys keep their insertion order (which the
renderers fix), lists are built in policy order, and no timestamp or random name enters the output.
The folder is written next to its destination and renamed into place, so a reader never sees half a
bundle, and it never replaces a folder gpufleet did not write (``gpufleet.outputs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufleet.outputs import location, replace_folder
from gpufleet.render.common import Obj

KUSTOMIZATION = "kustomization.yaml"


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (ConfigMap payloads stay readable)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(objects: list[Obj]) -> str:
    return "---\n".join(yaml.dump(o, Dumper=_Dumper, sort_keys=False, default_flow_style=False) for o in objects)


@dataclass(frozen=True)
class RenderedFile:
    name: str
    objects: list[Obj]
    resource: bool = True  # listed in kustomization.yaml
    header: str = ""
    api: bool = True  # API objects (False for a config fragment such as Kueue's manager Configuration)
    plain: bool = False  # a tool's own configuration file (Alertmanager's), never among the bundle's objects

    @property
    def folder(self) -> str:
        """The subfolder with its own kustomization.yaml ("" for the top level), e.g. ``monitoring``."""
        return self.name.rpartition("/")[0]

    def text(self) -> str:
        head = "".join(f"# {line}\n" for line in self.header.splitlines()) if self.header else ""
        return head + dump(self.objects)


@dataclass(frozen=True)
class Bundle:
    files: list[RenderedFile] = field(default_factory=list)

    def objects(self, *, resources_only: bool = True) -> list[Obj]:
        """What ``kubectl apply -k DIR`` applies; with ``resources_only=False`` every object of every file."""
        chosen = (f for f in self.files if not f.plain and ((f.resource and not f.folder) or not resources_only))
        return [o for f in chosen for o in f.objects]

    def api_objects(self) -> list[Obj]:
        """Every API object, whether kustomize applies it or the user applies it separately."""
        return [o for f in self.files if f.api and not f.plain for o in f.objects]

    def kustomization(self, folder: str = "") -> Obj:
        """A folder's kustomization: its own resource files only (a subfolder is applied on its own)."""
        prefix = f"{folder}/" if folder else ""
        return {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [f.name.removeprefix(prefix) for f in self.files if f.resource and f.folder == folder],
        }

    def contents(self) -> dict[str, str]:
        out = {f.name: f.text() for f in self.files}
        for folder in dict.fromkeys(["", *(f.folder for f in self.files)]):
            out[f"{folder}/{KUSTOMIZATION}" if folder else KUSTOMIZATION] = dump([self.kustomization(folder)])
        return out


def write_files(bundle: Bundle, folder: Path) -> None:
    """Write every file of the bundle into ``folder`` (names may hold a subfolder, ``monitoring/x.yaml``)."""
    for name, text in bundle.contents().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def write_bundle(bundle: Bundle, out_dir: Path, *, force: bool = False) -> list[Path]:
    """Write every file into a fresh folder beside ``out_dir``, then swap it into place.

    ``out_dir`` is replaced only when it is missing, empty or an earlier gpufleet output
    (``gpufleet.outputs``); ``force`` keeps a foreign folder beside it instead of refusing.
    """
    with replace_folder(out_dir, "render", force=force) as staging:
        write_files(bundle, staging)
    return sorted(location(out_dir) / name for name in bundle.contents())


def describe(o: Obj) -> str:
    """``Kind/name`` or ``Kind/namespace/name``, how findings and summaries name an object."""
    m: dict[str, Any] = o.get("metadata", {})
    ns = f"{m['namespace']}/" if "namespace" in m else ""
    return f"{o.get('kind', '?')}/{ns}{m.get('name', '?')}"
