"""A grading worker's account of a notebook nbgrader could not grade names the exception that stopped it."""

from __future__ import annotations

import traceback

from nbgrader.utils import capture_log
from traitlets.config import Application

from autograder.worker import _problem


class FailingConverter(Application):
    """Logs a failure as nbgrader's converters do (`nbgrader.converters.base`), then gives up."""

    def start(self) -> None:
        try:
            raise OSError(28, "No space left on device")
        except Exception:
            self.log.error("There was an error processing assignment: %s", "/course/submitted/alice/ch")
            self.log.error(traceback.format_exc())
        raise RuntimeError("Please see the error log for details on the specific errors on the above failures.")


def test_the_problem_names_the_exception_in_nbgraders_own_log():
    result = capture_log(FailingConverter())
    assert not result["success"] and "\n    OSError" in result["log"]  # nbgrader's formatter indents it
    assert _problem(result) == "nbgrader autograde failed: OSError: [Errno 28] No space left on device"
