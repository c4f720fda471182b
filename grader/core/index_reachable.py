"""Whether a package index can be reached, asked before the first install waits on it.

    python -m grader.core.index_reachable URL    # exit 0: try the index; exit 1: out of reach

`make grade`'s first run installs torch's CPU wheel from PyTorch's index. On a machine that cannot
reach it, pip would retry with back-off for minutes before giving up; a TCP connection that fails
within a few seconds says the same at once, so the setup says so and goes on without it. Behind a
proxy a direct connection proves nothing, so there the answer is "try" and pip, with few retries,
finds out itself. Standard library only: it runs before anything is installed.
"""

import os
import socket
import sys
from urllib.parse import urlsplit

TIMEOUT_S = 5.0
PROXY_VARIABLES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")


def reachable(url: str, timeout: float = TIMEOUT_S) -> bool:
    """A TCP connection to ``url``'s host and port opens within ``timeout`` seconds (True behind a proxy)."""
    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return True
    parts = urlsplit(url)
    if parts.scheme == "file":
        return os.path.exists(parts.path)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return True
    except OSError:  # no name, no route, refused, timed out
        return False


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m grader.core.index_reachable URL")
    sys.exit(0 if reachable(sys.argv[1]) else 1)
