#!/usr/bin/env python3
"""Checks the include layering of the code base (docs/engineering.md, "Layers").

Every folder below may include only the folders its rule lists (itself always); a rule covers the
folder's subfolders. Inside a folder, the engine and protocol subfolders (NESTED) may include the
folder's own files and only the sibling subfolders their line lists; the folder's own files may
include every subfolder (they are the seams that choose between them), but an engine of core/ may
not include a seam module (a header and its sources) that includes the engine's subfolder: no
include cycle between a seam and an engine. A violation is printed as
"path:line: <folder> may not include <target>" and the exit status is 1. Tests, benches and
fuzzers may include anything; they are not checked.

Usage: scripts/check_layers.py [repository root]
"""
import os
import re
import sys

# folder -> the folders it may include (besides itself).
RULES = {
    "core/common": set(),
    "core/gpu": {"core/common"},
    "core/io": {"core/common"},
    "core/model": {"core/common", "core/io"},
    "core/predict": {"core/common", "core/gpu", "core/io", "core/model"},
    "core/explain": {"core/common", "core/gpu", "core/io", "core/model"},
    "core/servable": {"core/common", "core/gpu", "core/io", "core/model", "core/predict",
                      "core/explain"},
    "core/auth": {"core/common", "core/io"},
    "core/batching": {"core/common"},
    "core/registry": {"core/common", "core/gpu", "core/io", "core/model", "core/batching",
                      "core/servable"},
    "core/serving": {"core/common", "core/gpu", "core/io", "core/model", "core/batching",
                     "core/servable", "core/registry"},
    "server": {"core/common", "core/gpu", "core/io", "core/model", "core/auth", "core/batching",
               "core/servable", "core/registry", "core/serving"},
    "client": {"core/common", "core/gpu", "core/io", "core/model", "core/servable"},
    "python": {"core/common", "core/gpu", "core/io", "core/model", "core/servable"},
}
# Subfolder -> the sibling subfolders it may include (besides its folder's own files).
NESTED = {
    "core/predict/cpu": set(),
    "core/predict/tahoe": {"core/predict/cpu"},  # the host path of small batches, CPU probes
    "core/explain/treeshap": set(),
    "core/explain/quadrature": set(),
    "core/explain/interventional": set(),
    "core/explain/saabas": set(),
    "server/grpc": set(),
    "server/http": set(),
    # What both protocols serve (model and shared memory control) is in server/ (control.h).
    "server/grove_v1": {"server/grpc"},
    "server/kserve": {"server/grpc", "server/http"},
}
# What an include names: the first two components under core/, else the top folder.
PROJECT_TOPS = {"core", "server", "client", "python", "tests", "bench"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".h", ".cc", ".cu", ".cuh")


def folder_of(path):
    parts = path.split("/")
    if parts[0] == "core" and len(parts) > 2:
        return "core/" + parts[1]
    return parts[0]


def subfolder_of(path):
    """The NESTED subfolder holding `path`, or its folder (folder_of) when none does."""
    for sub in NESTED:
        if path.startswith(sub + "/"):
            return sub
    return folder_of(path)


def module_of(path):
    """A header and its sources are one module: the path without its extension."""
    return os.path.splitext(path)[0]


def seam_cycles(includes):
    """Includes that close a cycle between an engine family's seams (core/predict, core/explain:
    the folder's own files) and one of its engines (a NESTED subfolder).

    `includes`: (path, line, included path) of every project include. The folder's own files (the
    seams) may include a subfolder, and a subfolder its folder's own files, but not both ways for
    one module: an engine includes the seam's interface, never the module whose sources name the
    engines (its factory table), so that no engine and its seam depend on each other.
    """
    seam_to_sub = set()  # (seam module, engine subfolder): a file of the module includes it
    for path, _, target in includes:
        sub = subfolder_of(target)
        if (sub in NESTED and subfolder_of(path) == folder_of(path) and
                folder_of(path) == folder_of(target)):
            seam_to_sub.add((module_of(path), sub))
    problems = []
    for path, line_no, target in includes:
        sub = subfolder_of(path)
        if (sub not in NESTED or not sub.startswith("core/") or
                subfolder_of(target) != folder_of(target)):
            continue
        if folder_of(target) == folder_of(path) and (module_of(target), sub) in seam_to_sub:
            problems.append(f"{path}:{line_no}: {sub} may not include {target}: its module "
                            f"includes {sub} (a cycle; include the seam's interface instead)")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    problems = []
    includes = []  # (path, line, included path) of every project include
    checked = 0
    for folder in RULES:
        base = os.path.join(root, folder)
        for dirpath, _, files in os.walk(base):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                own = folder_of(rel)
                if own != folder:
                    continue
                own_sub = subfolder_of(rel)
                checked += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line_no, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1).split("/")[0] not in PROJECT_TOPS:
                            continue
                        includes.append((rel, line_no, m.group(1)))
                        target = folder_of(m.group(1))
                        if target != folder and target not in RULES[folder]:
                            problems.append(f"{rel}:{line_no}: {folder} may not include {target} "
                                            f"({m.group(1)})")
                            continue
                        target_sub = subfolder_of(m.group(1))
                        if (target == folder and own_sub != folder and target_sub != folder and
                                target_sub != own_sub and target_sub not in NESTED[own_sub]):
                            problems.append(f"{rel}:{line_no}: {own_sub} may not include "
                                            f"{target_sub} ({m.group(1)})")
    problems += seam_cycles(includes)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) break the layering "
              "(docs/engineering.md, Layers)", file=sys.stderr)
        return 1
    print(f"check_layers: {checked} files follow the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
