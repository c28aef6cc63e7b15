"""ReplayBuffer: groups waiting between steps in async mode.

Two kinds of groups wait here: *ready* groups (every sample generated and judged) that a later
step trains on, and *aborted* groups (some samples interrupted by a weight update) that a later
step resumes (partial rollout) or restarts. A group's version is the oldest policy version among
its samples' first tokens; `expire` removes groups too stale to train on. The buffer knows
nothing about models: it only stores samples, and its `state_dict` is plain data for checkpoints.
"""

from __future__ import annotations

import dataclasses

from workers.rl.sample import Sample, SampleStatus

Group = list[Sample]


def group_version(group: Group) -> int | None:
    """Policy version of the group's oldest generated token (None: nothing generated yet)."""
    versions = [s.policy_version for s in group if s.response_ids]
    return min(versions) if versions else None


def sample_to_state(sample: Sample) -> dict:
    state = dataclasses.asdict(sample)
    state["status"] = sample.status.value
    return state


def sample_from_state(state: dict) -> Sample:
    state = dict(state)
    state["status"] = SampleStatus(state["status"])
    return Sample(**state)


class ReplayBuffer:
    ORDERS = ("fifo", "most_stale")

    def __init__(self, order: str = "fifo"):
        if order not in self.ORDERS:
            raise ValueError(f"unknown buffer order {order!r} (use one of {self.ORDERS})")
        self.order = order
        self.ready: list[Group] = []
        self.aborted: list[Group] = []

    def __len__(self) -> int:
        return len(self.ready) + len(self.aborted)

    def put_ready(self, group: Group) -> None:
        self.ready.append(group)

    def put_aborted(self, group: Group) -> None:
        self.aborted.append(group)

    def take_ready(self, count: int) -> list[Group]:
        """Up to `count` ready groups: oldest first in insertion order (fifo) or by version."""
        if self.order == "most_stale":
            # sorted() is stable: equal versions keep their insertion order.
            self.ready.sort(key=lambda g: group_version(g) if group_version(g) is not None else 1 << 62)
        taken, self.ready = self.ready[:count], self.ready[count:]
        return taken

    def take_aborted(self) -> list[Group]:
        taken, self.aborted = self.aborted, []
        return taken

    def expire(self, version: int, max_staleness: int) -> list[Group]:
        """Remove (and mark EXPIRED) every group whose oldest token is more than `max_staleness`
        versions behind `version`: training on it now would exceed the staleness bound."""
        expired: list[Group] = []

        def keep(group: Group) -> bool:
            v = group_version(group)
            if v is not None and version - v > max_staleness:
                for s in group:
                    s.status = SampleStatus.EXPIRED
                expired.append(group)
                return False
            return True

        self.ready = [g for g in self.ready if keep(g)]
        self.aborted = [g for g in self.aborted if keep(g)]
        return expired

    def stats(self) -> dict[str, float]:
        return {"buffer/ready_groups": float(len(self.ready)), "buffer/aborted_groups": float(len(self.aborted))}

    def state_dict(self) -> dict:
        return {
            "order": self.order,
            "ready": [[sample_to_state(s) for s in g] for g in self.ready],
            "aborted": [[sample_to_state(s) for s in g] for g in self.aborted],
        }

    def load_state_dict(self, state: dict) -> None:
        self.order = state.get("order", self.order)
        self.ready = [[sample_from_state(s) for s in g] for g in state["ready"]]
        self.aborted = [[sample_from_state(s) for s in g] for g in state["aborted"]]
