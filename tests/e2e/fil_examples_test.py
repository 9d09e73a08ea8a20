"""The Triton FIL backend's own client examples, run against groved (CTest e2e_fil_examples).

docs/triton-migration.md is tested by running the FIL backend's client examples from its public
repository, adapted only in addresses. They are the two notebooks of
https://github.com/triton-inference-server/fil_backend at commit
d71f8ef1648027c6e0514d45f1969751684528b5 (2026-06-12; its qa/ tests drive Triton through the
rapids_triton client and its config.pbtxt, not through tritonclient):

  * notebooks/categorical-fraud-detection/Fraud_Detection_Example.ipynb, "Starting the server" and
    "Submitting inference requests": wait until is_server_ready(), then infer input__0 FP32 and
    request output__0 with model_version='1' ("triton_predict"), compare with XGBoost's
    predict_proba (assert_allclose, rtol=1e-6, atol=1e-6), and run the whole test set through the
    small and large models in np.array_split chunks ("create_batches", max(GPU_COUNT=8, ...));
  * notebooks/faq/FAQs.ipynb, examples 5 (is_server_ready and is_model_ready, one row and a batch
    of min(len(X), max_batch_size, 100) rows), 7 (Triton against the native framework), 11
    (async_infer of np.array_split chunks, NUM_CHUNKS=5, with a callback and futures), 12
    (output__0 and treeshap_output together, argmax of the SHAP values) and 13 (a learning-to-rank
    model with a dense input, and a sparse libsvm input made dense with zeros as NaN).

The calls are the notebooks' calls with the notebooks' parameters (re-typed here, not copied). What
differs, and why:
  * addresses: groved's ephemeral ports in place of localhost:8001 (the notebooks' gRPC client);
    the fraud notebook's inference also runs through tritonclient.http on groved's REST port;
  * the server side, as docs/triton-migration.md says: no docker; the repository is laid out as
    the notebooks lay it out for FIL (xgboost.ubj / xgboost.json and a config.pbtxt, which groved
    does not read), and the notebooks' max_batch_size also goes to config.json's max_request_rows;
  * the data: the fraud notebook's Kaggle data set cannot be fetched here, so a synthetic table of
    the same kind (numeric columns and string categoricals) is used; the FAQ's own synthetic
    make_classification data is used as written; the ranking model is trained here (the FAQ
    assumes one); sizes are smaller for a 2-core CI machine (the fraud notebook's large model
    5000 trees of depth 12 -> 300 of depth 8; the FAQ's MAX_MEMORY_BYTES 60 MB -> 6 MB);
  * cuDF / cupy / cuML -> pandas / numpy (no GPU is needed by groved's CPU build);
  * FAQ example 7 compares with predict_proba[:, 1] because its config.pbtxt declares output__0
    with dims [1]; groved has no config.pbtxt and answers FIL's predict_proba layout [1-p, p] (the
    layout the FIL backend's own qa/L0_e2e/test_model.py expects for binary classifiers), so the
    comparison is with predict_proba whole. FAQ example 5's first config (predict_proba false,
    class ids) corresponds to the request parameter predict_proba=False here (see
    docs/triton-migration.md): both forms are checked.
Every notebook check is a check here; results must equal XGBoost's own within the notebooks'
tolerances, and the SHAP values XGBoost's pred_contribs.
"""

import concurrent.futures
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402

RANDOM_SEED = 0


FIL_CONFIG = """backend: "fil"
max_batch_size: {max_batch_size}
input [
  {{
    name: "input__0"
    data_type: TYPE_FP32
    dims: [ {features} ]
  }}
]
output [
  {{
    name: "output__0"
    data_type: TYPE_FP32
    dims: [ {classes} ]
  }}
]
instance_group [{{ kind: KIND_AUTO }}]
parameters [
  {{
    key: "model_type"
    value: {{ string_value: "{model_type}" }}
  }},
  {{
    key: "output_class"
    value: {{ string_value: "{output_class}" }}
  }},
  {{
    key: "predict_proba"
    value: {{ string_value: "{output_class}" }}
  }}
]

dynamic_batching {{}}
"""


