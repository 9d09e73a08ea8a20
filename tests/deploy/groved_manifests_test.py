#!/usr/bin/env python3
"""The Kubernetes manifests against the real groved (CTest deploy_groved, label `deploy`).

For each overlay (gpu, cpu) this renders the manifests with `kubectl kustomize`, then starts the real
groved exactly as the pod would: through the image's entry point (deploy/docker/groved-entrypoint.sh)
with the container's environment (the ConfigMap's default_model_config.json written to a file, the
model repository replaced by a small one from tests/golden, limits.cpu resolved). It checks that
  * every flag the entry point can pass exists in `groved --helpfull`, with the documented port
    defaults, which are the manifests' container ports;
  * the container ports answer (the manifests' ports themselves when they are free on this machine,
    else ephemeral ones): gRPC, KServe v2 REST (health, every model's readiness, a JSON inference
    per model) and HTTP GET /metrics as the PodMonitor scrapes it;
  * the startup, readiness and liveness probes' grpc.health.v1 Check (service and port as in the
    manifest) answer SERVING once loading finished, and every model's `model/<name>` too;
  * the logs are JSON lines (GROVE_LOG_FORMAT=json);
  * on SIGTERM (what the kubelet sends after preStop) health turns NOT_SERVING at once while the port
    still answers (REST: /v2/health/ready answers 503), and groved exits 0 well within
    terminationGracePeriodSeconds - preStop.
Then deploy/kserve's ClusterServingRuntime as KServe starts it: a lone model file at /mnt/models served
under the InferenceService's name, a repository served as it is, several model files refused.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_lib as d  # noqa: E402


def ephemeral(env):
    """Every port of the pod on an ephemeral one (this machine already uses one of the manifests')."""
    for var in ("GROVE_HTTP_PORT", "GROVE_GRPC_PORT", "GROVE_METRICS_PORT"):
        env[var] = "0"


def run_overlay(f, groved, overlay, flags):
    ctx = f"overlay {overlay}"
    _, objs = d.kustomize(os.path.join(d.DEPLOY, "k8s", "overlays", overlay))
    dep = d.find(objs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = next(c for c in pod["containers"] if c["name"] == "groved")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    env_spec = d.container_env(c)
    table = d.entrypoint_table()

    # Port defaults of the binary = the manifests' container ports.
    f.check(flags.get("grpc_port") == str(ports["grpc"]),
            f"{ctx}: groved's --grpc_port default {flags.get('grpc_port')} != containerPort {ports['grpc']}")
    f.check(flags.get("metrics_port") == str(ports["metrics"]),
            f"{ctx}: groved's --metrics_port default {flags.get('metrics_port')} != containerPort {ports['metrics']}")
    f.check(flags.get("http_port") == str(ports.get("http")),
            f"{ctx}: groved's --http_port default {flags.get('http_port')} != containerPort {ports.get('http')}")

    tmp = tempfile.mkdtemp(prefix=f"grove-deploy-{overlay}-")
    try:
        repo = os.path.join(tmp, "models")
        models = d.make_model_repository(repo)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GROVED": groved}
        for var, value in env_spec.items():
            if isinstance(value, dict):  # valueFrom
                ref = value.get("resourceFieldRef", {})
                f.check(ref.get("resource") == "limits.cpu", f"{ctx}: unexpected valueFrom for {var}: {value}")
                value = "2"
            env[var] = value
        # Volumes of the pod, here: the repository, the ConfigMap, the cache.
        cfg_path = env_spec["GROVE_DEFAULT_MODEL_CONFIG"]
        cfg_dir, cfg_file = os.path.split(cfg_path)
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        vol = next(v for v in pod["volumes"] if v["name"] == mounts[cfg_dir])
        cm = d.find(objs, "ConfigMap", vol["configMap"]["name"])
        os.makedirs(os.path.join(tmp, "etc"))
        with open(os.path.join(tmp, "etc", cfg_file), "w") as out:
            out.write(cm["data"][cfg_file])
        env["GROVE_DEFAULT_MODEL_CONFIG"] = os.path.join(tmp, "etc", cfg_file)
        env["GROVE_MODEL_REPOSITORY"] = repo
        if "GROVE_CALIBRATION_CACHE_DIR" in env:
            env["GROVE_CALIBRATION_CACHE_DIR"] = os.path.join(tmp, "cache")
            os.makedirs(env["GROVE_CALIBRATION_CACHE_DIR"])
        env["GROVE_PORT_FILE"] = os.path.join(tmp, "ports.json")
        for var in env:
            if var.startswith("GROVE_"):
                flag = table.get(var, "")[2:]
                f.check(flag in flags, f"{ctx}: {var} passes --{flag}, which `groved --helpfull` does not list")

        own_ports = all(d.port_free(p) for p in ports.values())
        if not own_ports:
            print(f"note: ports {sorted(ports.values())} are not all free on this machine; using ephemeral ones")
            ephemeral(env)
        srv = d.Groved(["sh", d.ENTRYPOINT], env=env, log_path=os.path.join(tmp, "groved.log"))
        srv.port_file = env["GROVE_PORT_FILE"]
        try:
            try:
                bound = srv.wait_ports(timeout=120)
            except RuntimeError:
                if not own_ports:
                    raise
                # Someone took the port in between: once more, ephemeral.
                print(srv.tail())
                print("note: groved could not bind the manifests' ports; retrying with ephemeral ones")
                srv.close()
                ephemeral(env)
                own_ports = False
                srv = d.Groved(["sh", d.ENTRYPOINT], env=env, log_path=os.path.join(tmp, "groved.log"))
                srv.port_file = env["GROVE_PORT_FILE"]
                bound = srv.wait_ports(timeout=120)
            if own_ports:
                f.check(bound.get("grpc_port") == ports["grpc"] and bound.get("metrics_port") == ports["metrics"]
                        and bound.get("http_port") == ports["http"],
                        f"{ctx}: groved bound {bound}, the manifest says {ports}")
            grpc_addr = f"127.0.0.1:{bound['grpc_port']}"
            check_serving(f, ctx, c, grpc_addr, bound, models)
            check_logs(f, ctx, srv)
            check_drain(f, ctx, srv, pod, c, env_spec, grpc_addr, bound["http_port"])
        finally:
            if f.errors:
                print(srv.tail())
            srv.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_serving(f, ctx, c, grpc_addr, bound, models):
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        service = c[kind]["grpc"].get("service", "")
        status = d.wait_health(grpc_addr, service, "SERVING", 30)
        f.check(status == "SERVING", f"{ctx}: {kind} (service {service!r}) answered {status}")
    for model in models:
        status = d.health_check(grpc_addr, f"model/{model}")
        f.check(status == "SERVING", f"{ctx}: health model/{model} answered {status}")
    status = d.health_check(grpc_addr, "no-such-service")
    f.check(status == "NOT_FOUND", f"{ctx}: health of an unknown service answered {status}, expected NOT_FOUND")
    code, text = d.http_get(f"http://127.0.0.1:{bound['metrics_port']}/metrics")
    f.check(code == 200 and "grove_build_info" in text, f"{ctx}: /metrics answered {code} without grove_build_info")
    for model in models:
        f.check(f'model="{model}"' in text, f"{ctx}: /metrics has no series of model {model}")
    f.check("grove_server_ready 1" in text, f"{ctx}: grove_server_ready is not 1 once SERVING")
    d.check_rest(f, ctx, bound["http_port"], models)


def check_logs(f, ctx, srv):
    srv.log.flush()
    lines = [line for line in d.read(srv.log_path).splitlines() if line.strip()]
    bad = []
    for line in lines:
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict) or "msg" not in obj or "level" not in obj:
                bad.append(line)
        except ValueError:
            bad.append(line)
    f.check(lines and not bad, f"{ctx}: GROVE_LOG_FORMAT=json but {len(bad)} of {len(lines)} log lines are not "
                               f"JSON objects with msg/level, e.g. {bad[:2]}")


def check_drain(f, ctx, srv, pod, c, env_spec, grpc_addr, http_port):
    delay = int(env_spec.get("GROVE_SHUTDOWN_DELAY_SECONDS") or 0)
    grace = int(env_spec.get("GROVE_SHUTDOWN_GRACE_SECONDS") or 30)
    pre = c["lifecycle"]["preStop"]
    pre_sleep = int(pre["exec"]["command"][-1]) if "exec" in pre else int(pre["sleep"]["seconds"])
    budget = pod["terminationGracePeriodSeconds"] - pre_sleep
    start = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    if delay > 0:
        status = d.wait_health(grpc_addr, "", "NOT_SERVING", min(delay, 5) - 0.5)
        f.check(status == "NOT_SERVING",
                f"{ctx}: during the shutdown delay health answered {status}, expected NOT_SERVING")
        f.check(time.monotonic() - start < delay, f"{ctx}: NOT_SERVING came after the shutdown delay")
        code, text = d.http_call(f"http://127.0.0.1:{http_port}/v2/health/ready")
        f.check(code == 503, f"{ctx}: during the shutdown delay REST /v2/health/ready answered {code} {text[:200]}, "
                             "expected 503")
    try:
        rc = srv.proc.wait(budget)
    except Exception:  # noqa: BLE001
        rc = None
    took = time.monotonic() - start
    f.check(rc == 0, f"{ctx}: groved exited with {rc} after SIGTERM (expected 0 within {budget}s)")
    f.check(took >= delay - 0.5, f"{ctx}: groved exited after {took:.1f}s, before its {delay}s shutdown delay")
    print(f"{ctx}: SIGTERM -> exit {rc} in {took:.1f}s (delay {delay}s, grace {grace}s, budget {budget}s)")


def run_kserve(f, groved):
    """deploy/kserve's runtime as KServe starts it: its container's environment, {{.Name}} replaced by
    an InferenceService's name, /mnt/models replaced by a folder holding what the storage initializer
    would put there."""
    runtime = next(doc for doc in d.yaml_load_all(d.read(os.path.join(d.DEPLOY, "kserve",
                                                                       "cluster-serving-runtime.yaml")))
                   if doc["kind"] == "ClusterServingRuntime")
    c = runtime["spec"]["containers"][0]
    golden = os.path.join(d.ROOT, "tests", "golden")
    tmp = tempfile.mkdtemp(prefix="grove-deploy-kserve-")
    try:
        def start(ctx, mnt, isvc):
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GROVED": groved}
            for var, value in d.container_env(c).items():
                env[var] = "2" if isinstance(value, dict) else value.replace("{{.Name}}", isvc)
            env["GROVE_MODEL_REPOSITORY"] = mnt  # what /mnt/models is in the pod
            env["GROVE_KSERVE_REPOSITORY"] = os.path.join(tmp, f"repo-{isvc}")
            env["GROVE_PORT_FILE"] = os.path.join(tmp, f"ports-{isvc}.json")
            if not all(d.port_free(int(env[v])) for v in ("GROVE_HTTP_PORT", "GROVE_GRPC_PORT",
                                                            "GROVE_METRICS_PORT")):
                ephemeral(env)
            srv = d.Groved(["sh", d.ENTRYPOINT], env=env, log_path=os.path.join(tmp, f"{isvc}.log"))
            srv.port_file = env["GROVE_PORT_FILE"]
            return srv

        def meta(case):
            with open(os.path.join(golden, case, "meta.json"), encoding="utf-8") as m:
                return json.load(m)["num_features"]

        # A lone model file (XGBoost UBJSON saved as model.bst, as KServe's xgbserver expects it),
        # beside files that are not models.
        mnt = os.path.join(tmp, "mnt-file")
        os.makedirs(mnt)
        shutil.copy(os.path.join(golden, "xgb_multiclass3", "model.ubj"), os.path.join(mnt, "model.bst"))
        with open(os.path.join(mnt, "requirements.txt"), "w") as out:
            out.write("xgboost\n")
        # A repository (modelFormat grove): served as it is.
        repo = os.path.join(tmp, "mnt-repository")
        models = d.make_model_repository(repo)
        for ctx, folder, isvc, served in [
                ("kserve model file", mnt, "fraud", {"fraud": meta("xgb_multiclass3")}),
                ("kserve repository", repo, "models", models)]:
            srv = start(ctx, folder, isvc)
            try:
                bound = srv.wait_ports(timeout=120)
                if not f.check(bound.get("http_port", 0) > 0, f"{ctx}: no REST port: {bound}"):
                    continue
                d.wait_for(lambda: d.http_call(f"http://127.0.0.1:{bound['http_port']}/v2/health/ready")[0]
                           == 200, 120, f"{ctx}: REST readiness", proc=srv.proc)
                d.check_rest(f, ctx, bound["http_port"], served)
                f.check(srv.terminate() == 0, f"{ctx}: groved did not exit 0 on SIGTERM")
            finally:
                if f.errors:
                    print(srv.tail())
                srv.close()
        # A name that is not a model name (the entry point replaces that folder): refused.
        srv = start("kserve bad name", mnt, "../escape")
        try:
            code = srv.proc.wait(60)
            f.check(code == 2 and "is not a model name" in srv.tail(),
                    f"kserve bad name: exit {code}, log:\n{srv.tail()}")
        finally:
            srv.close()
        # Several model files: refused at start, naming them.
        several = os.path.join(tmp, "mnt-several")
        os.makedirs(several)
        shutil.copy(os.path.join(golden, "xgb_regression", "model.json"), os.path.join(several, "a.json"))
        shutil.copy(os.path.join(golden, "lgb_binary_nan", "model.txt"), os.path.join(several, "b.txt"))
        srv = start("kserve several files", several, "several")
        try:
            code = srv.proc.wait(60)
            f.check(code == 2 and "several model files" in srv.tail() and "a.json" in srv.tail(),
                    f"kserve several files: exit {code}, log:\n{srv.tail()}")
        finally:
            srv.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--groved", required=True)
    args = ap.parse_args()
    if not d.tool("kubectl", "KUBECTL"):
        d.skip("kubectl not installed")
    try:
        import grpc  # noqa: F401, PLC0415
    except ImportError:
        d.skip("python grpcio not installed (scripts/install-deps.sh installs it)")
    if not os.path.exists(args.groved):
        print(f"groved not found at {args.groved}: build the groved target")
        return 1
    f = d.Failures("deploy groved")
    flags, text = d.helpfull_flags(args.groved)
    if not f.check(flags, f"`groved --helpfull` lists no flags:\n{text[:2000]}"):
        return f.finish()
    for var, flag in d.entrypoint_table().items():
        f.check(flag[2:] in flags, f"entry point variable {var}: `groved --helpfull` has no {flag}")
    for flag in d.documented_flags():
        f.check(flag in flags, f"docs/operations.md documents --{flag}, `groved --helpfull` does not list it")
    for overlay in d.OVERLAYS:
        run_overlay(f, args.groved, overlay, flags)
    run_kserve(f, args.groved)
    return f.finish()


if __name__ == "__main__":
    sys.exit(main())
