#!/usr/bin/env python3
"""Side-by-side tables of bench/cpu_compare.sh's outputs: per model and batch, prediction rows/s of
Grove's CPU strategies and of every anchor, with Grove / the fastest anchor (above 1 Grove is
faster); then SHAP values and interaction values rows/s likewise. A system that did not run shows
why in its cell (n/a: the model's format is not the library's; not run; failed), with the reason
under the table.

  python3 bench/common/cpu_compare_table.py OUT_DIR
"""
import os
import re
import sys

ANCHORS = [("xgboost", "XGBoost"), ("nvforest", "nvForest CPU"), ("lightgbm", "LightGBM"),
           ("onedal", "oneDAL")]
SHAP_ANCHORS = [a for a in ANCHORS if a[0] != "nvforest"]
GROVE_STRATEGIES = {"cpu": "predict", "cpu_reference": "reference"}


def batch_rows(text):
    """Rows of a grove_predict_bench batch label (1K, 100K, 1M, 250)."""
    scale = {"K": 1000, "M": 1000000}.get(text[-1:], 1)
    return int(text[:-1] if scale > 1 else text) * scale


def read(path):
    """Lines of `path`; none when it is absent (a system that never ran)."""
    return open(path).read().splitlines() if os.path.exists(path) else []


def fields(line):
    return [x.strip() for x in line.strip().strip("|").split("|")]


def parse_grove_predict(path):
    """{(task, rows): rows/s} from `model | batch | strategy | e2e_ms | e2e_Mrows_s` lines: task
    predict for strategy cpu, reference for cpu_reference."""
    res = {}
    for line in read(path):
        f = fields(line)
        if len(f) == 5 and re.fullmatch(r"\d+[KM]?", f[1]) and f[2] in GROVE_STRATEGIES:
            n = batch_rows(f[1])
            res[(GROVE_STRATEGIES[f[2]], n)] = n / (float(f[3]) / 1e3)
    return res, "", {}


def parse_grove_shap(path):
    """{(task, rows): rows/s} from grove_model_bench's `cpu explain (...)` lines."""
    res = {}
    for line in read(path):
        f = fields(line)
        m = re.fullmatch(r"cpu explain \((shap|interactions)(?:, [a-z_]+)?\)", f[0])
        if m and len(f) == 6:
            res[(m.group(1), int(f[2].split()[0]))] = float(f[5].split()[0])
    return res, "", {}


def parse_anchor(path):
    """{(task, rows): rows/s}, version text and {task: why} failed, of cpu_anchor_bench.py."""
    res, version, failed = {}, "", {}
    for line in read(path):
        f = fields(line)
        if m := re.match(r"# (\w+) failed: (.*)", line):
            failed[m.group(1)] = m.group(2)
        elif line.startswith("# ") and not version:
            version = f[0][2:].split(" ", 1)[1]
        elif len(f) == 6 and f[3].isdigit():
            res[(f[2], int(f[3]))] = float(f[5])
    return res, version, failed


def parse_nvforest(path):
    """{("predict", rows): engine rows/s} from nvforest_bench.py's table."""
    res = {}
    for line in read(path):
        f = fields(line)
        if len(f) == 9 and f[1].isdigit():
            res[("predict", int(f[1]))] = int(f[1]) / (float(f[5]) / 1e3)
    return res, "", {}


PARSERS = {"grove_predict": parse_grove_predict, "grove_shap": parse_grove_shap,
           "nvforest": parse_nvforest}


def rate(v):
    """Rows/s with three significant digits: 1.34M, 604K, 62.6K, 406, 14.7."""
    for scale, suffix in ((1e6, "M"), (1e3, "K"), (1, "")):
        if v >= scale or scale == 1:
            x = v / scale
            return (f"{x:.3g}" if x < 100 else f"{x:.0f}") + suffix


