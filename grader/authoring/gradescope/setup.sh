#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu 22.04 or 24.04).
set -euo pipefail
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
"$PYTHON" -m venv /autograder/venv
# The CPU wheel of the pinned torch: the default index would pull several GB of CUDA packages.
/autograder/venv/bin/pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu \
    "$(grep '^torch==' /autograder/source/requirements.txt)"
/autograder/venv/bin/pip install --no-cache-dir -r /autograder/source/requirements.txt
