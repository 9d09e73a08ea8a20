#!/usr/bin/env python3
"""The benchmark scripts docs/benchmarks/*.md name, run on the CPU:

  * bench/common/make_production_models.py makes every production-shape model with its rows, and
    Grove loads each one (`grove inspect`, when GROVE_CLI names the CLI) with the stated shape
    (features, outputs, categorical splits or none, and the tree count of the many-tree models);
  * bench/nvforest_compare.sh drives both benches per model and bench/common/compare_table.py turns
    their outputs into the side-by-side table: checked with stand-ins for nvForest's bench and
    grove_predict_bench that print known times and link rates, so every ratio in the table is known;
  * bench/cpu_compare.sh runs Grove's CPU benches and each anchor per model and
    bench/common/cpu_compare_table.py tabulates them: checked with stand-ins for Grove's benches and
    the anchors' bench (XGBoost answers; oneDAL and nvForest are absent, LightGBM does not apply),
    so every cell and ratio is known.

Exit 77 (skipped) when xgboost or lightgbm is not installed.
"""
import os
import re
import subprocess
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = {  # name: (file, features, outputs)
    "prod-wide256": ("prod-wide256.ubj", 256, 1),
    "prod-wide1024": ("prod-wide1024.ubj", 1024, 1),
    "prod-lgb5": ("prod-lgb5.txt", 100, 5),
    "prod-class10": ("prod-class10.ubj", 64, 10),
    "prod-lgb-binary": ("prod-lgb-binary.txt", 50, 1),
    "prod-lgb-cat": ("prod-lgb-cat.txt", 60, 1),
    "prod-lgb-cat-reg": ("prod-lgb-cat-reg.txt", 40, 1),
    "prod-lgb-hicat": ("prod-lgb-hicat.txt", 40, 1),
    "prod-xgb-cat": ("prod-xgb-cat.ubj", 40, 1),
    "prod-shallow": ("prod-shallow.ubj", 500, 1),
    "prod-class100": ("prod-class100.ubj", 32, 100),
    "prod-rf": ("prod-rf.ubj", 64, 1),
    "prod-lgb-rf": ("prod-lgb-rf.txt", 64, 1),
    "prod-xgb-deep": ("prod-xgb-deep.ubj", 100, 1),
    "prod-lgb-deep": ("prod-lgb-deep.txt", 80, 1),
    "prod-small": ("prod-small.ubj", 20, 1),
    "prod-xgb-cat5": ("prod-xgb-cat5.ubj", 30, 5),
}
CATEGORICAL = {"prod-lgb-cat", "prod-lgb-cat-reg", "prod-lgb-hicat", "prod-xgb-cat", "prod-xgb-cat5"}
# prod-lgb-hicat's categories (150 to 600 per column) get a row or two each from the test's 300
# training rows: whether LightGBM then splits on a group of them depends on the draw, so its
# categorical splits are not checked here (the full-size model has tens of thousands).
UNCHECKED_CATEGORICAL = {"prod-lgb-hicat"}
TREES = {"prod-shallow": 3000, "prod-class100": 2000, "prod-rf": 500, "prod-lgb-rf": 300,
         "prod-xgb-deep": 90, "prod-xgb-cat5": 500}


