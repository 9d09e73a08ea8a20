#!/usr/bin/env python3
"""`grove explain --background` against shap's interventional TreeExplainer on the corpus.

For every case of ../shared/testdata and tests/golden: a 100-row background (the first rows of
X.csv; fewer for the small golden cases, leaving 10) and 10 explained rows (the next ones). shap 0.51's TreeExplainer(model, data=background,
feature_perturbation="interventional") -- and model_output="probability" for logistic models, which
grove calls --output-space probability_linearized -- must agree with grove within
1e-5 * max(1, |margin|) per value, bias included.

A case whose margins the installed library does not reproduce (margin.csv, computed by the
library version that saved the model) is skipped: shap and the brute force would explain another
model. Where shap refuses a model (XGBoost categorical splits, vector leaves, boosted random forests) the
case is reported as skipped. Where shap answers but disagrees, the case passes only if grove agrees
with a brute-force Shapley computation over the library's own predictions (margins, or its own
transformed predictions: every feature subset of every hybrid row, the first 3 rows, models of at
most 12 features) -- i.e. shap is wrong there -- and the line says so. Exit 0 on success, 1 on a failure, 77 when shap, xgboost or lightgbm is missing.
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings

try:
    import numpy as np
    import shap
    import xgboost as xgb
    import lightgbm as lgb
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

warnings.filterwarnings("ignore")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROVE = os.environ.get("GROVE", os.path.join(SOURCE, "build/cpu/bin/grove"))
TOLERANCE = 1e-5
BACKGROUND_ROWS = 100
EXPLAINED_ROWS = 10
BRUTE_FORCE_FEATURES = 12  # 2^12 hybrids x 100 background rows per explained row
BRUTE_FORCE_ROWS = 3


def case_dirs():
    roots = [os.environ.get("GROVE_TESTDATA", os.path.join(SOURCE, "..", "shared", "testdata")),
             os.path.join(SOURCE, "tests", "golden")]
    for root in roots:
        if not os.path.isdir(root):
            continue
        for name in sorted(os.listdir(root)):
            meta = os.path.join(root, name, "meta.json")
            # Models this reference reads with XGBoost or LightGBM (CatBoost cases are checked
            # by tests/model/catboost_loader_test.cc, Treelite checkpoints by
            # tests/model/treelite_loader_test.cc and the corpus tests).
            d = os.path.join(root, name)
            if os.path.exists(meta) and any(
                    os.path.exists(os.path.join(d, f)) for f in ("model.json", "model.txt")):
                yield d


class Model:
    def __init__(self, d):
        self.is_xgb = os.path.exists(os.path.join(d, "model.json"))
        self.path = os.path.join(d, "model.json" if self.is_xgb else "model.txt")
        if self.is_xgb:
            self.booster = xgb.Booster(model_file=self.path)
            cfg = json.loads(self.booster.save_config())
            self.objective = cfg["learner"]["objective"]["name"]
        else:
            self.booster = lgb.Booster(model_file=self.path)
            self.objective = self.booster.dump_model()["objective"].split()[0]

    def predict(self, X, margin):
        """The library's margin, or its own transformed prediction (probability)."""
        if self.is_xgb:
            data = xgb.DMatrix(X, missing=np.nan, feature_names=self.booster.feature_names)
            m = self.booster.predict(data, output_margin=margin)
        else:
            m = self.booster.predict(X, raw_score=margin)
        return m.reshape(len(X), -1)

    def logistic(self):
        return self.objective in ("binary:logistic", "reg:logistic", "binary")


def shap_values(model, bg, rows, probability):
    """rows x K x (F + 1) (bias last), or raises what shap raised."""
    kwargs = {"model_output": "probability"} if probability else {}
    e = shap.TreeExplainer(model.booster, data=bg, feature_perturbation="interventional", **kwargs)
    v = np.asarray(e.shap_values(rows, check_additivity=False), dtype=np.float64)
    if v.ndim == 2:
        v = v[:, None, :]
    else:
        v = np.transpose(v, (0, 2, 1))  # rows x F x K -> rows x K x F
    bias = np.broadcast_to(np.asarray(e.expected_value, dtype=np.float64).reshape(1, -1, 1),
                           (len(rows), v.shape[1], 1))
    return np.concatenate([v, bias], axis=2)


