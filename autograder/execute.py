"""nbgrader's Execute preprocessor, hardened for untrusted notebooks.

* Output floods: nbclient keeps every output message in the grader's memory.
  `GuardedExecute` stores at most `max_output_bytes` per notebook and drops
  the rest (the judge never reads outputs anyway).
* Kernel death (``os._exit``, a killed kernel, the sandbox's wall-clock
  limit): nbclient raises and nbgrader would discard the whole notebook.
  `GuardedExecute` keeps the cells that ran, so the judge can still credit
  the checks recorded before the kernel died, and notes what happened in a
  status file that `grade` reports in grades.csv.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Integer, Unicode


def status_path(status_dir: str | Path, student: str, assignment: str) -> Path:
    return Path(status_dir) / f"{student}--{assignment}.json"


class GuardedExecute(Execute):
    max_output_bytes = Integer(2_000_000, help="outputs kept per notebook").tag(config=True)
    status_dir = Unicode("", help="where to note kernel deaths and floods").tag(config=True)
    wall_seconds = Integer(600, help="the sandbox's wall-clock limit (for the message)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict, km=None):
        self._kept = 0
        self._flooded = False
        problem = None
        start = time.monotonic()
        try:
            nb, resources = super().preprocess(nb, resources, km=km)
        except (DeadKernelError, CellTimeoutError, RuntimeError) as err:
            elapsed = time.monotonic() - start
            if elapsed >= self.wall_seconds - 5:
                problem = f"kernel killed after the {self.wall_seconds} s time limit"
            else:
                problem = f"kernel died ({type(err).__name__})"
            self.log.warning("%s: %s", resources["nbgrader"]["student"], problem)
        info = resources["nbgrader"]
        note = {"problem": problem, "output_truncated": self._flooded}
        if self.status_dir:
            path = status_path(self.status_dir, info["student"], info["assignment"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(note))
        return nb, resources

    def output(self, outs, msg, display_id, cell_index):
        size = len(json.dumps(msg.get("content", {}), default=str))
        self._kept += size
        if self._kept > self.max_output_bytes:
            self._flooded = True
            return None
        return super().output(outs, msg, display_id, cell_index)