def check_models(tmp):
    out = os.path.join(tmp, "models")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench/common/make_production_models.py"), out,
                    "--rows", "300"], check=True, cwd=ROOT)
    cli = os.environ.get("GROVE_CLI", "")
    for name, (file, features, outputs) in SHAPES.items():
        model = os.path.join(out, file)
        rows = os.path.join(out, name + ".csv")
        assert os.path.getsize(model) > 0, model
        first = open(rows).readline().strip().split(",")
        assert len(first) == features, (name, len(first))
        if cli:
            r = subprocess.run([cli, "inspect", "--model", model], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            assert re.search(rf"^features\s+{features}$", r.stdout, re.M), (name, r.stdout[:400])
            assert re.search(rf"^outputs\s+{outputs}$", r.stdout, re.M), (name, r.stdout[:400])
            cat = "yes" if name in CATEGORICAL else "no"
            if name not in UNCHECKED_CATEGORICAL:
                assert re.search(rf"^categorical splits\s+{cat}$", r.stdout, re.M), (name, r.stdout[:400])
            if name in TREES:
                assert re.search(rf"^trees\s+{TREES[name]}$", r.stdout, re.M), (name, r.stdout[:400])
    print(f"{len(SHAPES)} production-shape models made" + (" and loaded" if cli else ""))


def check_compare(tmp):
    nvf = os.path.join(tmp, "nvf")
    os.makedirs(nvf)
    # A site tarball holding an empty nvforest folder, and a bench printing known times.
    os.makedirs(os.path.join(tmp, "site", "nvforest"))
    subprocess.run(["tar", "-C", os.path.join(tmp, "site"), "-cJf",
                    os.path.join(nvf, "nvforest-site.tar.xz"), "nvforest"], check=True)
    with open(os.path.join(nvf, "nvforest_bench.py"), "w") as f:
        f.write(textwrap.dedent("""\
            import sys
            name = sys.argv[3]
            print("# stand-in")
            print("| model | rows | layout | chunk | optimize s | engine ms | engine rows/s | e2e ms | e2e rows/s |")
            print(f"| {name} | 100 | depth_first | 1 | 0.1 | 0.050 | 1 | 0.200 | 1 |")
            print(f"| {name} | 1000000 | layered | 4 | 0.1 | 20.000 | 1 | 400.000 | 1 |")
            """))
    runner = os.path.join(tmp, "run")
    with open(runner, "w") as f:
        f.write(textwrap.dedent("""\
            #!/usr/bin/env bash
            # stand-in for a bundle's run: grove_predict_bench --mode compare output
            [ "$1" = grove_predict_bench ] || exit 3
            echo "LINK | in_bytes_per_row 400 | out_bytes_per_row 4 | h2d_GBps 50.0 | d2h_GBps 50.0"
            echo "x | tahoe | 100 | row_chunk | 0.0250 | 4.00 | 0.0200 | -1000.0000 | 0.00 | 0.1000"
            echo "x | tahoe | 100 | auto(row_chunk/row_chunk) | 0.0250 | 4.00 | -1000.0000 | 0.1000 | 1.00 | -1000.0000"
            echo "FLOOR x | 100 | selector 0.0250 ms | floor 0.0005 ms | 50.0x floor"
            echo "x | tahoe | 1M | direct | 40.0000 | 1 | 1 | -1000.0000 | 0.00 | 1"
            echo "x | tahoe | 1M | row_chunk | 10.0000 | 100 | 1 | -1000.0000 | 0.00 | 1"
            echo "x | tahoe | 1M | auto(row_chunk/row_chunk) | 10.0000 | 100.00 | -1000.0000 | 100.0000 | 10.00 | -1000.0000"
            echo "FLOOR x | 1M | selector 10.0000 ms | floor 2.0000 ms | 5.0x floor"
            """))
    os.chmod(runner, 0o755)
    model = os.path.join(tmp, "m.ubj")
    rows = os.path.join(tmp, "m.csv")
    open(model, "w").close()
    open(rows, "w").close()
    out = os.path.join(tmp, "cmp")
    r = subprocess.run(["bash", os.path.join(ROOT, "bench/nvforest_compare.sh"), runner, nvf, out,
                        "100,1000000", f"{model}:{rows}"], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, TMPDIR=tmp))
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("| m |")]
    assert len(lines) == 2, r.stdout
    small = [c.strip() for c in lines[0].strip("|").split("|")]
    large = [c.strip() for c in lines[1].strip("|").split("|")]
    # nvForest 0.050 ms / Grove 0.025 ms; e2e 0.200 / 0.100; floor 0.0005 / 0.025 = 2%.
    assert small[4] == "2.00x" and small[5] == "row_chunk" and small[6] == "2%", small
    assert small[10] == "2.00x", small
    # 20 / 10 ms engine, 400 / 100 e2e, floor 2 / 10 = 20%, best strategy row_chunk (10 ms).
    assert large[4] == "2.00x" and large[6] == "20%" and large[7] == "row_chunk (10.000)", large
    assert large[10] == "4.00x", large
    # 1M rows x 404 B in 100 ms: 4.0 GB/s; the link floor, 400 MB in at 50 GB/s, is 8 ms: 8%.
    assert large[11] == "4.0 (8%)", large
    assert os.path.exists(os.path.join(out, "table.md"))
    print("nvforest_compare.sh and compare_table.py: table as expected")


