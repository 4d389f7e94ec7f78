"""This rank's plans as they run: the native CoordinatedPlan that applies
them at step boundaries, in the loop's order (runtime/coordinated_plan.hpp),
from a plan file, rank 0's embedded policy or `joulepipe serve`; and what
the iteration lines say of them (the version running, its predicted
saving). A grid plan's offset between pipelines and its stop ramp are the
native object's to time (runtime/grid_timing.hpp), and to say."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional

from joulepipe import _core
from joulepipe._options import Options, Topology


class PlanRun:
    """`native` is None until a plan source is set, and after close()."""

    def __init__(self, options: Options, topology: Topology, note: Callable[[str], None]) -> None:
        self._options = options
        self._topo = topology
        self._note = note
        self.native: Any = None
        self.version = 0  # the plan version running (0: none)
        self.predicted_saving: Optional[float] = None
        self.baseline_energy_j: Optional[float] = None  # embedded: all-max clocks' energy
        self.applied: List[Dict[str, Any]] = []  # each version as it ran
        self.waits = False  # a plan file's, started at the first iteration (start_waiting)

    def _grid(self) -> Dict[str, Any]:
        """What the native object needs to time a grid plan's levers: this
        rank's pipeline and the job's last iteration."""
        return {"pipeline": self._topo.dp_rank, "last_iteration": self._options.last_iteration}

    def from_file(self, agent: Any, path: str, control: str) -> Dict[str, Any]:
        """This rank's stage plan of the plan file at `path`, from the first
        iteration on (no profiling, no coordination); its shape. Raises
        OSError or ValueError when the file cannot be used."""
        plan = _core.Plan.read(path)
        t = self._topo
        self.native = _core.CoordinatedPlan.from_plan(
            agent, plan, path, t.rank, stage=t.pp_rank, stages=t.pp, through=control,
            **self._grid())
        # Started at the first iteration, once set_shape has checked the
        # plan against the loop's shape: a plan refused then was never said
        # to be applied, and no step of it ran.
        self.waits = True
        return {"schedule": plan.schedule, "microbatches": plan.microbatches,
                "chunks": plan.chunks}

    def embedded(self, agent: Any, control: str) -> None:
        """Rank 0's plans reach this rank through the rounds (receive)."""
        self.native = _core.CoordinatedPlan.in_process(agent, self._topo.rank, through=control,
                                                       **self._grid())

    def join(self, agent: Any, job_id: str, gpu: Dict[str, Any], control: str) -> None:
        """The service's plans for this rank: the native object registers the
        rank, fetches its plan versions off the training thread and reports
        each iteration. Raises when it cannot join (bounded: registration
        and one poll without waiting)."""
        t, o = self._topo, self._options
        registration = {"dp_rank": t.dp_rank, "pp_rank": t.pp_rank, "tp_rank": t.tp_rank,
                        "available_frequencies": list(gpu["supported_sm_mhz"])}
        native = _core.CoordinatedPlan(
            agent, o.coordinator, job_id, t.rank, token=o.coordinator_token,
            registration=registration, start_wait_s=0.0, start_timeout_s=10.0,
            meter_nvml_index=gpu["nvml_index"], through=control, **self._grid())
        native.start()
        self.native = native

    def start_waiting(self) -> Optional[str]:
        """The first iteration: a plan file's plan starts; why not, if not."""
        if not self.waits:
            return None
        self.waits = False
        if self.native is None:  # refused by set_shape
            return None
        try:
            self.native.start()
        except Exception as error:
            return f"cannot start the plan {self._options.plan}: {error}"
        return None

    def drain(self) -> Optional[str]:
        """Says the native object's lines; its refusal of the plans, if any
        (said already)."""
        c = self.native
        if c is None:
            return None
        for line in c.take_log():
            self._note(line)
        stats = c.stats()
        version = int(stats["running_version"])
        if version != self.version and version > 0:
            self.version = version
            self._saving(stats["running_predicted_energy_j"])
            self.applied.append({"version": version})
        return stats["refusal"] or None

    def receive(self, mine: str) -> None:
        """Rank 0's newest plan for this rank (protocol JSON), as the rounds
        delivered it. In optimize mode it is offered to the native object,
        which applies it at the next step boundary (or refuses it, logged);
        profile mode plans and reports, and the clocks stay default."""
        if self._options.mode != "profile":
            if self.native is not None:
                self.native.offer(mine)
            return
        plan = json.loads(mine)
        self.version = int(plan["version"])
        self._saving((plan.get("predicted") or {}).get("energy_j"))
        if self.version == 1 or not self.applied:
            saving = (f"; predicted saving {self.predicted_saving * 100:.1f} % of GPU energy "
                      f"per iteration" if self.predicted_saving is not None else "")
            self._note(f"plan v{plan['version']} ready (not applied in profile mode): "
                       f"{plan['reason']}{saving}")
        self.applied.append({"version": plan["version"], "reason": plan["reason"]})

    def _saving(self, energy_j: Optional[float]) -> None:
        if self.baseline_energy_j and energy_j:
            self.predicted_saving = 1.0 - energy_j / self.baseline_energy_j

    def close(self) -> None:
        """No plan waiting in the native object is applied from now on."""
        native, self.native = self.native, None
        if native is not None:
            native.close()
