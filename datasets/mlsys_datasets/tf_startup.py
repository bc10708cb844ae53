"""Keep TensorFlow's start-up lines out of notebooks.

TensorFlow's C++ libraries write to file descriptor 2 while `import tensorflow` loads them, before
absl logging is initialised, so TF_CPP_MIN_LOG_LEVEL does not stop them: "WARNING: All log
messages before absl::InitializeLog() is called are written to STDERR", "Could not find cuda
drivers on your machine", "failed call to cuInit: CUDA error" (on any laptop without a GPU). A
kernel forwards fd 2 into the notebook, where they read like failures.

`quiet_first_import()` installs an import hook that, on the first import of ``tensorflow`` in the
process (whoever asks for it: Keras, tf2onnx, a notebook cell), points fd 2 at a temporary file
for the length of that import only and puts fd 2 back afterwards. If the import fails, what was
captured is written to stderr before the error propagates, so a broken installation still says
why. It also sets TF_CPP_MIN_LOG_LEVEL to 3 unless the caller chose a level: the CUDA probe on
the first op logs "failed call to cuInit" at ERROR level, after the import. TensorFlow's real
errors still reach Python as exceptions with their messages.

Asking for the logs: set TF_CPP_MIN_LOG_LEVEL=0 before the first import and nothing is hidden.

The workbench's packages call `quiet_first_import()` when imported; it imports nothing heavy and
never TensorFlow itself.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import tempfile
import threading

__all__ = ["quiet_first_import", "logs_requested"]

_LOG_LEVEL_VAR = "TF_CPP_MIN_LOG_LEVEL"


def logs_requested() -> bool:
    """True when the user asked for TensorFlow's logs (TF_CPP_MIN_LOG_LEVEL=0)."""
    return os.environ.get(_LOG_LEVEL_VAR, "").strip() == "0"


class _QuietLoader(importlib.abc.Loader):
    """Runs the real loader of the ``tensorflow`` package with fd 2 pointed at a temporary file."""

    def __init__(self, finder: _QuietFirstImport, loader):
        self._finder = finder
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # The module must see its real loader (importlib.resources and pkgutil ask it).
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        with _stderr_fd_captured() as replay_on_error:
            try:
                self._loader.exec_module(module)
            except BaseException:
                replay_on_error()
                raise
        self._finder.done()


class _QuietFirstImport(importlib.abc.MetaPathFinder):
    """A meta-path finder that only wraps the loader of the top-level ``tensorflow`` package."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow" or logs_requested():
            return None
        # tensorflow is an ordinary package on sys.path; PathFinder is what would find it next.
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _QuietLoader(self, spec.loader)
        return spec

    def done(self):
        # One import per process makes the noise; later imports come from sys.modules.
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


class _stderr_fd_captured:
    """fd 2 -> a temporary file for the `with` body; yields a function that replays the capture."""

    # dup2 on fd 2 is process-wide: two threads importing at once must not interleave.
    _lock = threading.Lock()

    def __enter__(self):
        self._lock.acquire()
        for stream in (sys.stderr, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()   # Python's buffered text goes where it was meant to
            except (OSError, ValueError):
                pass
        self._capture = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._capture.fileno(), 2)
        return self._replay

    def _replay(self):
        os.dup2(self._saved, 2)
        self._capture.seek(0)
        data = self._capture.read()
        if data:
            os.write(2, data)

    def __exit__(self, *exc):
        try:
            os.dup2(self._saved, 2)
        finally:
            os.close(self._saved)
            self._capture.close()
            self._lock.release()
        return False


def quiet_first_import() -> None:
    """Silence TensorFlow's start-up lines for this process (idempotent; see the module doc)."""
    os.environ.setdefault(_LOG_LEVEL_VAR, "3")
    if "tensorflow" in sys.modules or logs_requested():
        return
    if not any(isinstance(f, _QuietFirstImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietFirstImport())
