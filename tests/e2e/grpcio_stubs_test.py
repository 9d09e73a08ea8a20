"""(b) groved through Python grpcio stubs generated from proto/ at test time.

grpc_tools.protoc compiles proto/grove/v1/grove.proto and proto/inference/grpc_service.proto into a
temporary directory; the stubs call Predict / Explain / ExplainStream / ListModels /
GetModelMetadata and the KServe readiness RPCs, health and reflection, and the answers are compared
with the local `grove` CLI's, value for value.
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402

# The standard health and reflection services, written here with only the fields the test uses
# (wire compatible subsets), so that no extra pip package is needed.
HEALTH_PROTO = """
syntax = "proto3";
package grpc.health.v1;
message HealthCheckRequest { string service = 1; }
message HealthCheckResponse {
  enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2; SERVICE_UNKNOWN = 3; }
  ServingStatus status = 1;
}
service Health {
  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);
  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);
}
"""
REFLECTION_PROTO = """
syntax = "proto3";
package grpc.reflection.v1alpha;
message ServerReflectionRequest {
  string host = 1;
  oneof message_request { string file_containing_symbol = 4; string list_services = 7; }
}
message ServiceResponse { string name = 1; }
message FileDescriptorResponse { repeated bytes file_descriptor_proto = 1; }
message ListServiceResponse { repeated ServiceResponse service = 1; }
message ErrorResponse { int32 error_code = 1; string error_message = 2; }
message ServerReflectionResponse {
  string valid_host = 1;
  ServerReflectionRequest original_request = 2;
  oneof message_response {
    FileDescriptorResponse file_descriptor_response = 4;
    ListServiceResponse list_services_response = 6;
    ErrorResponse error_response = 7;
  }
}
service ServerReflection {
  rpc ServerReflectionInfo(stream ServerReflectionRequest) returns (stream ServerReflectionResponse);
}
"""


def main():
    args = h.parse_args()
    try:
        import grpc
        from grpc_tools import protoc
    except ImportError as e:
        h.skip(f"python grpcio / grpcio-tools missing: {e}")
    import numpy as np

    proto_dir = os.path.join(args.source_dir, "proto")
    gen = tempfile.mkdtemp(prefix="grove_stubs_")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    for proto in ("grove/v1/grove.proto", "inference/grpc_service.proto"):
        rc = protoc.main(["grpc_tools.protoc", f"-I{proto_dir}", f"-I{include}",
                          f"--python_out={gen}", f"--grpc_python_out={gen}",
                          os.path.join(proto_dir, proto)])
        if rc != 0:
            print(f"FAIL: protoc {proto} returned {rc}")
            return 1
    extra = os.path.join(gen, "extra")
    # Top-level module names: a "grpc/..." path would clash with the grpc package.
    os.makedirs(extra, exist_ok=True)
    for rel, text in (("e2e_health.proto", HEALTH_PROTO),
                      ("e2e_reflection.proto", REFLECTION_PROTO),
                      ("e2e_reflection_v1.proto", REFLECTION_PROTO.replace("v1alpha", "v1"))):
        with open(os.path.join(extra, rel), "w") as out:
            out.write(text)
        rc = protoc.main(["grpc_tools.protoc", f"-I{extra}", f"--python_out={gen}",
                          f"--grpc_python_out={gen}", os.path.join(extra, rel)])
        if rc != 0:
            print(f"FAIL: protoc {rel} returned {rc}")
            return 1
    sys.path.insert(0, gen)
    from grove.v1 import grove_pb2, grove_pb2_grpc  # noqa: E402
    from inference import grpc_service_pb2, grpc_service_pb2_grpc  # noqa: E402

    f = h.Failures()
    repo = tempfile.mkdtemp(prefix="grove_repo_py_")
    xdir = tempfile.mkdtemp(prefix="grove_x32_")
    cases = h.corpus_cases(args.source_dir)
    served = []
    for name, d, meta, model in cases:
        h.install_model(repo, name, 1, model)
        served.append((name, d, meta, model))
    with h.Groved(args.groved, repo, ["--strict_readiness=false",
                                      "--repository_poll_seconds=0"]) as server:
        channel = grpc.insecure_channel(server.target, options=[
            ("grpc.max_receive_message_length", 1 << 30),
            ("grpc.max_send_message_length", 1 << 30)])
        grove = grove_pb2_grpc.GroveStub(channel)
        kserve = grpc_service_pb2_grpc.GRPCInferenceServiceStub(channel)
        h.wait_ready(lambda: kserve.ServerReady(grpc_service_pb2.ServerReadyRequest(),
                                                timeout=2).ready)
        f.check(kserve.ServerLive(grpc_service_pb2.ServerLiveRequest()).live, "ServerLive")

        listed = {m.name: m for m in grove.ListModels(grove_pb2.ListModelsRequest()).models}
        checked = 0
        for name, d, meta, model in served:
            m = listed.get(name)
            if m is None or not m.ready:
                # Models Grove refuses to load are reported, not served; the local CLI refuses too.
                local_ok = True
                try:
                    h.local_cli(args.grove, ["predict"], model, os.path.join(d, "X.csv"))
                except RuntimeError:
                    local_ok = False
                f.check(not local_ok, f"{name}: loads locally but is not ready on the server")
                continue
            x_path = h.float_csv(os.path.join(d, "X.csv"), xdir)
            X = np.array(h.read_csv(x_path), dtype=np.float32)
            md = grove.GetModelMetadata(grove_pb2.GetModelMetadataRequest(model=name))
            f.check(md.num_features == X.shape[1], f"{name}: metadata features {md.num_features}")
            req = grove_pb2.PredictRequest(
                model=name,
                rows=grove_pb2.Matrix(rows=X.shape[0], cols=X.shape[1], values=X.ravel().tolist()),
                outputs=[grove_pb2.OUTPUT_MARGIN, grove_pb2.OUTPUT_PREDICTION,
                         grove_pb2.OUTPUT_LEAF])
            resp = grove.Predict(req, timeout=120)
            for field, kind in (("margin", "margin"), ("prediction", "prediction"),
                                ("leaf", "leaf")):
                mat = getattr(resp, field)
                got = np.array(mat.values, dtype=np.float32).reshape(mat.rows, mat.cols).tolist()
                want = h.local_cli(args.grove, ["predict", "--kind", kind], model, x_path)
                h.compare(f, f"{name} {kind}", got, want)
            # float64 rows (values_f64) of the corpus' double text: answers equal the local CLI's
            # on that text (LightGBM routes the doubles; the server converts as it does).
            x_orig = os.path.join(d, "X.csv")
            x64 = [float(v) for line in open(x_orig).read().splitlines() if line.strip()
                   for v in line.split(",")]
            r64 = grove.Predict(grove_pb2.PredictRequest(
                model=name, rows=grove_pb2.Matrix(rows=X.shape[0], cols=X.shape[1],
                                                  values_f64=x64),
                outputs=[grove_pb2.OUTPUT_PREDICTION]), timeout=120)
            got = np.array(r64.prediction.values, dtype=np.float32).reshape(
                r64.prediction.rows, r64.prediction.cols).tolist()
            h.compare(f, f"{name} prediction (values_f64)", got,
                      h.local_cli(args.grove, ["predict"], model, x_orig))
            if md.explainable:
                want = h.local_cli(args.grove, ["explain"], model, x_path)
                e = grove.Explain(grove_pb2.ExplainRequest(model=name, rows=req.rows), timeout=120)
                got = np.array(e.values.values, dtype=np.float32).reshape(
                    e.values.rows, e.values.cols).tolist()
                h.compare(f, f"{name} explain", got, want)
                # ExplainStream: 10-row messages, answers in order with their sequence.
                msgs = []
                for i, start in enumerate(range(0, X.shape[0], 10)):
                    part = X[start:start + 10]
                    msgs.append(grove_pb2.ExplainRequest(
                        model=name, sequence=i,
                        rows=grove_pb2.Matrix(rows=part.shape[0], cols=part.shape[1],
                                              values=part.ravel().tolist())))
                got = []
                for i, r in enumerate(grove.ExplainStream(iter(msgs), timeout=120)):
                    f.check(r.sequence == i, f"{name} stream: sequence {r.sequence} at {i}")
                    got += np.array(r.values.values, dtype=np.float32).reshape(
                        r.values.rows, r.values.cols).tolist()
                h.compare(f, f"{name} ExplainStream", got, want)
            checked += 1
        f.check(checked >= 5, f"only {checked} models checked")

        # Errors come back with their canonical codes.
        def code_of(call):
            try:
                call()
            except grpc.RpcError as e:
                return e.code()
            return grpc.StatusCode.OK

        one = served[0][0]
        f.check(code_of(lambda: grove.Predict(grove_pb2.PredictRequest(
            model="no_such_model", rows=grove_pb2.Matrix(rows=1, cols=1, values=[0.0])))) ==
            grpc.StatusCode.NOT_FOUND, "unknown model is not NOT_FOUND")
        f.check(code_of(lambda: grove.Predict(grove_pb2.PredictRequest(
            model=one, rows=grove_pb2.Matrix(rows=1, cols=1000, values=[0.0] * 1000)))) ==
            grpc.StatusCode.INVALID_ARGUMENT, "wrong feature count is not INVALID_ARGUMENT")
        f.check(code_of(lambda: grove.Predict(grove_pb2.PredictRequest(model=one))) ==
                grpc.StatusCode.INVALID_ARGUMENT, "empty request is not INVALID_ARGUMENT")

        # Health (per-model names) and reflection are served too.
        import e2e_health_pb2 as health_pb2  # noqa: E402 (generated above)
        import e2e_health_pb2_grpc as health_pb2_grpc  # noqa: E402
        import e2e_reflection_pb2 as reflection_pb2  # noqa: E402
        import e2e_reflection_pb2_grpc as reflection_pb2_grpc  # noqa: E402
        health = health_pb2_grpc.HealthStub(channel)
        st = health.Check(health_pb2.HealthCheckRequest(service=""))
        f.check(st.status == health_pb2.HealthCheckResponse.SERVING, "health '' not SERVING")
        st = health.Check(health_pb2.HealthCheckRequest(service=f"model/{one}"))
        f.check(st.status == health_pb2.HealthCheckResponse.SERVING,
                f"health model/{one} not SERVING")
        f.check(code_of(lambda: health.Check(health_pb2.HealthCheckRequest(
            service="model/no_such_model"))) == grpc.StatusCode.NOT_FOUND,
            "health of an unknown model is not NOT_FOUND")
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=5)
        f.check(next(watch).status == health_pb2.HealthCheckResponse.SERVING,
                "health Watch '' not SERVING")
        watch.cancel()
        # Reflection in both versions (v1alpha from gRPC, v1 from groved), with every service's
        # descriptors: health too (grpcurl resolves grpc.health.v1.Health/Check by it).
        import e2e_reflection_v1_pb2 as reflection_v1_pb2  # noqa: E402
        import e2e_reflection_v1_pb2_grpc as reflection_v1_pb2_grpc  # noqa: E402
        from google.protobuf import descriptor_pb2
        for version, pb2, pb2_grpc in (("v1alpha", reflection_pb2, reflection_pb2_grpc),
                                       ("v1", reflection_v1_pb2, reflection_v1_pb2_grpc)):
            refl = pb2_grpc.ServerReflectionStub(channel)
            answers = refl.ServerReflectionInfo(iter([
                pb2.ServerReflectionRequest(list_services="")]), timeout=10)
            names = [s.name for a in answers for s in a.list_services_response.service]
            f.check("grove.v1.Grove" in names and "inference.GRPCInferenceService" in names,
                    f"reflection {version} lists {names}")
            for symbol, package, service in (("grpc.health.v1.Health", "grpc.health.v1", "Health"),
                                             ("grove.v1.Grove", "grove.v1", "Grove"),
                                             ("inference.GRPCInferenceService", "inference",
                                              "GRPCInferenceService")):
                answers = refl.ServerReflectionInfo(iter([pb2.ServerReflectionRequest(
                    file_containing_symbol=symbol)]), timeout=10)
                files = [descriptor_pb2.FileDescriptorProto.FromString(b) for a in answers
                         for b in a.file_descriptor_response.file_descriptor_proto]
                services = [sv.name for fd in files if fd.package == package for sv in fd.service]
                f.check(service in services, f"reflection {version} has no {symbol} descriptor: "
                        f"{[fd.name for fd in files]}")
            answers = list(refl.ServerReflectionInfo(iter([pb2.ServerReflectionRequest(
                file_containing_symbol="no.such.Symbol")]), timeout=10))
            f.check(answers and answers[0].error_response.error_code == 5,
                    f"reflection {version}: an unknown symbol is not NOT_FOUND")
        channel.close()
    f.finish("e2e_grpcio_stubs")


if __name__ == "__main__":
    sys.exit(main())
