"""The queue world: Kueue in front of the cards.

Jobs enter as Workloads of the twin (``gpufleet.simulate.queue``); after every instant Kueue's
cycles run until stable, and the engine acts on each result before the next: admitted workloads
get pods carrying their flavor's node labels and tolerations, preempted victims' pods terminate for
the grace period (holding their GPUs) while their quota is released a release delay after the
eviction (``RELEASE``: Kueue's job reconciler clears the reservation once the Job has no active pod,
and pods being deleted are not active), waitForPodsReady evicts what is not running in time and
requeues it after Kueue's backoff. A finished job's pods free their node at once and its quota a
finish delay later (``DONE``), and Kueue may preempt it in between. Only those events free quota, so with nothing left to happen the
run stops at once (``waits_out_serving`` is off). The nodes carry the pools' taints.

Kueue's clocks (``twin/clocks.py``) run with the instants: the twin's millisecond clock is moved to
every event's second before the event is handled, and a capacity change that leaves workloads
parked books a ``KUEUE`` instant for the requeue batch one second later (rounded up), when they
wake. So a parked job is admitted a second after the quota frees, and a head still in its heap
(a new arrival, a requeued victim, the job behind a preemptor) may take the quota first.
"""

from __future__ import annotations

from typing import Any

from gpufleet.placement import Unschedulable
from gpufleet.policy import Fleet
from gpufleet.simulate.engine import DONE, GONE, KUEUE, PODS, RELEASE, REQUEUE, TIMEOUT, Simulation
from gpufleet.simulate.jobs import Attempt, JobRun, State
from gpufleet.simulate.queue import Queue
from gpufleet.simulate.reach import Reaches
from gpufleet.simulate.requests import POD_SET, pod_spec
from gpufleet.twin import Admitted, Preempted

# Where in its second a quota release falls: a Job's completion or a victim's release comes a
# fraction of a second after the event that caused it (the testbed's ledgers: a finish 1-2 s after
# the pods' end, in whole seconds); half a second, the mean of a uniform fraction.
MID_SECOND_MS = 500


