"""The testbed's rewrite of gpufleet's rendered webhook configurations: a URL on loopback, nothing else."""

from __future__ import annotations

import copy

from gpufleet.check.manifests import webhook_objects
from gpufleet.policy import Fleet
from gpufleet.testbed.webhook import local_configurations


def test_only_the_service_becomes_a_url_and_the_rendered_objects_are_untouched(fleet: Fleet) -> None:
    rendered = webhook_objects(fleet)
    before = copy.deepcopy(rendered)
    configs = local_configurations(rendered, host="127.0.0.1", port=9443)
    assert rendered == before
    originals = [o for o in rendered if o["kind"].endswith("WebhookConfiguration")]
    assert [c["kind"] for c in configs] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    for config, original in zip(configs, originals, strict=True):
        assert config["metadata"] == original["metadata"]
        for hook, was in zip(config["webhooks"], original["webhooks"], strict=True):
            assert hook["clientConfig"] == {"url": f"https://127.0.0.1:9443{was['clientConfig']['service']['path']}"}
            assert {k: v for k, v in hook.items() if k != "clientConfig"} == {
                k: v for k, v in was.items() if k != "clientConfig"
            }
