"""The course's command line: ``python -m autograder COMMAND``.

  release [CHAPTER ...]              regenerate chapters/ (and course/reference/) from solutions/
  check NOTEBOOK                     a student's self-check: run the visible tests, show the score
  collect ARCHIVE --chapter CH --into SUBMISSIONS [--timezone ZONE]
                                     unpack an LMS export (Canvas, Moodle, zip of folders) for grading
  grade SUBMISSIONS --out OUT [--secret FILE] [--workers N] [--shard I/N] [--db URL]
                                     autograde a class in a sandbox: OUT/grades.csv, OUT/feedback/
  merge OUT SHARD_OUT... [--db URL]  one grades.csv, feedback/ and report/ from the OUT folders of shards
  formgrader OUT [--port N]          nbgrader's formgrader on the course folder `grade` wrote, for manual grading
  export OUT --lms canvas|moodle [--roster FILE] [--chapter CH] [--missing-as-zero]
                                     grades.csv in the LMS's import format: OUT/lms/
  report OUT [--db URL]              the instructor's report again (after manual grading): OUT/report/
  edition DEST [--now WHEN] [--url URL] [--git] [--yes]
                                     the student edition: no answers but those of chapters already due
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NoReturn

from course.protocol import SECRET_ENV

from .chapters import all_chapters, get_chapter
from .sandbox import CELL_SECONDS, WALL_SECONDS
from .secret import DEFAULT_SECRET


DB_HELP = ("the gradebook, an SQLAlchemy URL such as postgresql://grader@db.example.org/course (shards may "
           "share it; give the password in PGPASSWORD or ~/.pgpass, not in the URL); default: "
           "SQLite in OUT/nbgrader")


Fail = Callable[[str], NoReturn]  # argparse's `error`: prints the usage and the message, exits with status 2


@dataclass(frozen=True)
class Command:
    """One subcommand: its one-line help, its arguments, and what it does (its exit status; None is 0)."""

    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Fail], int | None]


def _release_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("chapters", nargs="*", help="chapter ids (default: all)")


def _release(args: argparse.Namespace, fail: Fail) -> None:
    from .release import release
    release([get_chapter(c) for c in args.chapters] or all_chapters())


def _check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("notebook", type=Path)


def _check(args: argparse.Namespace, fail: Fail) -> int:
    from .selfcheck import self_check
    if args.notebook.is_dir():
        inside = sorted(args.notebook.glob("*.ipynb"))
        fail(f"{args.notebook} is a folder: give the notebook's path" + (f", e.g. {inside[0]}" if inside else ""))
    if not args.notebook.is_file():
        fail(f"no such notebook: {args.notebook}")
    score, total = self_check(args.notebook)
    return 0 if score == total else 1


def _collect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("archive", type=Path)
    p.add_argument("--chapter", required=True, help="the chapter id the archive holds")
    p.add_argument("--into", type=Path, required=True, help="the SUBMISSIONS folder to fill")
    p.add_argument("--timezone", help="the zone of the archive's local zip times (default: schedule.yml's)")


def _collect(args: argparse.Namespace, fail: Fail) -> None:
    import zipfile

    from .collect import collect
    get_chapter(args.chapter)
    if not args.archive.is_file() or not zipfile.is_zipfile(args.archive):
        fail(f"{args.archive} is not a zip file: collect reads the zip an LMS exports (Moodle's 'Download "
             f"all submissions', Canvas's 'Download Submissions'); notebooks in folders go into "
             f"{args.into}/<student_id>/{args.chapter}/ by hand (README, step 4)")
    found = collect(args.archive, args.chapter, args.into, args.timezone)
    print(f"collected {len(found)} notebook(s) into {args.into}")


def _grade_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("submissions", type=Path, help="SUBMISSIONS/<student_id>/<chapter_id>/<notebook>.ipynb")
    p.add_argument("--out", type=Path, required=True, help="where grades.csv and feedback/ go")
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="run student code without the sandbox (only for code you trust)")
    p.add_argument("--secret", type=Path, metavar="FILE",
                   help="the course's grading secret, which seeds hidden test cases; made if missing "
                        f"(default: ${SECRET_ENV}, else ~/.config/{DEFAULT_SECRET})")
    p.add_argument("--cell-timeout", type=int, metavar="SECONDS",
                   help=f"interrupt a cell after this long (default: the chapter's own, else {CELL_SECONDS})")
    p.add_argument("--wall-timeout", type=int, metavar="SECONDS",
                   help=f"kill a notebook's kernel after this long in all (default: the chapter's own, "
                        f"else {WALL_SECONDS})")
    p.add_argument("--workers", type=int, metavar="N",
                   help=f"grade N students at a time (default: the machine's cores, {os.cpu_count()})")
    p.add_argument("--shard", metavar="I/N",
                   help="grade only share I (0 to N-1) of the students; merge the shards' OUT folders after")
    p.add_argument("--db", metavar="URL", help=DB_HELP)


def _grade(args: argparse.Namespace, fail: Fail) -> None:
    from .grade import grade
    from .shards import Shard
    if not args.submissions.is_dir():
        fail(f"no such folder: {args.submissions}")
    if any(t is not None and t < 1 for t in (args.cell_timeout, args.wall_timeout)):
        fail("timeouts must be at least 1 second")
    if args.workers is not None and args.workers < 1:
        fail("--workers must be at least 1")
    try:
        shard = Shard.parse(args.shard) if args.shard else None
    except ValueError as err:
        fail(str(err))
    rows = grade(args.submissions, args.out, use_sandbox=not args.unsafe_no_sandbox, secret=args.secret,
                 cell_seconds=args.cell_timeout, wall_seconds=args.wall_timeout, workers=args.workers,
                 shard=shard, db=args.db)
    print(f"wrote {args.out / 'grades.csv'} ({len(rows)} rows)")


def _merge_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, help="the folder to write")
    p.add_argument("shards", type=Path, nargs="+", help="the shards' OUT folders")
    p.add_argument("--db", metavar="URL", help="the shards' shared gradebook: read the scores from it again "
                                               "(grades given by hand included)")


def _merge(args: argparse.Namespace, fail: Fail) -> None:
    from .shards import merge
    missing = [str(s) for s in args.shards if not (s / "grades.csv").is_file()]
    if missing:
        fail(f"no grades.csv in {', '.join(missing)}: grade those shards first")
    rows = merge(args.out, args.shards, args.db)
    print(f"wrote {args.out / 'grades.csv'} ({len(rows)} rows from {len(args.shards)} shard(s))")


def _formgrader_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, help="the OUT folder `grade` wrote")
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--print", action="store_true", help="only print the command and folder")


def _formgrader(args: argparse.Namespace, fail: Fail) -> int | None:
    import subprocess

    from .manual import formgrader_command
    argv, cwd, env = formgrader_command(args.out, args.port)
    print(f"in {cwd}: {' '.join(argv)}\nthen open Nbgrader > Formgrader (Manual grading) in JupyterLab")
    if not args.print:
        return subprocess.run(argv, cwd=cwd, env={**os.environ, **env}, check=False).returncode
    return None


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, help="the OUT folder `grade` wrote")
    p.add_argument("--lms", choices=("canvas", "moodle"), required=True)
    p.add_argument("--roster", type=Path, help="CSV: student_id and any of name, email, sis_user_id, "
                                               "sis_login_id, section")
    p.add_argument("--chapter", action="append",
                   help="export this chapter, due or not (repeatable; default: every chapter past its due date)")
    p.add_argument("--missing-as-zero", action="store_true",
                   help="give 0 to a student who handed in no notebook, once the chapter's due date and their "
                        "extension have passed (default: a blank grade)")


def _export(args: argparse.Namespace, fail: Fail) -> None:
    from .lms import export
    for chapter in args.chapter or []:
        get_chapter(chapter)  # an unknown id stops here, with the known ones
    for path in export(args.out, args.lms, args.roster, args.chapter, args.missing_as_zero):
        print(f"wrote {path}")


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, help="the OUT folder `grade` wrote")
    p.add_argument("--db", metavar="URL", help="the gradebook, if not OUT's own (grade --db)")


def _report(args: argparse.Namespace, fail: Fail) -> None:
    from .report import write_report
    from .results import refresh
    if not (args.out / "grades.csv").is_file():
        fail(f"no grades.csv in {args.out}: run grade first")
    refresh(args.out, args.db)
    print(f"wrote {write_report(args.out)}")


def _edition_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dest", type=Path, help="the folder to write (an earlier edition there is replaced)")
    p.add_argument("--now", help="the date the edition is built as of (ISO 8601, default: now; UTC unless "
                                 "it says otherwise)")
    p.add_argument("--url", help="the repository the edition is published at (launch buttons, Colab install)")
    p.add_argument("--git", action="store_true", help="commit it in DEST's own git repository (made if missing)")
    p.add_argument("--yes", action="store_true", help="publish answers not in the earlier edition without asking "
                                                      "(e.g. from cron)")


def _edition(args: argparse.Namespace, fail: Fail) -> None:
    from .edition import build_edition, parse_when
    due = build_edition(args.dest, parse_when(args.now) if args.now else None, args.url, args.git,
                        confirm=None if args.yes else confirm_answers)
    print(f"wrote the student edition to {args.dest}, with the answers of: {', '.join(due) or 'no chapter'}")


#: the subcommands, in the order `--help` lists them
COMMANDS: dict[str, Command] = {
    "release": Command("regenerate student notebooks from solutions/", _release_arguments, _release),
    "check": Command("run a notebook's visible tests and show the score", _check_arguments, _check),
    "collect": Command("turn an LMS zip export into SUBMISSIONS/<student>/<chapter>/", _collect_arguments, _collect),
    "grade": Command("autograde every submission in a folder", _grade_arguments, _grade),
    "merge": Command("one grades.csv, feedback/ and report/ from the OUT folders of shards", _merge_arguments, _merge),
    "formgrader": Command("open nbgrader's formgrader on OUT/nbgrader (manual grading)", _formgrader_arguments,
                          _formgrader),
    "export": Command("write grades.csv in Canvas's or Moodle's import format", _export_arguments, _export),
    "report": Command("rewrite OUT/report/ from the gradebook (after manual grading)", _report_arguments, _report),
    "edition": Command("build the student edition: no answers of chapters not yet due", _edition_arguments,
                       _edition),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        command.arguments(sub.add_parser(name, help=command.help))
    args = parser.parse_args(argv)
    status = COMMANDS[args.command].run(args, parser.error)
    return 0 if status is None else status


def confirm_answers(chapters: list[str]) -> bool:
    """Ask on the terminal before an edition publishes the answers of `chapters`; refuse without one."""
    question = f"Publish the answers of {', '.join(chapters)} to students?"
    if not sys.stdin.isatty():
        print(f"{question} Not on a terminal: pass --yes to publish them.", file=sys.stderr)
        return False
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


if __name__ == "__main__":
    sys.exit(main())
