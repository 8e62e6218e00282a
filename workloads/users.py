"""Locust users: thin shells over the workload objects.

Importing this module imports Locust, which monkey-patches the interpreter with
gevent: only the load process (workloads.runner) imports it. A user builds its
workload object from the process's `LoadContext`, runs one workload iteration per
task, and closes the workload when Locust stops it. Everything the history and the
statistics see happens in the workload (workloads.workload).

`user_classes(config, workers)` makes the run's classes: the transactional kinds
weighted by `workload.mix` (one kind for a plain scenario), plus `feeders` feeder
users, `verifiers` verifying consumers and `ctp_cumulative_users` cumulative
consume-transform-produce users per load process as Locust fixed-count users
(spawned first). Locust spreads fixed-count users over the workers round
robin, so with workers each gets about its share.
"""

from __future__ import annotations

from typing import ClassVar

from locust import User, constant, task

from harness.config import RunConfig, WorkloadKind
from workloads.ackonly import AckOnly
from workloads.atomic import AtomicProduce
from workloads.context import LoadContext
from workloads.ctp import ConsumeTransformProduce
from workloads.ctp_cumulative import CumulativeConsumeTransformProduce
from workloads.feeder import Feeder
from workloads.topology import fixed_users, helper_users_per_process, workload_kinds
from workloads.verifier import Verifier
from workloads.workload import Workload

WORKLOADS: dict[WorkloadKind, type[Workload]] = {
    WorkloadKind.ATOMIC_PRODUCE: AtomicProduce,
    WorkloadKind.CONSUME_TRANSFORM_PRODUCE: ConsumeTransformProduce,
    WorkloadKind.ACK_ONLY: AckOnly,
}


class WorkloadUser(User):
    """A Locust user that runs one workload object."""

    abstract = True
    wait_time = constant(0)
    workload_type: ClassVar[type[Workload]]

    def __init__(self, environment: object) -> None:
        super().__init__(environment)
        self.workload = self.workload_type(LoadContext.of(environment))

    @task
    def iteration(self) -> None:
        self.workload.step()

    def on_stop(self) -> None:
        self.workload.close()


def _user_class(name: str, workload: type[Workload], *, weight: int = 1, fixed_count: int = 0) -> type[User]:
    return type(name, (WorkloadUser,), {"workload_type": workload, "weight": weight, "fixed_count": fixed_count,
                                         "abstract": False, "__module__": __name__})


def user_classes(config: RunConfig, processes: int | None = None) -> tuple[list[type[User]], int]:
    """The run's user classes and the number of users to start (see the module docstring).

    `processes` is how many load processes share the users (default: the config's local and
    remote workers, or 1); feeders and verifiers are per process."""
    workload = config.workload
    kinds = workload_kinds(config)
    processes = config.load.processes if processes is None else max(1, processes)
    classes: list[type[User]] = []
    for kind in kinds:
        weight = workload.mix.get(kind, 0) if workload.kind is WorkloadKind.MIXED else 1
        classes.append(_user_class(f"{WORKLOADS[kind].__name__}User", WORKLOADS[kind], weight=weight))
    helpers = helper_users_per_process(config)
    if helpers.feeders:
        classes.append(_user_class("FeederUser", Feeder, fixed_count=helpers.feeders * processes))
    if helpers.verifiers:
        classes.append(_user_class("VerifierUser", Verifier, fixed_count=helpers.verifiers * processes))
    if helpers.ctp_cumulative:
        classes.append(_user_class("CumulativeConsumeTransformProduceUser", CumulativeConsumeTransformProduce,
                                   fixed_count=helpers.ctp_cumulative * processes))
    return classes, config.load.users + fixed_users(config, processes)
