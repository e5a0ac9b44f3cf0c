"""``gpufleet.testbed.rootfs`` without root: reading an unpacked bundle, and where volumes may go.

Running from the image (root, a mount namespace) is ``tests/e2e/test_image_on_api_server.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.testbed import rootfs


def _bundle(tmp_path: Path) -> rootfs.Bundle:
    (tmp_path / "rootfs" / "var").mkdir(parents=True)
    (tmp_path / "rootfs" / "run").mkdir()
    (tmp_path / "rootfs" / "var" / "run").symlink_to("/run")  # as in Debian's image
    config = {
        "root": {"path": "rootfs"},
        "process": {
            "user": {"uid": 65532, "gid": 65533},
            "args": ["/usr/local/bin/gpufleet"],
            "env": ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "EMPTY="],
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return rootfs.Bundle.read(tmp_path)


def test_a_bundle_reads_the_image_user_entrypoint_and_environment(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    assert (bundle.rootfs, bundle.uid, bundle.gid, bundle.args) == (
        tmp_path / "rootfs",
        65532,
        65533,
        ("/usr/local/bin/gpufleet",),
    )
    assert bundle.environment({"EXTRA": "1"}) == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "EMPTY": "",
        "EXTRA": "1",
    }


@pytest.mark.parametrize(
    ("target", "refused"),
    [
        ("/etc/gpufleet", False),
        ("/var/lib/gpufleet", False),
        ("/var/run/kube", True),  # /var/run -> /run, absolute: outside the root on this machine
        ("/var/run", True),
    ],
)
def test_a_volume_never_goes_through_a_symbolic_link_of_the_image(tmp_path: Path, target: str, refused: bool) -> None:
    bundle = _bundle(tmp_path)
    volume = rootfs.Volume(tmp_path, target)
    if refused:
        with pytest.raises(ValueError, match="symbolic link"):
            rootfs.contained(bundle, ["/bin/true"], [volume])
        assert not Path("/run/kube").exists()
    else:
        command = rootfs.contained(bundle, ["/bin/true"], [volume])
        assert (tmp_path / "rootfs" / target.lstrip("/")).is_dir()  # the mount point, made in the root
        assert command[1:5] == ["--mount", "--propagation", "private", "--"]
        script = command[-1]
        assert f"--userspec=65532:65533 {tmp_path / 'rootfs'} /bin/true" in script
        assert script.index("remount,bind,ro") < script.index("--userspec")
