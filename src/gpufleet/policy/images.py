"""An OCI image reference as a registry and the kubelet accept it: ``[host[:port]/]path[:tag][@digest]``.

``render --image`` and the policy's ``cluster.image`` name the image the webhook and recorder
Deployments run. A reference the kubelet cannot parse is only found when the pods are created
(InvalidImageName), and with the webhook's ``failurePolicy: Fail`` that blocks every Job in the
team namespaces, so it is refused here, with what is wrong. The grammar is the distribution
project's (``reference/regexp.go`` in github.com/distribution/reference): lower-case path
components joined by ``.``, ``_``, ``__`` or dashes; a tag of at most 128 word characters, dots and
dashes, not starting with either; a digest ``algorithm:hex``; the name at most 255 characters.
"""

from __future__ import annotations

import re

# The published image, which does not exist until a release publishes it (README: build and push your own).
PUBLISHED = "ghcr.io/gpufleet/gpufleet"

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?"
_NAME = re.compile(rf"^(?:(?P<host>{_HOST})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")
NAME_MAX = 255


def image_problem(reference: str) -> str | None:
    """What makes ``reference`` no image reference, or None when a registry would take it."""
    if not reference or reference != reference.strip() or any(c.isspace() for c in reference):
        return "an image reference has no spaces and is not empty, e.g. registry.example.com/gpufleet:0.1.0"
    rest, _, digest = reference.partition("@")
    if digest and not _DIGEST.match(digest):
        return f"digest {digest!r} is not algorithm:hex (e.g. sha256: and 64 hex digits)"
    name, tag = rest, ""
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:  # a colon after the last slash starts the tag; one before it is a registry's port
        name, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG.match(tag):
            return f"tag {tag!r} is not 1-128 letters, digits, '_', '.' or '-', starting with a letter, digit or '_'"
    if len(name) > NAME_MAX:
        return f"the name is {len(name)} characters; at most {NAME_MAX}"
    if not _NAME.match(name):
        if _path(name) != _path(name).lower():
            return f"repository path {_path(name)!r} has upper-case letters; only a registry's host may"
        return (
            f"{name!r} is not [host[:port]/]path: path components are lower-case letters and digits, "
            "joined by '.', '_', '__' or '-'"
        )
    return None


def _path(name: str) -> str:
    """The repository path: the name without its registry host (a first component with a dot or a
    port, or ``localhost``, the way the container runtimes tell a host from a path)."""
    first, slash, rest = name.partition("/")
    is_host = slash and ("." in first or ":" in first or first == "localhost" or first != first.lower())
    return rest if is_host else name
