#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu 22.04 or 24.04).
# AUTOGRADER_ROOT exists so that the repository's tests can run it against a temporary tree instead
# of /autograder (as run_autograder's does).
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
# bubblewrap confines learner code. Where the container forbids the namespaces it needs, run_autograder's
# --sandbox isolated runs learner code as "nobody" (and under Landlock where the kernel has it) once it has
# proven that such a process cannot open the reference, or gives every submission 0 and says why.
apt-get install -y --no-install-recommends python3 python3-venv bubblewrap ca-certificates
PYTHON=python3
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
    PYTHON=python3.11
fi
"$PYTHON" -m venv "$ROOT/venv"
# The CPU wheel of the pinned torch, alone: the default index would pull several GB of CUDA packages.
# Its dependencies come with the requirements, from the default index.
"$ROOT/venv/bin/pip" install --no-cache-dir --no-deps --index-url https://download.pytorch.org/whl/cpu \
    "$(grep '^torch==' "$ROOT/source/requirements.txt")"
"$ROOT/venv/bin/pip" install --no-cache-dir -r "$ROOT/source/requirements.txt"