def serialize(repo, model, name, filename, max_batch_size, classes=2):
    """The notebooks' serialize_model and generate_config: <name>/1/<FIL's file name> and FIL's
    config.pbtxt, as a Triton FIL repository holds them (groved reads the model file as it is and
    not config.pbtxt); the config.pbtxt's max_batch_size also as config.json's max_request_rows."""
    version_dir = os.path.join(repo, name, "1")
    os.makedirs(version_dir, exist_ok=True)
    model.save_model(os.path.join(version_dir, filename))
    model_type = {"xgboost.json": "xgboost_json", "xgboost.ubj": "xgboost_ubj"}[filename]
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(FIL_CONFIG.format(max_batch_size=int(max_batch_size), features=model.n_features_in_,
                                  classes=classes, model_type=model_type,
                                  output_class="true" if classes > 1 else "false"))
    with open(os.path.join(repo, name, "config.json"), "w") as f:
        json.dump({"max_request_rows": int(max_batch_size)}, f)


def convert_to_numpy(pd, df):
    """The notebooks' convert_to_numpy (FAQ's pandas form): categoricals as their codes, every
    column downcast to float."""
    df = df.copy()
    for col in df.select_dtypes("category").columns:
        df[col] = df[col].cat.codes
    for col in df.columns:
        df[col] = pd.to_numeric(df[col], downcast="float")
    return df.values


def fraud_like_data(np, pd, rows=4000):
    """A stand-in for the IEEE-CIS transactions table: numeric columns, three string categoricals,
    a rare positive class depending on both."""
    rng = np.random.default_rng(RANDOM_SEED)
    X = pd.DataFrame({f"V{i}": rng.normal(size=rows).astype("float64") for i in range(20)})
    X["TransactionAmt"] = rng.lognormal(3, 1, size=rows)
    cats = {"ProductCD": list("WHCSR"), "card4": ["visa", "mastercard", "discover", "amex"],
            "P_emaildomain": [f"d{i}.com" for i in range(12)]}
    for col, values in cats.items():
        X[col] = pd.Categorical(rng.choice(values, size=rows))
    logit = (X["V0"] + 0.5 * X["V1"] * X["V2"] - 3 + (X["ProductCD"] == "C") * 1.5
             + (X["card4"] == "discover") * 1.0 + np.log(X["TransactionAmt"]) * 0.3)
    y = pd.Series((rng.random(rows) < 1 / (1 + np.exp(-logit))).astype(int), name="isFraud")
    return X, y


