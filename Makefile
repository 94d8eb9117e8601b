# Common tasks. `make setup` once, then `make book`.
# Use an existing virtual environment with e.g. `make book VENV=/path/to/venv`.

VENV    ?= .venv
PYTHON  ?= python3
BIN     := $(VENV)/bin
PORT    ?= 8000
# Debian packages: chromium renders the book in tests/test_book.py,
# bubblewrap sandboxes student code in the autograder, postgresql is the
# shared gradebook of tests/test_scale.py (its own server). Set empty to skip.
SYSTEM_PACKAGES ?= chromium bubblewrap postgresql

export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: setup system-packages book test

# ---------------------------------------------------------------- setup & book

setup: $(VENV)/.course-installed system-packages
	.ci/fetch-book-assets

$(VENV)/.course-installed: requirements.txt pyproject.toml
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install --no-deps -e .
	touch $@

system-packages:
	@missing=""; \
	for pkg in $(SYSTEM_PACKAGES); do \
	  cmd=$$pkg; [ $$pkg = bubblewrap ] && cmd=bwrap; [ $$pkg = postgresql ] && cmd=initdb; \
	  command -v $$cmd >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/$$cmd >/dev/null 2>&1 \
	    || missing="$$missing $$pkg"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	[ -n "$$missing" ] || exit 0; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif sudo -n true 2>/dev/null; then sudo=sudo; \
	else echo "*** Please install these Debian packages:$$missing"; \
	     echo "***   sudo apt-get install$$missing"; exit 0; fi; \
	echo "Installing Debian packages:$$missing"; \
	$$sudo apt-get update -qq && \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing \
	  || echo "*** Could not install:$$missing"

# Build the book from scratch with warnings as errors, then serve it on
# http://localhost:$(PORT) (not when CI is set or with NO_SERVE=1).
book: setup
	rm -rf _build
	COURSE_BOOK_BUILD=1 $(BIN)/jupyter-book build . -W --keep-going
	@echo "The book: $(CURDIR)/_build/html/index.html"
	@if [ -z "$$CI" ] && [ "$(NO_SERVE)" != 1 ]; then \
	  echo "Serving it on http://localhost:$(PORT) (Ctrl-C stops)"; \
	  $(BIN)/python -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html; \
	fi

# The whole test suite; CI runs exactly this, through .ci/run. The book build
# and the hostile-submission suite (which has time limits to hit) run first,
# side by side, one worker each; then everything else on two workers, one
# chapter per worker.
# The tests' folders live in TEST_TMP, one per checkout, emptied at the start of
# each run (pytest's own clean-up of old folders is recursive and dies on the
# folder chains thousands deep that the hostile tests build).
SOLO_TESTS := tests/test_book.py tests/test_hostile.py
TEST_TMP ?= /tmp/course-tests-$(shell printf %s "$(CURDIR)" | cksum | cut -d' ' -f1)
test: setup
	$(BIN)/python -c 'import sys; from autograder.cleanup import remove_tree; remove_tree(sys.argv[1])' $(TEST_TMP) && mkdir -m 700 $(TEST_TMP)
	$(BIN)/python -m pytest -ra --durations=10 -n 2 --dist loadgroup --basetemp=$(TEST_TMP)/solo $(SOLO_TESTS)
	$(BIN)/python -m pytest -ra --durations=20 -n 2 --dist loadgroup --basetemp=$(TEST_TMP)/rest $(addprefix --ignore=,$(SOLO_TESTS))
