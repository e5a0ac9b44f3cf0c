"""A cluster of nodes and the scheduling cycle for one pod: filter, score, bind.

Filtering follows kube-scheduler's plugin order per node: TaintToleration, NodeAffinity (with
``nodeSelector``), then NodeResourcesFit (every insufficient resource is reported). The feasible
node with the smallest ``(policy key, node name)`` wins. With a ``tie_break`` generator, a seeded draw
among the feasible nodes of the best key, leaning to the name as kube-scheduler does (``TIE_RACE``).
Without one (the default) the name decides, so the same input always gives the same placement.

Speed, without changing the answer: the static filters are evaluated once per *node class* (nodes
with the same labels, taints and capacity) and pod constraint; within a class, nodes with the same
free-state signature fit and score alike, so each such group is checked once, through its
lowest-named member, which is the one the name tie-breaker would pick. Groups are bucketed by their
largest free card, so a GPU pod skips the buckets that cannot hold it. Bind and unbind move one node
between groups.
"""

from __future__ import annotations

import random
from bisect import insort
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from gpufleet.placement.decision import Placement, Unschedulable
from gpufleet.placement.filters import insufficient_message, static_verdict
from gpufleet.placement.node import MILLI, NodeSpec
from gpufleet.placement.pod import PodSpec
from gpufleet.placement.scoring import LeastAllocated, Policy
from gpufleet.placement.state import NodeState, Signature

KEY_MEMO_LIMIT = 1_000_000  # memoized policy keys kept before the memo is dropped (bounds memory)

# kube-scheduler v1.36.5 without score extenders leaves every ``Randomizer`` at 0, so among nodes of
# equal score it takes the root of a Go heap over the feasible nodes in the order the parallel filters
# found them: the informer's name order, unless the filters' goroutines finished out of it. Modelled as
# the first tied node by name, or with this probability a uniform draw among the ties; fitted on the
# `deep` world's four testbed runs (docs/simulate.md, "A deep queue": 42 read ties, the first by name
# taken in 32; maximum likelihood 0.37, 95 % interval 0.20-0.59).
TIE_RACE = 0.37


def _name(node: NodeState) -> str:
    return node.spec.name


def _bucket(node: NodeState, sig: Signature) -> int:
    """The largest free card of a plain node; -1 for time-sliced or MIG nodes (always checked)."""
    if sig[4]:
        return -1
    return sig[2][-1] if sig[2] else 0


