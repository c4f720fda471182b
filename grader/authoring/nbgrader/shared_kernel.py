"""nbgrader's Execute with one kernel for all the notebooks of a submission.

nbgrader's autograde runs each notebook in a kernel of its own: every one imports torch, and every one's test
cells start a grader of their own (grader.notebook), so a student of five notebooks pays both five times. Autograde
runs a submission's notebooks one after another in the folder they were handed in; here they share that folder's
kernel: its first notebook imports torch and starts the kernel's grading server, the next ones find both. Between
two notebooks the kernel's namespace is emptied (%reset -f), so a name one notebook defines is not there for the
next, as in a kernel of its own; imported modules stay. Another folder (the next student), or a kernel that died,
gets a fresh kernel, and the last one is shut down when nbgrader ends.
"""

import atexit
import contextlib
from typing import Any, ClassVar

from jupyter_client.manager import KernelManager
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute


class OneKernelPerSubmission(Execute):
    # the folder whose notebooks the kept kernel runs, and its kernel manager (a class attribute: nbgrader makes
    # a new preprocessor for every notebook)
    _kept: ClassVar[dict[str, Any]] = {}

    def preprocess(
        self, nb: NotebookNode, resources: Any = None, km: KernelManager | None = None
    ) -> tuple[NotebookNode, dict]:
        folder = ((resources or {}).get("metadata") or {}).get("path")
        if km is not None or not folder:
            return super().preprocess(nb, resources, km)
        kept = OneKernelPerSubmission._kept
        self._reused = kept.get("folder") == folder and _alive(kept["km"])
        if not self._reused:
            _shut_down(kept)
            self.nb = nb  # what create_kernel_manager reads the kernel's name from
            kept.update(folder=folder, km=self.create_kernel_manager())
        try:
            return super().preprocess(nb, resources, kept["km"])
        finally:
            if self.kc is not None:
                self.kc.stop_channels()

    async def async_start_new_kernel_client(self) -> Any:
        client = await super().async_start_new_kernel_client()
        if getattr(self, "_reused", False):  # the last notebook's names go; its imports stay
            await self.async_wait_for_reply(client.execute("%reset -f", silent=True, store_history=False))
        return client

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # nbclient's binds its own async method


def _alive(km: KernelManager) -> bool:
    try:
        return bool(run_sync(km.is_alive)())
    except Exception:
        return False


def _shut_down(kept: dict[str, Any]) -> None:
    if kept.get("km") is not None:
        with contextlib.suppress(Exception):
            run_sync(kept["km"].shutdown_kernel)()  # asked to end: its exit handlers stop its grading server
    kept.clear()


atexit.register(_shut_down, OneKernelPerSubmission._kept)