def main():
    out = sys.argv[1]
    meta, models = {}, []
    for line in read(os.path.join(out, "run.txt")):
        key, _, value = line.partition(": ")
        if key == "model":
            models.append(value.split()[0])
        else:
            meta[key] = value
    versions = {}
    notes, pred_rows, shap_rows = [], [], []
    for name in models:
        systems = {}  # system -> (results, status, failed tasks)
        for system in ["grove_predict", "grove_shap"] + [s for s, _ in ANCHORS]:
            path = os.path.join(out, f"{name}.{system}.txt")
            res, version, failed = PARSERS.get(system, parse_anchor)(path)
            stat = (read(path[:-len(".txt")] + ".status") or ["not run: no status"])[0]
            if stat != "ok" and not stat.startswith("n/a"):
                notes.append(f"{name} / {system}: {stat}")
            notes += [f"{name} / {system} {task}: {why}" for task, why in failed.items()]
            if system == "nvforest" and res:
                version = meta.get("nvforest", "")  # its bench prints none
            if version:
                versions.setdefault(system, version)
            systems[system] = (res, stat, failed)

        def cell(system, task, n):
            res, stat, failed = systems[system]
            if (task, n) in res:
                return rate(res[(task, n)])
            if stat != "ok":
                return stat.split(":")[0]
            if task in failed:
                return "failed"
            return "n/a" if (system, task) == ("lightgbm", "interactions") else "-"

        def ratio(grove, task, n, anchors):
            have = [(systems[s][0][(task, n)], label) for s, label in anchors
                    if (task, n) in systems[s][0]]
            g = systems[grove][0].get((task, n))
            if not g or not have:
                return "-"
            best = max(have)
            return f"{g / best[0]:.2f}x ({best[1]})"

        for n in [int(b) for b in meta.get("batches", "").split(",") if b]:
            pred_rows.append([name, f"{n:,}", cell("grove_predict", "predict", n),
                              cell("grove_predict", "reference", n)] +
                             [cell(s, "predict", n) for s, _ in ANCHORS] +
                             [ratio("grove_predict", "predict", n, ANCHORS)])
        for task, label, key in (("shap", "values", "shap_rows"),
                                 ("interactions", "interactions", "interaction_rows")):
            n = int(meta.get(key, "0"))
            if n > 0:
                shap_rows.append([name, label, f"{n:,}", cell("grove_shap", task, n)] +
                                 [cell(s, task, n) for s, _ in SHAP_ANCHORS] +
                                 [ratio("grove_shap", task, n, SHAP_ANCHORS)])

    m = lambda key: meta.get(key, "?")
    print(f"CPU side by side, {m('threads')} threads for every system. Host: {m('host')}. "
          f"Commit {m('commit')}, {m('date')}.")
    print("Versions: " +
          ", ".join(f"{label} {versions.get(s) or 'not run'}" for s, label in ANCHORS) + ".")
    print("Rows: the first 10,000 of each CSV, repeated to each size. Engine time (rows in "
          f"memory), median after a warm-up; prediction budget {m('budget')} s per size. "
          "Grove: grove_predict_bench --mode cpu, transformed predictions (cpu: the CPU engine; "
          "cpu_reference: the reference walk), and grove_model_bench; XGBoost: inplace_predict "
          "margins, pred_contribs and pred_interactions on a DMatrix; LightGBM: raw scores, "
          "pred_contrib; nvForest and oneDAL: predict_proba for classifiers; oneDAL: "
          "pred_contribs, pred_interactions.")
    print()
    print("| model | rows | Grove cpu | Grove cpu_reference | " +
          " | ".join(label for _, label in ANCHORS) + " | Grove cpu / fastest anchor |")
    print("|---" * (5 + len(ANCHORS)) + "|")
    for r in pred_rows:
        print("| " + " | ".join(r) + " |")
    print()
    print("| model | SHAP | rows | Grove | " + " | ".join(label for _, label in SHAP_ANCHORS) +
          " | Grove / fastest anchor |")
    print("|---" * (5 + len(SHAP_ANCHORS)) + "|")
    for r in shap_rows:
        print("| " + " | ".join(r) + " |")
    if notes:
        print()
        print("Not run or failed:")
        for n in dict.fromkeys(notes):
            print(f"- {n}")


if __name__ == "__main__":
    main()
