"""The course's command line: ``python -m autograder COMMAND``.

  release [CHAPTER ...]              regenerate chapters/ (and course/reference/) from solutions/
  check NOTEBOOK                     a student's self-check: run the visible tests, show the score
  collect ARCHIVE --chapter CH --into SUBMISSIONS
                                     unpack an LMS export (Canvas, Moodle, zip of folders) for grading
  grade SUBMISSIONS --out OUT [--secret FILE]
                                     autograde a class in a sandbox: OUT/grades.csv, OUT/feedback/
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course.protocol import SECRET_ENV

from .chapters import all_chapters, get_chapter
from .sandbox import CELL_SECONDS, WALL_SECONDS
from .secret import DEFAULT_SECRET


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("release", help="regenerate student notebooks from solutions/")
    p.add_argument("chapters", nargs="*", help="chapter ids (default: all)")

    p = sub.add_parser("check", help="run a notebook's visible tests and show the score")
    p.add_argument("notebook", type=Path)

    p = sub.add_parser("collect", help="turn an LMS zip export into SUBMISSIONS/<student>/<chapter>/")
    p.add_argument("archive", type=Path)
    p.add_argument("--chapter", required=True, help="the chapter id the archive holds")
    p.add_argument("--into", type=Path, required=True, help="the SUBMISSIONS folder to fill")

    p = sub.add_parser("grade", help="autograde every submission in a folder")
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

    args = parser.parse_args(argv)
    if args.command == "release":
        from .release import release
        release([get_chapter(c) for c in args.chapters] or all_chapters())
    elif args.command == "check":
        from .selfcheck import self_check
        if not args.notebook.is_file():
            parser.error(f"no such notebook: {args.notebook}")
        score, total = self_check(args.notebook)
        return 0 if score == total else 1
    elif args.command == "collect":
        from .collect import collect
        get_chapter(args.chapter)
        found = collect(args.archive, args.chapter, args.into)
        print(f"collected {len(found)} notebook(s) into {args.into}")
    elif args.command == "grade":
        from .grade import grade
        if not args.submissions.is_dir():
            parser.error(f"no such folder: {args.submissions}")
        if any(t is not None and t < 1 for t in (args.cell_timeout, args.wall_timeout)):
            parser.error("timeouts must be at least 1 second")
        rows = grade(args.submissions, args.out, use_sandbox=not args.unsafe_no_sandbox, secret=args.secret,
                     cell_seconds=args.cell_timeout, wall_seconds=args.wall_timeout)
        print(f"wrote {args.out / 'grades.csv'} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
