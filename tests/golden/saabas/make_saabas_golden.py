#!/usr/bin/env python3
"""Saabas attributions (XGBoost's pred_contribs=True, approx_contribs=True) of the XGBoost models of
/work/shared/testdata and of this repository's golden corpus (tests/golden/xgb_*), the reference
of tests/explain/saabas/saabas_golden_test.cc.

Per case, the first ROWS rows of its X.csv; cases.json lists each case: its model (relative to
the repository for the golden corpus, to the shared corpus otherwise), the rows, the boosting
rounds [iteration_begin, iteration_end) (0, 0: all) and the reference file, %.9g per value,
laid out as pred_contribs ([row][output][feature 0..F-1, bias]). A case XGBoost refuses is listed
under "refused" with its message, as is one whose approx_contribs do not sum to the case's
margin.csv (a model this XGBoost reads otherwise than the library that wrote it). Run once with XGBoost 3.2 (the version checked in cases.json);
do not edit the outputs by hand: regenerate.

Usage: tests/golden/saabas/make_saabas_golden.py [--shared /work/shared/testdata]
"""
import argparse
import glob
import json
import os
import re

import numpy as np
import xgboost as xgb

ROWS = 32
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def read_x(path):
    return np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2, max_rows=ROWS)


def contribs(bst, x, iteration_range):
    cats = bst.feature_types is not None and "c" in bst.feature_types
    d = xgb.DMatrix(x, feature_names=bst.feature_names, feature_types=bst.feature_types,
                    enable_categorical=cats, missing=np.nan)
    out = bst.predict(d, pred_contribs=True, approx_contribs=True,
                      iteration_range=iteration_range)
    return out.reshape(x.shape[0], -1)


def first_line(e):
    """The error's first line without XGBoost's time stamp (the file stays the same per run)."""
    return re.sub(r"^\[[0-9:]+\] ", "", str(e).splitlines()[0])


def write(path, m):
    with open(path, "w") as f:
        for row in m:
            f.write(",".join("%.9g" % v for v in row) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", default="/work/shared/testdata")
    args = parser.parse_args()
    sources = [("repository", d) for d in sorted(glob.glob(os.path.join(REPO, "tests/golden/xgb_*")))]
    sources += [("shared", d) for d in sorted(glob.glob(os.path.join(args.shared, "xgb_*")))]
    cases, refused = [], []
    for where, d in sources:
        base = os.path.basename(d)
        model = os.path.join(d, "model.json")
        bst = xgb.Booster()
        bst.load_model(model)
        x = read_x(os.path.join(d, "X.csv"))
        # A model this XGBoost does not read as the library that wrote it (the shared corpus's
        # XGBoost 3.4 dart model, whose weight_drop 3.2 ignores) has no reference here.
        margin = np.loadtxt(os.path.join(d, "margin.csv"), delimiter=",", ndmin=2,
                            max_rows=ROWS)
        try:
            ours = contribs(bst, x, (0, 0))
        except (xgb.core.XGBoostError, ValueError) as e:
            refused.append({"case": f"{where}_{base}", "message": first_line(e)})
            continue
        k = margin.shape[1]
        sums = ours.reshape(x.shape[0], k, -1).sum(axis=2)
        err = float(np.max(np.abs(sums - margin) / np.maximum(1.0, np.abs(margin))))
        if err > 1e-4:
            refused.append({"case": f"{where}_{base}",
                            "message": f"XGBoost {xgb.__version__} reads another model: its "
                                       f"approx_contribs sum to margin.csv within {err:.3g} only"})
            continue
        rounds = bst.num_boosted_rounds()
        # XGBoost computes contributions of rounds [0, end) only (a later begin: "using model
        # slicing instead").
        ranges = [(0, 0)] + ([(0, rounds - 1)] if rounds > 1 else [])
        for begin, end in ranges:
            name = f"{where}_{base}" + ("" if end == 0 else f"_rounds{begin}_{end}")
            try:
                m = contribs(bst, x, (begin, end))
            except (xgb.core.XGBoostError, ValueError) as e:
                refused.append({"case": name, "message": first_line(e)})
                break
            write(os.path.join(HERE, name + ".csv"), m)
            rel = os.path.relpath(model, REPO if where == "repository" else args.shared)
            cases.append({"case": name, "where": where, "model": rel, "rows": int(x.shape[0]),
                          "iteration_begin": begin, "iteration_end": end,
                          "reference": name + ".csv"})
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump({"xgboost_version": xgb.__version__, "rows": ROWS, "cases": cases,
                   "refused": refused}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