def check_cpu_compare(tmp):
    work = os.path.join(tmp, "cpu")
    anchors = os.path.join(work, "anchors")  # no xgboost-cpu wheel, no nvforest/
    wheels = os.path.join(work, "wheels")  # no LightGBM wheel, no oneDAL site
    os.makedirs(anchors)
    os.makedirs(wheels)
    runner = os.path.join(work, "run")
    with open(runner, "w") as f:
        f.write(textwrap.dedent("""\
            #!/usr/bin/env bash
            # stand-in for a bundle's run: Grove's CPU prediction and SHAP benches. THREADS is 2:
            # the prediction bench's pool takes 1 worker beside the caller, the SHAP bench counts
            # the caller in its 2.
            threads=$(echo "$*" | sed -n 's/.*--threads \\([0-9]*\\).*/\\1/p')
            case $1 in
              grove_predict_bench) [ "$threads" = 1 ] || exit 4 ;;
              grove_model_bench) [ "$threads" = 2 ] || exit 4 ;;
            esac
            case $1 in
              grove_predict_bench)
                echo "model | batch | strategy | e2e_ms | e2e_Mrows_s"
                echo "m | 1K | cpu | 0.5000 | 2.000"
                echo "m | 1K | cpu_reference | 5.0000 | 0.200" ;;
              grove_model_bench)
                echo "cpu explain (shap, quadrature_cpu) | 2 threads | 10 rows per call | 9 calls | median 0.0010 s | 10000.0 rows/s"
                echo "cpu explain (interactions, quadrature_cpu) | 2 threads | 2 rows per call | 9 calls | median 0.0040 s | 500.0 rows/s" ;;
              *) exit 3 ;;
            esac
            """))
    # Python for the anchors: the anchors' bench is a stand-in (XGBoost at known rates); daal4py is
    # never importable; everything else (the table, version queries) is the real interpreter.
    python = os.path.join(work, "python")
    with open(python, "w") as f:
        f.write(textwrap.dedent(f"""\
            #!/usr/bin/env bash
            case "$*" in *"import daal4py"*) exit 1 ;; esac
            case "$1" in
              *cpu_anchor_bench.py)
                [ "$2" = xgboost ] || exit 3
                echo "# xgboost 9.9.9 (stand-in)"
                echo "| m | xgboost | predict | 1000 | 1.0000 | 1000000.0 |"
                echo "| m | xgboost | shap | 10 | 10.0000 | 1000.0 |"
                echo "| m | xgboost | interactions | 2 | 20.0000 | 100.0 |" ;;
              *) exec {sys.executable} "$@" ;;
            esac
            """))
    for path in (runner, python):
        os.chmod(path, 0o755)
    model = os.path.join(work, "m.ubj")
    rows = os.path.join(work, "m.csv")
    open(model, "w").close()
    with open(rows, "w") as f:
        f.write("1,2\n")
    out = os.path.join(work, "out")
    env = dict(os.environ, TMPDIR=work, PYTHON=python, GROVE_WHEELS=wheels,
               GROVE_COMPARE_SHAP_ROWS="10", GROVE_COMPARE_INTERACTION_ROWS="2",
               GROVE_COMPARE_TIMEOUT="60", GROVE_COMPARE_COMMIT="abc1234")
    r = subprocess.run(["bash", os.path.join(ROOT, "bench/cpu_compare.sh"), runner, anchors, out, "2",
                        "1000", f"{model}:{rows}"], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    rows_of = lambda prefix: [[c.strip() for c in l.strip().strip("|").split("|")]
                              for l in r.stdout.splitlines() if l.startswith(prefix)]
    predict = rows_of("| m | 1,000 |")
    # Grove 1,000 rows in 0.5 ms (2M rows/s), the reference walk 200K; XGBoost 1M rows/s: 2.00x.
    assert predict == [["m", "1,000", "2M", "200K", "1M", "not run", "n/a", "not run",
                        "2.00x (XGBoost)"]], r.stdout
    shap = rows_of("| m | values |") + rows_of("| m | interactions |")
    assert shap == [["m", "values", "10", "10K", "1K", "n/a", "not run", "10.00x (XGBoost)"],
                    ["m", "interactions", "2", "500", "100", "n/a", "not run", "5.00x (XGBoost)"]], \
        r.stdout
    assert "m / nvforest: not run: no " in r.stdout, r.stdout
    assert "m / onedal: not run: no daal4py" in r.stdout, r.stdout
    assert os.path.exists(os.path.join(out, "table.md"))
    # The commit the binaries came from, where the caller names it (a bundle built elsewhere).
    assert "Commit abc1234," in r.stdout, r.stdout
    print("cpu_compare.sh and cpu_compare_table.py: table as expected")


def main():
    try:
        import lightgbm  # noqa: F401
        import xgboost  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        check_compare(tmp)
        check_cpu_compare(tmp)
        check_models(tmp)
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