def grove_values(model, bg, rows, space, tmp):
    for name, data in (("bg.csv", bg), ("rows.csv", rows)):
        with open(os.path.join(tmp, name), "w") as f:
            for r in data:
                f.write(",".join("nan" if math.isnan(v) else repr(float(v)) for v in r) + "\n")
    p = subprocess.run([GROVE, "explain", "--model", model.path, "--input",
                        os.path.join(tmp, "rows.csv"), "--background", os.path.join(tmp, "bg.csv"),
                        "--output-space", space, "--no-progress"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip())
    out = np.loadtxt(p.stdout.splitlines(), delimiter=",", ndmin=2)
    return out.reshape(len(rows), -1, rows.shape[1] + 1)


def brute_force(model, bg, rows, space):
    """Shapley values of v(S) = mean_z out(x_S z_S̄) from the library's predictions: margins, its
    own transformed predictions ("probability"), or per pair the margin values times
    (p(x) - p(z)) / (m(x) - m(z)) ("probability_linearized", shap's model_output="probability")."""
    n, F = rows.shape
    subsets = 1 << F
    masks = ((np.arange(subsets)[:, None] >> np.arange(F)) & 1).astype(bool)
    weights = np.array([math.factorial(s) * math.factorial(F - s - 1) / math.factorial(F)
                        for s in range(F)])
    without = [np.where(~masks[:, i])[0] for i in range(F)]
    sizes = [masks[w].sum(axis=1) for w in without]

    def shapley(v):  # v: subsets x ... -> F x ...
        return np.stack([np.tensordot(weights[sizes[i]], v[without[i] | (1 << i)] - v[without[i]], 1)
                         for i in range(F)])

    p_bg = model.predict(bg, margin=False)
    result = []
    for x in rows:
        hybrid = np.where(masks[:, None, :], x[None, None, :], bg[None, :, :]).reshape(-1, F)
        if space == "probability_linearized":
            m = model.predict(hybrid, margin=True).reshape(subsets, len(bg), -1)
            p_x = model.predict(x[None, :], margin=False)[0]
            dm = m[-1] - m[0]  # per background row and output
            factor = np.where(dm != 0, (p_x[None, :] - p_bg) / np.where(dm != 0, dm, 1), 1.0)
            phi = (shapley(m) * factor[None]).mean(axis=1)  # F x K
            bias = p_bg.mean(axis=0)
        else:
            v = model.predict(hybrid, margin=space == "margin").reshape(subsets, len(bg), -1)
            v = v.mean(axis=1)  # subsets x K
            phi, bias = shapley(v), v[0]
        result.append(np.concatenate([phi.T, bias[:, None]], axis=1))
    return np.array(result)


def max_error(got, want, margin):
    scale = np.maximum(1.0, np.abs(margin))[:, :, None]
    return float(np.max(np.abs(got - want) / scale))


def check(d, tmp):
    model = Model(d)
    X = np.loadtxt(os.path.join(d, "X.csv"), delimiter=",", ndmin=2)
    n_bg = min(BACKGROUND_ROWS, len(X) - EXPLAINED_ROWS)  # the golden cases have fewer rows
    if n_bg < 10:
        return True, "skipped: fewer than 20 rows in X.csv"
    bg, rows = X[:n_bg], X[n_bg:n_bg + EXPLAINED_ROWS]
    margin = model.predict(rows, margin=True)
    ref = np.loadtxt(os.path.join(d, "margin.csv"), delimiter=",", ndmin=2)
    ref = ref.reshape(len(X), -1)[n_bg:n_bg + EXPLAINED_ROWS]
    drift = float(np.max(np.abs(margin - ref) / np.maximum(1.0, np.abs(ref))))
    if drift > 1e-4:  # e.g. XGBoost 3.2 drops the dart weights of a model saved by 3.4
        return True, (f"skipped: the installed library's margins differ from margin.csv by "
                      f"{drift:.2e}, so neither shap nor a brute force over it explains this model")
    spaces = [(False, "margin")] + ([(True, "probability_linearized")] if model.logistic() else [])
    ok, notes = True, []
    for probability, space in spaces:
        try:
            want = shap_values(model, bg, rows, probability)
        except Exception as e:  # shap's refusals: NotImplementedError, ValueError, ...
            notes.append(f"{space}: shap refuses ({type(e).__name__}: {str(e)[:70]})")
            continue
        try:
            got = grove_values(model, bg, rows, space, tmp)
        except RuntimeError as e:
            notes.append(f"{space}: grove refuses ({str(e)[:90]}); shap answers")
            ok = ok and "linear trees" in str(e)  # LightGBM linear trees: refused like LightGBM
            continue
        err = max_error(got, want, margin) if got.shape == want.shape else math.inf
        if err <= TOLERANCE:
            notes.append(f"{space}: agrees with shap, max err {err:.2e}")
            continue
        if rows.shape[1] > BRUTE_FORCE_FEATURES:
            ok = False
            notes.append(f"{space}: DISAGREES with shap, max err {err:.2e} (shape {got.shape} vs "
                         f"{want.shape})")
            continue
        brute = brute_force(model, bg, rows[:BRUTE_FORCE_ROWS], space)
        brute_err = max_error(got[:BRUTE_FORCE_ROWS], brute, margin[:BRUTE_FORCE_ROWS])
        good = brute_err <= TOLERANCE
        ok = ok and good
        notes.append(f"{space}: shap differs by {err:.2e}; grove vs brute force over the "
                     f"library's predictions {brute_err:.2e} ({'shap is wrong here' if good else 'FAIL'})")
    if model.logistic() and rows.shape[1] <= BRUTE_FORCE_FEATURES:
        got = grove_values(model, bg, rows[:BRUTE_FORCE_ROWS], "probability", tmp)
        err = max_error(got, brute_force(model, bg, rows[:BRUTE_FORCE_ROWS], "probability"),
                        margin[:BRUTE_FORCE_ROWS])
        ok = ok and err <= TOLERANCE
        notes.append(f"probability (exact, no shap equivalent): vs brute force {err:.2e}")
    return ok, "; ".join(notes)


def main():
    if not os.path.exists(GROVE):
        print(f"no grove binary at {GROVE}")
        return 1
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for d in case_dirs():
            ok, line = check(d, tmp)
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(d)}: {line}", flush=True)
    print(f"{failures} failing cases")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