class Cluster:
    """Nodes with their free state; ``where`` maps each bound pod to its node."""

    def __new__(cls, *_args: object, **_kwargs: object) -> Cluster:
        # Bare, as pickle makes it before setting its attributes: compiled, a class without its
        # own __new__ would run __init__ with no arguments there (gpufleet.picklable)
        return super().__new__(cls)

    def __init__(
        self, nodes: Iterable[NodeSpec], policy: Policy | None = None, tie_break: random.Random | None = None
    ) -> None:
        self.tie_break = tie_break
        specs = sorted(nodes, key=lambda n: n.name)
        names = [n.name for n in specs]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")
        self.policy: Policy = policy or LeastAllocated()
        class_ids: dict[tuple[object, ...], int] = {}
        self.nodes: list[NodeState] = []
        self._class_spec: dict[int, NodeSpec] = {}
        self._class_size: dict[int, int] = {}  # nodes per class (fixed)
        # class -> largest-free bucket -> group id -> members sorted by name
        self._groups: dict[int, dict[int, dict[int, list[NodeState]]]] = {}
        self._group_ids: dict[tuple[int, Signature], int] = {}  # kept for good: memo keys stay valid
        self._group_sig: list[Signature] = []
        self._node_group: dict[str, int] = {}
        for spec in specs:
            cid = class_ids.setdefault((replace(spec, name=""),), len(class_ids))
            self._class_spec.setdefault(cid, spec)
            self._class_size[cid] = self._class_size.get(cid, 0) + 1
            state = NodeState(spec, cid)
            self.nodes.append(state)
            self._join(state)
        self._by_name = {s.spec.name: s for s in self.nodes}
        # Per pod constraint (selector, affinity, tolerations): each class's static verdict, and the
        # classes that pass. Fixed by the classes' specs: kept (as many as the pods' constraints).
        self._statics: dict[tuple[object, ...], tuple[list[str | None], list[int]]] = {}
        # Per request (``_memos``) and group: the policy key, and what the group's nodes lack
        # (``NodeState.insufficient``'s resources, as reasons). A group's id stands for one class and one
        # free-state signature for good, and both answers depend on nothing else (the key is pure,
        # insufficient reads only what the signature holds), so no bind or unbind invalidates
        # them; they are only dropped, together, past ``KEY_MEMO_LIMIT`` entries.
        self._keys: dict[tuple[object, ...], dict[int, tuple[float, ...]]] = {}
        self._lacks: dict[tuple[object, ...], dict[int, list[str]]] = {}
        self._memo_size = 0
        self.where: dict[str, str] = {}
        # Bind and unbind count here; a pod shape found unschedulable is remembered with the count
        # then (and its reasons), as nothing else changes what ``schedule`` answers.
        self._changes = 0
        self._unschedulable: dict[tuple[object, ...], tuple[int, tuple[tuple[str, int], ...] | None]] = {}

    def _join(self, node: NodeState) -> None:
        sig = node.signature()
        gid = self._group_ids.setdefault((node.class_id, sig), len(self._group_ids))
        if gid == len(self._group_sig):
            self._group_sig.append(sig)
        self._node_group[node.spec.name] = gid
        buckets = self._groups.setdefault(node.class_id, {})
        insort(buckets.setdefault(_bucket(node, sig), {}).setdefault(gid, []), node, key=_name)

    def _leave(self, node: NodeState) -> None:
        gid = self._node_group[node.spec.name]
        buckets = self._groups[node.class_id]
        bucket = _bucket(node, self._group_sig[gid])
        groups = buckets[bucket]
        groups[gid].remove(node)
        if not groups[gid]:
            del groups[gid]
            if not groups:
                del buckets[bucket]

    def node(self, name: str) -> NodeState:
        return self._by_name[name]

    def _static(self, pod: PodSpec) -> tuple[list[str | None], list[int]]:
        """Each class's static verdict on the pod (None: it passes), and the classes that pass."""
        constraint = (pod.node_selector, pod.affinity, pod.tolerations)
        found = self._statics.get(constraint)
        if found is None:
            verdicts = [static_verdict(self._class_spec[cid], pod) for cid in range(len(self._class_spec))]
            found = self._statics[constraint] = (verdicts, [cid for cid, v in enumerate(verdicts) if v is None])
        return found

    def _memos(self, pod: PodSpec) -> tuple[dict[int, tuple[float, ...]], dict[int, list[str]]]:
        """The request's policy keys and lacks per group (see ``__init__``)."""
        if self._memo_size > KEY_MEMO_LIMIT:
            self._keys.clear()
            self._lacks.clear()
            self._memo_size = 0
        request = (pod.cpu_milli, pod.memory, pod.gpus, pod.gpu_milli, pod.mig_profile, pod.shared_name)
        keys = self._keys.get(request)
        if keys is None:
            keys = self._keys[request] = {}
            self._lacks[request] = {}
        return keys, self._lacks[request]

    def _lack(self, lacks: dict[int, list[str]], gid: int, head: NodeState, pod: PodSpec) -> list[str]:
        """What the group's nodes (``head`` among them) lack for the pod, as kube-scheduler's
        ``Insufficient …`` reasons (none: it fits), remembered."""
        found = lacks.get(gid)
        if found is None:
            found = lacks[gid] = [insufficient_message(r) for r in head.insufficient(pod)]
            self._memo_size += 1
        return found

    def schedule(self, pod: PodSpec, explain: bool = True) -> Placement | Unschedulable:
        """Pick a node for the pod without binding it. With ``explain=False`` an unschedulable
        answer skips counting the reasons (the packing benchmark does not read them)."""
        if pod.name in self.where:
            raise ValueError(f"pod {pod.name} is already bound to {self.where[pod.name]}")
        shape = pod.shape
        known = self._unschedulable.get(shape)
        if known is not None and known[0] == self._changes and (known[1] is not None or not explain):
            return Unschedulable(pod.name, len(self.nodes), known[1] if explain and known[1] is not None else ())
        best: tuple[tuple[float, ...], str] | None = None
        share, whole = pod.gpu_milli, pod.gpus
        simple_pod = not pod.mig_profile and not pod.shared_name
        need = share or (MILLI if whole else 0)
        verdicts, passing = self._static(pod)
        keys, lacks = self._memos(pod)
        for class_id in passing:
            for largest, groups in self._groups[class_id].items():
                if largest >= 0 and (largest < need or not simple_pod):
                    continue
                best = self._best_in(groups, pod, simple_pod, best, keys=keys, lacks=lacks)
        if best is None:
            reasons = self._reasons(pod, verdicts, lacks) if explain else None
            self._unschedulable[shape] = (self._changes, reasons)
            return Unschedulable(pod.name, len(self.nodes), reasons or ())
        node = best[1] if self.tie_break is None else self._draw(best[0], passing, keys)
        return Placement(pod.name, node, self.policy.devices(self._by_name[node], pod))

    def _draw(self, key: tuple[float, ...], passing: list[int], keys: dict[int, tuple[float, ...]]) -> str:
        """A seeded pick among every feasible node whose key is ``key``: the first by name, or with
        probability ``TIE_RACE`` any of them. A group has a key in this request's memo only once it was
        found to fit it (fit and key depend on the group alone), so the groups holding ``key`` are
        exactly the feasible ones of the best score; their members tie."""
        assert self.tie_break is not None
        ties = sorted(
            node.spec.name
            for class_id in passing
            for groups in self._groups[class_id].values()
            for gid, members in groups.items()
            if keys.get(gid) == key
            for node in members
        )
        return ties[self.tie_break.randrange(len(ties))] if self.tie_break.random() < TIE_RACE else ties[0]

    def _best_in(
        self,
        groups: dict[int, list[NodeState]],
        pod: PodSpec,
        simple_pod: bool,
        best: tuple[tuple[float, ...], str] | None,
        *,
        keys: dict[int, tuple[float, ...]],
        lacks: dict[int, list[str]],
    ) -> tuple[tuple[float, ...], str] | None:
        """The best (key, node name) among the groups, or ``best`` if none beats it."""
        group_sig = self._group_sig
        cpu, mem, share, whole = pod.cpu_milli, pod.memory, pod.gpu_milli, pod.gpus
        for gid, members in groups.items():
            sig = group_sig[gid]
            head = members[0]
            if simple_pod and not sig[4]:
                # plain node: the signature decides fit (cpu, memory, largest free, whole cards)
                if sig[0] < cpu or sig[1] < mem:
                    continue
                if share and (not sig[2] or sig[2][-1] < share):
                    continue
                if whole and sig[3] < whole:
                    continue
            elif self._lack(lacks, gid, head, pod):
                continue
            key = keys.get(gid)
            if key is None:
                key = keys[gid] = self.policy.key(head, pod)
                self._memo_size += 1
            candidate = (key, head.spec.name)
            if best is None or candidate < best:
                best = candidate
        return best

    def _reasons(
        self, pod: PodSpec, verdicts: list[str | None], lacks: dict[int, list[str]]
    ) -> tuple[tuple[str, int], ...]:
        """kube-scheduler's per-node reasons, counted over nodes."""
        histogram: Counter[str] = Counter()
        for class_id, buckets in self._groups.items():
            veto = verdicts[class_id]
            if veto:  # every node of the class, whatever its group
                histogram[veto] += self._class_size[class_id]
                continue
            for groups in buckets.values():
                for gid, members in groups.items():
                    for reason in self._lack(lacks, gid, members[0], pod):
                        histogram[reason] += len(members)
        return tuple(sorted(histogram.items()))

    def bind(self, pod: PodSpec, placement: Placement) -> None:
        node = self._by_name[placement.node]
        self._leave(node)
        node.take(pod, placement.devices)
        self._join(node)
        self._changes += 1
        self.where[pod.name] = placement.node

    def place(self, pod: PodSpec, explain: bool = True) -> Placement | Unschedulable:
        """Schedule and, when a node was found, bind: one scheduling cycle."""
        decision = self.schedule(pod, explain)
        if isinstance(decision, Placement):
            self.bind(pod, decision)
        return decision

    def unbind(self, pod_name: str) -> Placement:
        """Release a pod's resources (it finished or was evicted); returns what it held."""
        node = self._by_name[self.where.pop(pod_name)]
        self._leave(node)
        _, devices = node.give_back(pod_name)
        self._join(node)
        self._changes += 1
        return Placement(pod_name, node.spec.name, devices)