def fraud_notebook(f, np, pd, xgb, grpcclient, httpclient, utils, server, repo_ready):
    """Fraud_Detection_Example.ipynb: the deployed models answer as XGBoost does locally."""
    from sklearn.model_selection import train_test_split  # noqa: PLC0415
    X, y = fraud_like_data(np, pd)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y,
                                                        random_state=RANDOM_SEED)

    def train_model(num_trees, max_depth):
        model = xgb.XGBClassifier(device="cpu", tree_method="hist", enable_categorical=True,
                                  eval_metric="aucpr", objective="binary:logistic",
                                  max_depth=max_depth, n_estimators=num_trees)
        model.fit(X_train, y_train, eval_set=[(X_test, y_test)], verbose=False)
        return model

    small_model = train_model(500, 3)
    large_model = train_model(300, 8)  # the notebook's 5000 trees of depth 12, reduced
    features = X_test.shape[1]
    num_classes = int(np.unique(y_test).size)
    max_batch_size = 60_000_000 // ((features + num_classes) * 4)  # the notebook's MAX_MEMORY_BYTES
    models = {"small_model": small_model, "small_model-cpu": small_model,
              "large_model": large_model, "large_model-cpu": large_model}
    repo = repo_ready()
    for name, model in models.items():
        serialize(repo, model, name, "xgboost.ubj", max_batch_size)

    with server(repo) as srv:
        for module, port in ((grpcclient, srv.grpc_port), (httpclient, srv.http_port)):
            what = f"fraud notebook ({module.__name__})"
            client = module.InferenceServerClient(url=f"127.0.0.1:{port}")
            server_start, TIMEOUT = time.time(), 60
            while True:
                try:
                    if client.is_server_ready() or time.time() - server_start > TIMEOUT:
                        break
                except utils.InferenceServerException:
                    pass
                time.sleep(1)

            def triton_predict(model_name, arr):
                triton_input = module.InferInput("input__0", arr.shape, "FP32")
                triton_input.set_data_from_numpy(arr)
                triton_output = module.InferRequestedOutput("output__0")
                response = client.infer(model_name, model_version="1", inputs=[triton_input],
                                        outputs=[triton_output])
                return response.as_numpy("output__0")

            np_data = convert_to_numpy(pd, X_test).astype("float32")
            triton_result = triton_predict("small_model", np_data[0:5])
            local_result = small_model.predict_proba(X_test[0:5])
            try:
                np.testing.assert_allclose(triton_result, local_result, rtol=1e-6, atol=1e-6)
                print(f"{what}: first 5 rows {triton_result.tolist()} equal predict_proba")
            except AssertionError as e:
                f.check(False, f"{what}: small_model on 5 rows: {e}")

            GPU_COUNT = 8

            def create_batches(arr):
                chunks = (arr.shape[0] // max_batch_size
                          + int(bool(arr.shape[0] % max_batch_size) or arr.shape[0] < max_batch_size))
                return np.array_split(arr, max(GPU_COUNT, chunks))

            for name in ("large_model", "small_model-cpu", "large_model-cpu"):
                results = np.concatenate([triton_predict(name, chunk) for chunk in create_batches(np_data)])
                local = models[name].predict_proba(X_test)
                try:
                    np.testing.assert_allclose(results, local, rtol=1e-6, atol=1e-6)
                    print(f"{what}: {name} on the {len(local)}-row test set in {GPU_COUNT} chunks "
                          "equals predict_proba")
                except AssertionError as e:
                    f.check(False, f"{what}: {name} on the test set: {e}")
            client.close()


