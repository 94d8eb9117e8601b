#!/usr/bin/env bash
# Grade a large class on a Slurm cluster: one shard of the students per task
# of a job array, every shard writing into one shared PostgreSQL gradebook,
# then one merge step (a job that waits for the array) writing a single
# grades.csv, the feedback and the report.
#
#   bash deploy/slurm/grade-array.sh submit     # submits the array, then the merge after it
#
# Settings (environment, or edit the defaults below): COURSE, the checkout of
# this repository with its environment (`make setup`); SUBMISSIONS (from
# `python -m autograder collect`) and OUT, on a file system every node sees;
# GRADEBOOK_URL, the PostgreSQL gradebook, with its password in PGPASSWORD or
# ~/.pgpass (never in the URL: it would be in the job's command line); SECRET,
# the course's grading secret, the same for every shard.
#
# The sandbox. `grade` runs each notebook's kernel in bubblewrap. A Slurm job
# runs as you, not root, so bubblewrap makes an unprivileged user namespace:
# the compute nodes must allow them (Debian: sysctl
# kernel.unprivileged_userns_clone=1; RHEL and others: user.max_user_namespaces
# above 0; Ubuntu 24.04: kernel.apparmor_restrict_unprivileged_userns=0 or an
# AppArmor profile for bwrap), and bwrap must be installed there
# (apt-get install bubblewrap). Kernels then run as your uid, without a
# per-kernel process limit; Slurm's cgroup (--mem, --cpus-per-task) caps the
# whole shard. When the sandbox cannot start, `grade` refuses to grade: the
# task fails, and no student code runs unconfined.
#
#SBATCH --job-name=grade-shards
#SBATCH --array=0-3
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --time=04:00:00
#SBATCH --output=grade-%A_%a.log
set -euo pipefail

COURSE=${COURSE:-$HOME/transformer-course}
SUBMISSIONS=${SUBMISSIONS:-$COURSE/submitted}
OUT=${OUT:-$COURSE/grading}
SECRET=${SECRET:-$HOME/.config/transformer-course/grading-secret}
GRADEBOOK_URL=${GRADEBOOK_URL:?set GRADEBOOK_URL, e.g. postgresql://grader@db.example.org/course}
PYTHON=$COURSE/.venv/bin/python

if [ "${1:-}" = submit ]; then
  # The array as this file sets it, then the merge once every shard succeeded.
  array=$(sbatch --parsable --export=ALL "${BASH_SOURCE[0]}")
  shards=$(sed -n 's/^#SBATCH --array=0-\([0-9]*\)$/\1/p' "${BASH_SOURCE[0]}")
  folders=$(for i in $(seq 0 "$shards"); do printf '%q ' "$OUT/shard-$i"; done)
  sbatch --parsable --export=ALL --dependency="afterok:${array}" --job-name=grade-merge \
    --cpus-per-task=1 --mem=4G --time=00:30:00 --output=grade-merge-%j.log \
    --wrap "cd $(printf '%q' "$COURSE") && $(printf '%q' "$PYTHON") -m autograder merge $(printf '%q' "$OUT/merged") $folders --db \"\$GRADEBOOK_URL\""
  exit 0
fi

: "${SLURM_ARRAY_TASK_ID:?run this as a Slurm array task (sbatch), or with: bash $0 submit}"
cd "$COURSE"
exec "$PYTHON" -m autograder grade "$SUBMISSIONS" \
  --out "$OUT/shard-$SLURM_ARRAY_TASK_ID" \
  --shard "$SLURM_ARRAY_TASK_ID/${SLURM_ARRAY_TASK_COUNT}" \
  --db "$GRADEBOOK_URL" \
  --secret "$SECRET" \
  --workers "${SLURM_CPUS_PER_TASK:-1}"
