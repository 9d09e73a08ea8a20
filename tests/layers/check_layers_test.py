#!/usr/bin/env python3
"""scripts/check_layers.py passes on the repository and fails on each rule broken on purpose."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT, ROOT = sys.argv[1], sys.argv[2]


def run(root):
    return subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)


class CheckLayersTest(unittest.TestCase):
    def test_repository_follows_the_layers(self):
        r = run(ROOT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_each_broken_rule_is_named(self):
        # (file, include) pairs that break the rules of docs/engineering.md.
        cases = [
            ("core/registry/r.h", "core/explain/paths.h"),
            ("core/serving/s.cc", "core/predict/predict.h"),
            ("python/m.cc", "client/cli_local.h"),
            ("core/explain/e.cc", "core/predict/predict.h"),
            ("server/x.cc", "core/explain/explain_engine.h"),
            ("core/model/m.h", "core/servable/servable.h"),
            # A folder's rule covers its subfolders, both ways.
            ("core/predict/tahoe/t.cc", "core/explain/paths.h"),
            ("server/kserve/k.cc", "core/explain/interventional/interventional.h"),
            # Engines and protocols include only the siblings their line lists.
            ("core/explain/treeshap/t.cc", "core/explain/quadrature/quadrature.h"),
            ("core/predict/cpu/c.cc", "core/predict/tahoe/tahoe_forest.h"),
            ("server/grpc/g.cc", "server/kserve/kserve_ops.h"),
            ("server/grove_v1/g.cc", "server/kserve/kserve_ops.h"),
            # Bench code stays out of the libraries.
            ("core/gpu/g.cc", "bench/common/copy_bandwidth.h"),
        ]
        for path, include in cases:
            with self.subTest(path=path, include=include), tempfile.TemporaryDirectory() as d:
                os.makedirs(os.path.join(d, os.path.dirname(path)))
                with open(os.path.join(d, path), "w") as f:
                    f.write('#include <vector>\n#include "absl/status/status.h"\n')
                    f.write(f'#include "{include}"\n')
                r = run(d)
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(f"{path}:3: ", r.stdout)
                self.assertIn(include, r.stdout)

    def test_a_cycle_between_a_seam_and_an_engine_is_named(self):
        # The seam's source names the engine (its factory table); the engine must then include
        # the seam's interface, not the seam's own header.
        files = {
            "core/explain/e.cc": ['core/explain/e.h', 'core/explain/quadrature/q.h'],
            "core/explain/e.h": ['core/explain/s.h'],
            "core/explain/quadrature/q.cc": ['core/explain/e.h'],
        }
        with tempfile.TemporaryDirectory() as d:
            for path, includes in files.items():
                os.makedirs(os.path.join(d, os.path.dirname(path)), exist_ok=True)
                with open(os.path.join(d, path), "w") as f:
                    f.writelines(f'#include "{i}"\n' for i in includes)
            r = run(d)
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertIn("core/explain/quadrature/q.cc:1: ", r.stdout)
            with open(os.path.join(d, "core/explain/quadrature/q.cc"), "w") as f:
                f.write('#include "core/explain/s.h"\n')
            r = run(d)
            self.assertEqual(r.returncode, 0, r.stdout)

    def test_allowed_includes_pass(self):
        # (file, includes): a layer below, the folder's own files (seams, shared layouts), a
        # subfolder from the folder's own files or from the folders above, a listed sibling.
        cases = [
            ("core/registry/r.h", ["core/servable/servable.h", "core/registry/x.h"]),
            ("core/explain/treeshap/t.cc", ["core/explain/paths.h", "core/model/forest.h",
                                            "core/explain/treeshap/t.h"]),
            ("core/explain/e.cc", ["core/explain/quadrature/quadrature.h"]),
            ("core/predict/tahoe/t.cc", ["core/predict/cpu/cpu_infer.h"]),
            ("core/servable/s.cc", ["core/explain/interventional/interventional.h"]),
            ("server/s.cc", ["server/grpc/status.h", "server/kserve/kserve_ops.h"]),
        ]
        for path, includes in cases:
            with self.subTest(path=path), tempfile.TemporaryDirectory() as d:
                os.makedirs(os.path.join(d, os.path.dirname(path)))
                with open(os.path.join(d, path), "w") as f:
                    f.writelines(f'#include "{i}"\n' for i in includes)
                r = run(d)
                self.assertEqual(r.returncode, 0, r.stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
