"""CustomResourceDefinitions, indexed by group and kind, with each served version's schema.

The index is built once (from a folder of CRD YAML files, or from CRDs already parsed) and then asked,
per object, which schema its ``apiVersion`` and ``kind`` select. A CRD folder is the user's input
(``render --crds DIR``), so a file that cannot be read or a document that is not a usable CRD is an
``InputError`` naming the file, never a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from openapi_schema_validator import OAS30Validator, oas30_format_checker

from gpufleet.errors import InputError, Problem

_CRD_API_VERSION = "apiextensions.k8s.io/v1"
_CRD_SUFFIXES = (".yaml", ".yml", ".json")
# libyaml parses Kueue's 1.4 MB Workload CRD in a fraction of the pure-Python loader's time.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class CrdVersion:
    """One served version of a custom resource: its schema and the validator built from it."""

    group: str
    version: str
    kind: str
    namespaced: bool
    deprecated: bool
    status_subresource: bool  # the server drops ``status`` on create when this is set
    schema: Mapping[str, Any] = field(repr=False)
    validator: Any = field(repr=False, compare=False)  # an OAS30Validator over ``schema``


@dataclass(frozen=True)
class CrdResolution:
    """What the index knows about an ``apiVersion``/``kind`` pair.

    ``version`` is the served version's schema; ``defined`` says whether any CRD defines the kind in
    that group at all, so "kind unknown" and "version not served" can be told apart.
    """

    version: CrdVersion | None
    defined: bool
    served: tuple[str, ...] = ()


@dataclass(frozen=True)
class CrdIndex:
    """Served CRD versions by (group, kind, version)."""

    versions: Mapping[tuple[str, str, str], CrdVersion]

    def resolve(self, api_version: str, kind: str) -> CrdResolution:
        """Find the schema for an object's ``apiVersion`` and ``kind``."""
        group, _, version = api_version.rpartition("/")
        found = self.versions.get((group, kind, version))
        served = tuple(sorted(v for (g, k, v) in self.versions if g == group and k == kind))
        return CrdResolution(version=found, defined=bool(served), served=served)

    def kinds(self) -> list[str]:
        """The ``group/version kind`` triples this index serves, sorted (for messages and docs)."""
        return sorted(f"{g}/{v} {k}" for (g, k, v) in self.versions)


def load_crds(source: Path | Sequence[Mapping[str, Any]]) -> CrdIndex:
    """Index the CRDs in a folder (or one file) of YAML/JSON documents, or in already parsed CRDs.

    Documents that are not CustomResourceDefinitions (a ``kustomization.yaml`` beside them) are
    skipped; a folder or file holding no CRD at all, a CRD without a usable schema, or a kind defined
    twice, is an ``InputError``.
    """
    problems: list[Problem] = []
    versions: dict[tuple[str, str, str], CrdVersion] = {}
    origin: dict[tuple[str, str], str] = {}
    documents = _documents(source, problems) if isinstance(source, Path) else _given(source)
    found = 0
    for where, document in documents:
        if document.get("kind") != "CustomResourceDefinition":
            continue
        found += 1
        _index_crd(document, where, versions, origin, problems)
    if isinstance(source, Path) and not found and not problems:
        # an empty or wrong folder must not make every Kueue object "valid" for want of a schema
        problems.append(
            Problem(
                "no CustomResourceDefinitions found here (expected Kueue's config/components/crd/bases)",
                file=str(source),
            )
        )
    if problems:
        raise InputError(problems)
    return CrdIndex(versions=versions)


def _given(crds: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for position, crd in enumerate(crds):
        yield f"crds[{position}]", crd


def _documents(source: Path, problems: list[Problem]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.is_file() and p.suffix in _CRD_SUFFIXES)
    elif source.is_file():
        files = [source]
    else:
        problems.append(Problem("no such CRD file or folder", file=str(source)))
        return
    for path in files:
        try:
            loaded = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_LOADER))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem(f"cannot read CRD file: {exc}", file=str(path)))
            continue
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problems.append(
                Problem(
                    f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
                    file=str(path),
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                )
            )
            continue
        for document in loaded:
            if isinstance(document, Mapping):
                yield str(path), document


def _index_crd(
    crd: Mapping[str, Any],
    where: str,
    versions: dict[tuple[str, str, str], CrdVersion],
    origin: dict[tuple[str, str], str],
    problems: list[Problem],
) -> None:
    if crd.get("apiVersion") != _CRD_API_VERSION:
        problems.append(Problem(f"CRDs must be {_CRD_API_VERSION}", file=where, path="apiVersion"))
        return
    spec = crd.get("spec")
    names = spec.get("names") if isinstance(spec, Mapping) else None
    if not isinstance(spec, Mapping) or not isinstance(names, Mapping):
        problems.append(Problem("a CRD needs spec.group, spec.names and spec.versions", file=where, path="spec"))
        return
    group, kind = spec.get("group"), names.get("kind")
    if not isinstance(group, str) or not isinstance(kind, str):
        problems.append(Problem("a CRD needs spec.group and spec.names.kind", file=where, path="spec"))
        return
    if (group, kind) in origin:
        problems.append(
            Problem(
                f"{kind}.{group} is already defined in {origin[group, kind]}",
                file=where,
                path="spec.names.kind",
            )
        )
        return
    origin[group, kind] = where
    for position, entry in enumerate(spec.get("versions") or []):
        path = f"spec.versions[{position}]"
        if not isinstance(entry, Mapping) or not entry.get("served"):
            continue
        schema = (entry.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, Mapping) or not isinstance(entry.get("name"), str):
            problems.append(Problem("a served version needs a name and schema.openAPIV3Schema", file=where, path=path))
            continue
        versions[group, kind, entry["name"]] = CrdVersion(
            group=group,
            version=entry["name"],
            kind=kind,
            namespaced=spec.get("scope") == "Namespaced",
            deprecated=bool(entry.get("deprecated")),
            status_subresource=isinstance((entry.get("subresources") or {}).get("status"), Mapping),
            schema=schema,
            validator=OAS30Validator(python_patterns(schema), format_checker=oas30_format_checker),
        )


_LEADING_FLAGS = re.compile(r"^\^\((\?[imsx]+)\)")


def python_patterns(schema: Any) -> Any:
    """``schema`` with each ``pattern`` that Go's RE2 reads but Python's ``re`` refuses made Python's.

    RE2 takes inline flags anywhere (Kueue's AdmissionCheck ``parameters.kind`` is ``^(?i)[a-z]...``);
    Python only at the start of the expression. ``^(?i)x`` and ``(?i)^x`` match the same strings.
    """
    if isinstance(schema, Mapping):
        out = {k: python_patterns(v) for k, v in schema.items()}
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            out["pattern"] = _LEADING_FLAGS.sub(lambda m: f"({m.group(1)})^", pattern)
        return out
    if isinstance(schema, list):
        return [python_patterns(v) for v in schema]
    return schema
