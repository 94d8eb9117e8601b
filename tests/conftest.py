import os
import sys
import tempfile
from pathlib import Path

from course.protocol import SECRET_ENV

sys.path.insert(0, str(Path(__file__).parent))  # tests/submissions.py and tests/mutants/

# Grading runs in the tests use a secret of their own, never the instructor's
# (~/.config/transformer-course/grading-secret); `grade` creates it on first use.
os.environ.setdefault(SECRET_ENV, str(Path(tempfile.mkdtemp(prefix="course-tests-")) / "grading-secret"))