class QueueWorld(Simulation):
    tainted = True
    waits_out_serving = False
    placing_admitted = True  # ``admitted`` adds a job to ``placing``; it leaves when it starts or its attempt ends

    def prepare(self, fleet: Fleet) -> Reaches:
        self.queue = Queue(fleet, fast=not self.config.reference_twin)
        self.kueue_dirty = False
        self.kueue_wake: int | None = None  # the instant already booked for Kueue's next timer
        self.succeeded: dict[str, int] = {}  # jobs whose pods succeeded, Kueue not yet told: the instant
        # job key -> its Workload's queue-order timestamp (seconds), where that is not its arrival: the
        # live replay's waiting Workloads all enter at one instant, each keeping its place in Kueue's
        # queue (``gpufleet.forecast.live``)
        self.queue_order: dict[str, int] = {}
        self.queue.check([(r.job, r.ask) for r in self.runs])
        reaches = Reaches(fleet)
        for r in self.runs:
            r.never = reaches.never_admissible(r.job, r.ask)
        return reaches

    def handle(self, t: int, kind: int, subject: Any) -> None:
        """Kueue's clock reaches the instant first: what the event changes happens at ``t``, and the
        requeue batch it asks for fires a second after ``t``."""
        self.queue.at(t)
        if kind in (DONE, RELEASE):
            # Kueue frees the quota during the second, not on it: a job created on the next second
            # comes before the requeue batch this change sets off (``settle_world``)
            self.queue.twin.advance_to(t * 1000 + MID_SECOND_MS)
        super().handle(t, kind, subject)

    def enter(self, t: int, run: JobRun) -> None:
        self.queue.submit(run.job, run.ask, self.queue_order.get(run.key, t))
        self.kueue_dirty = True

    def ended(self, run: JobRun) -> None:
        self.free_quota(run, run.attempt)
        self.queue.finish(run.key)
        self.kueue_dirty = True

    def settle_world(self, t: int) -> None:
        if not self.kueue_dirty:
            return
        self.kueue_dirty = False
        self.kueue_cycles(t)
        # a timer of Kueue's due later within this second (the requeue batch of a quota freed
        # mid-second, ``MID_SECOND_MS``) fires after the instant's own cycles
        fired: int | None = None
        while (due := self.queue.due()) is not None and due < (t + 1) * 1000 and self.queue.twin.queues.parked():
            if due == fired:
                break  # nothing fired it: leave it to its instant
            fired = due
            self.queue.twin.advance_to(due)
            self.kueue_cycles(t)
        wake = self.queue.wake()
        if wake is not None and (self.kueue_wake is None or self.kueue_wake <= t or wake < self.kueue_wake):
            self.kueue_wake = max(wake, t + 1)
            self.push(self.kueue_wake, KUEUE, None)

    def kueue_cycles(self, t: int) -> None:
        by_key = self.by_key
        for result in self.queue.cycles(t):
            for victim in result.preempted:
                self.preempted(t, victim)
            for admitted in result.admitted:
                self.admitted(t, admitted)
            for pending in result.pending:
                run = by_key.get(pending.workload)
                if run is not None:
                    attempt = run.attempts[-1]
                    attempt.reason, attempt.message = pending.reason, pending.message
            if result.admitted and self.place_dirty:
                # the pods of what this cycle admitted reach kube-scheduler and bind before Kueue's
                # next cycle (well under a second on the testbed), so a workload Kueue preempts
                # again within the instant holds its node for its grace period, as a real one does
                self.place_dirty = False
                self.place_round(t)

    def handle_world(self, t: int, kind: int, subject: Any) -> None:
        if kind == TIMEOUT:
            run, number = subject
            if run.state is State.ADMITTED and run.attempt.number == number:
                self.pods_ready_timeout(t, run)
        elif kind == REQUEUE:
            self.requeue(t, *subject)
        elif kind == GONE:
            self.pods_gone(t, *subject)
        elif kind == RELEASE:
            self.quota_released(t, *subject)
        elif kind == PODS:
            run, number = subject
            if run.state is State.ADMITTED and run.attempt.number == number:
                self.placing[run.key] = run
                self.place_dirty = True
        elif kind == DONE:
            run, number = subject
            if run.state is State.RUNNING and run.attempt.number == number:
                self.succeeded.pop(run.key)
                super().finish(t, run)
        elif kind == KUEUE:
            self.kueue_dirty = True  # Kueue's timer: the parked workloads of a tree wake
        else:
            super().handle_world(t, kind, subject)

    def cannot_place(self, run: JobRun, last: Unschedulable) -> None:
        if self.recording:  # unrecorded, the scheduler gave no reasons
            run.attempt.unschedulable = last.message  # Kueue's pending reason stays the attempt's reason

    def facts(self) -> tuple[dict[str, int], dict[str, str], int]:
        return self.queue.priorities, self.queue.queues, self.queue.twin.cycle

    def admitted(self, t: int, a: Admitted) -> None:
        run = self.by_key[a.workload]
        attempt = run.attempt
        attempt.reserved = t
        attempt.cluster_queue = a.cluster_queue
        attempt.flavor = a.flavors[POD_SET][run.ask.resource]
        flavor = self.queue.flavor(attempt.flavor)
        count = a.counts[POD_SET]
        # named after the attempt: the pods of a preempted attempt may still terminate beside them
        name = f"{run.key}/{attempt.number}"
        self.set_pods(run, [pod_spec(f"{name}/{i}", run.job, run.ask, flavor) for i in range(count)])
        run.state = State.ADMITTED
        run.quota = (attempt.flavor, run.ask.resource, count * run.ask.count)
        if self.reservations is not None:
            self.reservations.append(run)
        self.watch.reserve(run.team, *run.quota)
        delay = self.config.pod_start_delay_s
        if delay:  # Kueue unsuspends the Job, the Job controller creates its pods (``PODS``)
            self.push(t + delay, PODS, (run, attempt.number))
        else:
            self.placing[run.key] = run
            self.place_dirty = True
        self.push(t + self.config.pods_ready.timeout_s, TIMEOUT, (run, attempt.number))

    def finish(self, t: int, run: JobRun) -> None:
        """The job's pods succeeded: their node frees at once, but Kueue releases the quota only once
        the Job controller has marked the Job complete and Kueue finished the Workload, a finish delay
        later (``DONE``). Meanwhile the Workload is still admitted, so Kueue may preempt it
        (``preempted``), as the testbed once showed (docs/simulate.md, world differential item 10)."""
        delay = self.delay(self.config.finish_delay_s, self.config.late_finish)
        if not delay:
            super().finish(t, run)
            return
        self.release(t, run)
        self.succeeded[run.key] = t
        self.push(t + delay, DONE, (run, run.attempt.number))

    def preempted(self, t: int, p: Preempted) -> None:
        """The victim's pods start terminating and keep their GPUs until their grace period ends
        (``pods_gone``; the job's ``termination_grace_s``, as a kubelet honours the pod's
        ``terminationGracePeriodSeconds``); its Workload keeps its quota, marked evicted, until Kueue releases it a
        release delay later (``quota_released``). Its work since the start is lost, the grace
        period included."""
        run = self.by_key[p.workload]
        if run.key in self.succeeded:
            self.preempted_after_success(t, run, p)
            return
        gone = t + run.job.termination_grace_s
        pods = [pod.name for pod in run.pods]
        if run.state is State.RUNNING:
            started = run.attempt.started
            assert started is not None
            run.work_lost += sum(run.bound[pod][0] for pod in pods) * (gone - started)
            self.waiting += 1
            self.watch.waiting(run, 1)
        self.placing.pop(run.key, None)
        self.evict(t, run, p)
        self.push(gone, GONE, (run, pods))

    def preempted_after_success(self, t: int, run: JobRun, p: Preempted) -> None:
        """Kueue preempted a Workload whose pods had already succeeded (it had not yet seen the Job
        complete): the attempt ends Preempted, nothing is lost or held, and when Kueue releases the
        quota the Job is found complete, so the Workload finishes then with no new start (the
        recorder writes it so: a second attempt, Finished, with quota and no pod)."""
        self.evict(t, run, p)

    def evict(self, t: int, run: JobRun, p: Preempted) -> None:
        """The attempt ends Preempted; a new one waits, and Kueue releases the quota a release delay later."""
        ended = run.attempt
        self.end_attempt(t, run, "Preempted", p.reason, p.message)
        ended.end_by = p.preemptor
        run.preemptions += 1
        run.state = State.TERMINATING
        attempt = run.begin(t)
        attempt.reason, attempt.message = "Preempted", p.message
        self.push(t + self.delay(self.config.release_delay_s, self.config.late_finish), RELEASE, (run, ended))

    def quota_released(self, t: int, run: JobRun, ended: Attempt) -> None:
        """Kueue cleared the victim's reservation (its Job has no active pod): the quota frees and
        it queues again, while its pods may still be terminating."""
        assert run.state is State.TERMINATING
        self.free_quota(run, ended, t)
        run.state = State.PENDING
        self.queue.released(run.key)
        self.kueue_dirty = True
        if self.succeeded.pop(run.key, None) is not None:  # its Job had completed: it finishes now
            self.queue.finish(run.key)
            attempt = run.attempt
            attempt.reserved = t
            if self.reservations is not None:
                self.reservations.append(run)
            self.end_attempt(t, run, "Finished", "Succeeded", f"Job {run.key} finished")
            attempt.released = t
            run.state = State.FINISHED

    def pods_gone(self, t: int, run: JobRun, pods: list[str]) -> None:
        """An evicted attempt's pods are gone: their GPUs free for the pods waiting for a node."""
        self.release_pods(t, run, pods)

    def pods_ready_timeout(self, t: int, run: JobRun) -> None:
        """Kueue evicts the workload and suspends its Job: the pods that found no node go at once, the
        bound ones terminate for their grace period holding their GPUs (the API server deletes an
        unscheduled pod at once and gives a scheduled one its ``terminationGracePeriodSeconds``), as
        after a preemption."""
        bound = [pod.name for pod in run.pods if pod.name in run.bound]
        grace = run.job.termination_grace_s
        if bound and grace:
            self.placing.pop(run.key, None)
            self.push(t + grace, GONE, (run, bound))
        else:
            self.release(t, run)
        message = f"Exceeded the PodsReady timeout {run.key}"
        self.end_attempt(t, run, "Evicted", "PodsReadyTimeout", message)
        self.free_quota(run, run.attempt)
        self.queue.finish(run.key)
        self.kueue_dirty = True
        run.requeues += 1
        limit = self.config.pods_ready.backoff_limit
        if limit is not None and run.requeues > limit:
            run.state = State.DEACTIVATED
            run.deactivated = True
            self.waiting -= 1
            self.watch.waiting(run, -1)
            return
        run.state = State.BACKOFF
        backoff = self.config.pods_ready.backoff(run.requeues)
        attempt = run.begin(t)
        attempt.reason, attempt.message = "Requeued", f"requeued after {backoff} s of backoff"
        self.push(t + backoff, REQUEUE, (run, t))  # requeuingStrategy.timestamp: Eviction

    def free_quota(self, run: JobRun, attempt: Attempt, t: int | None = None) -> None:
        """The Workload's reservation for ``attempt`` ends at ``t`` (None: when the attempt ended)."""
        if run.quota is not None:
            pool, resource, units = run.quota
            self.watch.reserve(run.team, pool, resource, -units)
            run.quota = None
            attempt.released = attempt.ended if t is None else t

    def requeue(self, t: int, run: JobRun, created: int) -> None:
        run.state = State.PENDING
        self.queue.submit(run.job, run.ask, created)
        self.kueue_dirty = True