def faq_notebook(f, np, pd, xgb, grpcclient, utils, server, repo_ready):
    """FAQs.ipynb examples 5, 7, 11, 12 and 13."""
    from sklearn.datasets import dump_svmlight_file, load_svmlight_file, make_classification  # noqa: PLC0415
    NUM_FEATURES, NUM_CLASSES, NUM_TREES, MAX_DEPTH = 32, 2, 500, 10
    X, y = make_classification(n_samples=5000, n_features=NUM_FEATURES,
                               n_informative=max(NUM_FEATURES // 3, 1), n_classes=NUM_CLASSES,
                               random_state=RANDOM_SEED)
    X = pd.DataFrame(X)
    y = pd.DataFrame(y)
    model = xgb.XGBClassifier(eval_metric="error", objective="binary:logistic", tree_method="hist",
                              max_depth=MAX_DEPTH, n_estimators=NUM_TREES).fit(X, y)
    MAX_MEMORY_BYTES = 6_000_000  # the FAQ's 60_000_000, reduced
    max_batch_size = MAX_MEMORY_BYTES // ((NUM_FEATURES + NUM_CLASSES) * 4)
    MODEL_NAME = "example_model"
    repo = repo_ready()
    serialize(repo, model, MODEL_NAME, "xgboost.json", max_batch_size)

    # Example 13's learning-to-rank model (the FAQ brings its own): a regression model to FIL.
    rng = np.random.default_rng(RANDOM_SEED)
    Xr = rng.random((600, 12)).astype(np.float32)
    Xr[rng.random(Xr.shape) < 0.4] = 0  # sparse, as a libsvm file's data
    yr = (Xr[:, 0] * 3 + Xr[:, 1] > 1.5).astype(int) + (Xr[:, 2] > 0.7)
    ranker = xgb.XGBRanker(objective="rank:pairwise", tree_method="hist", n_estimators=40,
                           max_depth=4).fit(Xr, yr, qid=np.repeat(np.arange(60), 10))
    serialize(repo, ranker, "ranking_model", "xgboost.json", max_batch_size, classes=1)

    with server(repo) as srv:
        HOST, PORT, TIMEOUT = "127.0.0.1", srv.grpc_port, 60
        client = grpcclient.InferenceServerClient(url=f"{HOST}:{PORT}")

        def is_triton_ready(model_name=MODEL_NAME):
            server_start = time.time()
            while True:
                try:
                    if client.is_server_ready() and client.is_model_ready(model_name):
                        return True
                except utils.InferenceServerException:
                    pass
                if time.time() - server_start > TIMEOUT:
                    return False
                time.sleep(1)

        def triton_predict(model_name, arr, **kwargs):
            triton_input = grpcclient.InferInput("input__0", arr.shape, "FP32")
            triton_input.set_data_from_numpy(arr)
            triton_output = grpcclient.InferRequestedOutput("output__0")
            response = client.infer(model_name, model_version="1", inputs=[triton_input],
                                    outputs=[triton_output], **kwargs)
            return response.as_numpy("output__0")

        # Example 5: one row, then a batch.
        f.check(is_triton_ready(), "FAQ 5: the server or the model never became ready")
        single_sample = convert_to_numpy(pd, X[0:1])
        out = triton_predict(MODEL_NAME, single_sample)
        f.check(out.shape == (1, 2), f"FAQ 5: one row gave {out.shape}")
        batch = convert_to_numpy(pd, X[0:min(len(X), max_batch_size, 100)])
        proba = triton_predict(MODEL_NAME, batch)
        # The FAQ's first config says predict_proba false (class ids): a request parameter here.
        classes = triton_predict(MODEL_NAME, batch, parameters={"predict_proba": False})
        native_classes = model.predict(X[0:len(batch)]).reshape(-1, 1).astype(np.float32)
        f.check(np.array_equal(classes, native_classes),
                f"FAQ 5: class ids differ from predict() in {int((classes != native_classes).sum())} rows")

        # Example 7: Triton against the native framework.
        native_result = model.predict_proba(X[0:len(batch)])
        max_diff = float(np.max(np.abs(proba - native_result)))
        print(f"FAQ 7: the maximum absolute difference between groved and native output is {max_diff}")
        f.check(max_diff <= 1e-6, f"FAQ 7: max |groved - predict_proba| = {max_diff}")

        # Example 11: NUM_CHUNKS requests in parallel through async_infer.
        NUM_CHUNKS = 5

        def triton_predict_async(model_name, arr):
            triton_input = grpcclient.InferInput("input__0", arr.shape, "FP32")
            triton_input.set_data_from_numpy(arr)
            triton_output = grpcclient.InferRequestedOutput("output__0")
            future_result = concurrent.futures.Future()

            def callback(result, error):
                if error is None:
                    future_result.set_result(result.as_numpy("output__0"))
                else:
                    future_result.set_exception(error)

            client.async_infer(model_name, model_version="1", inputs=[triton_input],
                               outputs=[triton_output], callback=callback)
            return future_result

        large_input = np.random.default_rng(1).random((max_batch_size, NUM_FEATURES)).astype("float32")
        chunks = np.array_split(large_input, NUM_CHUNKS)
        start = time.monotonic()
        whole = triton_predict(MODEL_NAME, large_input)
        one_call = time.monotonic() - start
        start = time.monotonic()
        futures = [triton_predict_async(MODEL_NAME, chunk_) for chunk_ in chunks]
        concurrent.futures.wait(futures)
        in_chunks = time.monotonic() - start
        parts = np.concatenate([fut.result() for fut in futures])
        f.check(np.array_equal(parts, whole), "FAQ 11: the chunks' answers differ from the whole batch's")
        try:
            np.testing.assert_allclose(whole, model.predict_proba(large_input), rtol=1e-6, atol=1e-6)
        except AssertionError as e:
            f.check(False, f"FAQ 11: {max_batch_size} rows: {e}")
        print(f"FAQ 11: {max_batch_size} rows in one call {one_call:.2f}s, in {NUM_CHUNKS} parallel "
              f"chunks {in_chunks:.2f}s")

        # Example 12: Shapley values with the prediction.
        def triton_predict_shap(model_name, arr):
            triton_input = grpcclient.InferInput("input__0", arr.shape, "FP32")
            triton_input.set_data_from_numpy(arr)
            triton_output = grpcclient.InferRequestedOutput("output__0")
            triton_shap_output = grpcclient.InferRequestedOutput("treeshap_output")
            response = client.infer(model_name, model_version="1", inputs=[triton_input],
                                    outputs=[triton_output, triton_shap_output])
            return (response.as_numpy("output__0"), response.as_numpy("treeshap_output"))

        two = convert_to_numpy(pd, X[0:2])
        output, shap_out = triton_predict_shap(MODEL_NAME, two)
        contribs = model.get_booster().predict(xgb.DMatrix(X[0:2]), pred_contribs=True)
        f.check(shap_out.shape == (2, NUM_FEATURES + 1), f"FAQ 12: treeshap_output {shap_out.shape}")
        if shap_out.shape == contribs.shape:
            err = float(np.max(np.abs(shap_out - contribs)))
            f.check(err <= 1e-4 * max(1.0, float(np.max(np.abs(contribs)))),
                    f"FAQ 12: |treeshap_output - pred_contribs| up to {err}")
            f.check(np.array_equal(np.argmax(shap_out, axis=1), np.argmax(contribs, axis=1)),
                    "FAQ 12: the most significant feature differs from XGBoost's")
        print(f"FAQ 12: output {output.tolist()}, most significant features {np.argmax(shap_out, axis=1)}")

        # Example 13: a ranking model, dense input, then a sparse libsvm input with zeros as NaN.
        f.check(is_triton_ready("ranking_model"), "FAQ 13: the ranking model never became ready")
        X_test = Xr[:50]
        triton_result = triton_predict("ranking_model", X_test)
        native = ranker.predict(X_test).reshape(-1, 1)
        f.check(np.allclose(triton_result, native, rtol=1e-6, atol=1e-6), "FAQ 13.2: dense ranking differs")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "data.libsvm")
            dump_svmlight_file(X_test, yr[:50], path)
            X_test, y_test = load_svmlight_file(path, n_features=Xr.shape[1])
            native = ranker.get_booster().predict(xgb.DMatrix(X_test)).reshape(-1, 1)  # CSR: absent = missing
            X_test = X_test.toarray().astype(np.float32)
            X_test[X_test == 0] = np.nan
            triton_result = triton_predict("ranking_model", X_test)
        f.check(np.allclose(triton_result, native, rtol=1e-6, atol=1e-6),
                "FAQ 13.3: the sparse input with zeros as NaN differs from XGBoost on the sparse matrix")
        print(f"FAQ 13: ranking scores of {len(native)} rows equal XGBoost's, dense and sparse")
        client.close()


def main():
    args = h.parse_args()
    try:
        import numpy as np
        import pandas as pd
        import sklearn  # noqa: F401
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient
        import xgboost as xgb
        from tritonclient import utils
    except ImportError as e:
        h.skip(f"numpy, pandas, scikit-learn, xgboost or tritonclient[grpc,http] missing: {e}")
    f = h.Failures()
    work = tempfile.mkdtemp(prefix="grove_fil_examples_")
    count = [0]

    def repo_ready():
        count[0] += 1
        return os.path.join(work, f"repository{count[0]}")

    def server(repo):
        return h.Groved(args.groved, repo, ["--repository_poll_seconds=0"])

    try:
        fraud_notebook(f, np, pd, xgb, grpcclient, httpclient, utils, server, repo_ready)
        faq_notebook(f, np, pd, xgb, grpcclient, utils, server, repo_ready)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    f.finish("e2e_fil_examples")


if __name__ == "__main__":
    sys.exit(main())
