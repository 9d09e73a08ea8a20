"""The console commands `grove` and `groved` that a wheel installs (pyproject.toml's
[project.scripts]; scripts/build-wheel.sh bundles the executables at groveml/bin/).

A module of its own beside the package rather than inside it: importing groveml (numpy, the
extension) would cost every command more than starting Python does.

Each replaces this Python process with the bundled executable (exec, not a child process), so that
the arguments, the standard streams, the signals a supervisor sends (groved's graceful shutdown on
SIGTERM) and the exit status are the program's own. The executables are found beside this file
rather than through sysconfig, so that an install with --user, --prefix or --target finds them too.
"""

import os
import sys


def _bundled(name):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "groveml", "bin", name)


def _exec(name):
    path = _bundled(name)
    if not os.access(path, os.X_OK):
        # `pip install .` builds the extension only (pyproject.toml's defaults), so its entry points
        # have nothing to run: say so rather than fail with Python's FileNotFoundError.
        sys.stderr.write(
            f"{name}: this installation of groveml has no {name} executable ({path} is missing): "
            f"`pip install .` builds the Python extension only; a wheel from "
            f"scripts/build-wheel.sh bundles grove and groved (docs/python.md, Install)\n")
        return 127
    os.execv(path, [name] + sys.argv[1:])
    return 127  # not reached: execv returns only by raising


def grove():
    return _exec("grove")


def groved():
    return _exec("groved")
