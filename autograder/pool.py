"""Grade students in parallel: a pool of long-lived `worker` processes.

Each worker pays nbgrader's (and torch's) start-up once, then grades one
student after another (`worker.run_task`); the pool hands the next student to
whichever worker is free. One student's failure stays theirs: a notebook
nbgrader cannot grade, a worker that dies or outlives the student's time
limit (it is killed, and a fresh worker takes its place) costs only that
student, who is tried once more before the row says why it failed. Workers
die with the grader, and their kernels with them. While a chapter is graded,
a progress line on a terminal says how far it is (`Progress`).
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .cleanup import remove_quietly
from .course_folder import Course
from .nbgrader_commands import grader_limits, nbgrader_env

ATTEMPTS = 2  # a student whose grading failed is tried once more
LOG_FILE = "workers.log"  # in the course folder: what the workers wrote to stderr


@dataclass(frozen=True)
class Task:
    """One student of a chapter: autograde and give feedback, or (a notebook
    graded by an earlier run) only give feedback again."""

    student: str
    autograde: bool = True


@dataclass
class Outcome:
    """How a student's task ended: `problem` is None when it was graded."""

    problem: str | None = None
    feedback: bool = False


class Progress:
    """One line, rewritten in place: students done / total, failures so far,
    time left. Silent unless `stream` is a terminal."""

    def __init__(self, label: str, total: int, stream: IO[str] | None = None) -> None:
        self.label, self.total, self.stream = label, total, stream or sys.stdout
        self.enabled = self.stream.isatty() and total > 0
        self.start = time.monotonic()
        self.done = self.failed = 0

    def line(self) -> str:
        left = ""
        if self.done:
            seconds = (time.monotonic() - self.start) / self.done * (self.total - self.done)
            left = f", about {seconds / 60:.0f} min left" if seconds >= 90 else f", about {seconds:.0f} s left"
        return f"{self.label}: {self.done}/{self.total} students, {self.failed} not graded{left}"

    def show(self) -> None:
        if self.enabled:
            self.stream.write(f"\r\033[K{self.line()}")
            self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")
            self.stream.flush()


class Worker:
    """One `worker` process (None until `Pool` starts it, or after it stopped) and the task it grades."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.task: Task | None = None
        self.deadline = 0.0

    def take(self) -> Task:
        task, self.task = self.task, None
        assert task is not None
        return task


class Pool:
    """`size` workers grading in the nbgrader course folder `root`; a worker that
    died or was stopped is started again when it is next needed."""

    def __init__(self, root: Path, size: int) -> None:
        self.root = root
        self.workers = [Worker() for _ in range(max(1, size))]
        self.selector = selectors.DefaultSelector()

    def __enter__(self) -> Pool:
        """Start every worker now: their start-up overlaps the chapter's set-up."""
        self.root.mkdir(parents=True, exist_ok=True)
        for w in self.workers:
            self._start(w)
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self.workers:  # idle (or abandoned, on an error): nothing of theirs is worth waiting for
            if w.proc is not None:
                self._stop(w)

    def run(self, course: Course, tasks: list[Task], seconds: float, progress: Progress) -> dict[str, Outcome]:
        """Grade the chapter's `tasks`, each within `seconds`; {student: outcome}."""
        queue, attempts, outcomes = deque(tasks), Counter[str](), {}
        progress.show()
        while queue or any(w.task for w in self.workers):
            for w in self.workers:
                if w.task is None and queue:
                    task = queue.popleft()
                    attempts[task.student] += 1
                    self._send(w, course.ch.id, task, seconds)
            for task, outcome in self._collect(seconds):
                if outcome.problem is None and task.autograde and not course.is_graded(task.student):
                    outcome = Outcome("nbgrader autograde did not finish the notebook")
                if outcome.problem and attempts[task.student] < ATTEMPTS:
                    if task.autograde:  # the retry starts from nothing of this attempt
                        remove_quietly(course.autograded(task.student))
                    queue.append(task)
                    continue
                outcomes[task.student] = outcome
                progress.done += 1
                progress.failed += outcome.problem is not None
                if outcome.problem:
                    remove_quietly(course.autograded(task.student))
            progress.show()
        progress.finish()
        return outcomes

    def _send(self, w: Worker, chapter: str, task: Task, seconds: float) -> None:
        message = json.dumps({"chapter": chapter, "student": task.student, "autograde": task.autograde})
        for fresh in (False, True):
            if w.proc is None:
                self._start(w)
            try:
                w.proc.stdin.write(message + "\n")
                w.proc.stdin.flush()
                break
            except BrokenPipeError:  # it died while idle: a fresh one takes the task
                if fresh:
                    raise
                self._stop(w)
        w.task, w.deadline = task, time.monotonic() + seconds

    def _start(self, w: Worker) -> None:
        with open(self.root / LOG_FILE, "a") as log:
            w.proc = subprocess.Popen([sys.executable, "-m", "autograder.worker", str(self.root)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.root,
                                      env=nbgrader_env(self.root), text=True, preexec_fn=grader_limits)
        self.selector.register(w.proc.stdout, selectors.EVENT_READ, w)

    def _collect(self, seconds: float) -> list[tuple[Task, Outcome]]:
        """Wait (a second at most) for results; end workers that died or ran out of time."""
        busy = [w for w in self.workers if w.task is not None]
        wait = min(w.deadline for w in busy) - time.monotonic()
        done = []
        for key, _ in self.selector.select(timeout=min(max(wait, 0.0), 1.0)):
            w: Worker = key.data
            try:
                result = json.loads(w.proc.stdout.readline())
            except ValueError:  # no line (or half of one): the process ended
                ended = self._stop(w)
                if w.task is not None:
                    done.append((w.take(), Outcome(f"the grading process died ({ended})")))
                continue
            if w.task is not None:
                done.append((w.take(), Outcome(result["problem"], result["feedback"])))
        for w in busy:
            if w.task is not None and time.monotonic() > w.deadline:
                self._stop(w)
                done.append((w.take(), Outcome(f"grading took longer than {seconds:.0f} s: stopped")))
        return done

    def _stop(self, w: Worker) -> str:
        """Kill a worker (its kernel dies with it); returns how it had ended."""
        assert w.proc is not None
        self.selector.unregister(w.proc.stdout)
        w.proc.kill()
        code = w.proc.wait()
        for pipe in (w.proc.stdout, w.proc.stdin):
            try:
                pipe.close()
            except OSError:  # unsent input to a dead process
                pass
        w.proc = None
        return f"signal {-code}" if code < 0 else f"exit code {code}"
