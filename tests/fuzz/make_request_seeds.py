#!/usr/bin/env python3
"""Writes the seed requests of the request converter fuzz targets into tests/fuzz/seeds/.

Valid and near-valid grove.v1 PredictRequest / ExplainRequest and KServe ModelInferRequest messages
for the fuzz models (tests/fuzz/request_fuzz_common.h: 8 features for the demo model; city, x, size
for the categories model), so that
libFuzzer starts from requests that reach the conversion code instead of having to discover the
shape rules. Run from anywhere; needs grpcio-tools (scripts/install-deps.sh installs it).
"""
import pathlib
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fuzz" / "seeds"


def main():
    with tempfile.TemporaryDirectory() as gen:
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                        f"--python_out={gen}", "grove/v1/grove.proto",
                        "inference/grpc_service.proto"], check=True)
        sys.path.insert(0, gen)
        from grove.v1 import grove_pb2
        from inference import grpc_service_pb2 as kserve

        seeds = {}
        p = grove_pb2.PredictRequest(model="m")
        p.rows.rows, p.rows.cols = 2, 8
        p.rows.values.extend([0.5 * i for i in range(16)])
        seeds["grove_request/predict_f32"] = p
        p = grove_pb2.PredictRequest(model="m", explain=True, explain_rows=[1, 0, 1],
                                     outputs=[1, 2, 3], iteration_begin=0, iteration_end=2)
        p.rows.rows, p.rows.cols = 2, 8
        p.rows.values_f64.extend([0.25 * i - 1 for i in range(16)])
        seeds["grove_request/predict_f64_explain_rows"] = p
        e = grove_pb2.ExplainRequest(model="m", interactions=True, top_k=3, omit_values=True)
        e.rows.rows, e.rows.cols = 1, 8
        e.rows.values.extend([float("nan")] * 8)
        seeds["grove_request/explain_nan"] = e
        p = grove_pb2.PredictRequest(model="m", explain=True)
        p.rows.rows, p.rows.cols = 2, 8
        p.rows.raw_f32 = struct.pack("<16f", *[0.5 * i for i in range(16)])
        seeds["grove_request/predict_raw_f32"] = p
        e = grove_pb2.ExplainRequest(model="m", top_k=2)
        e.rows.rows, e.rows.cols = 1, 8
        e.rows.raw_f64 = struct.pack("<8d", *[0.25 * i - 1 for i in range(8)])
        seeds["grove_request/explain_raw_f64"] = e

        # Shared memory (the fuzz targets register regions "fuzz" and "odd" of 64 KiB).
        p = grove_pb2.PredictRequest(model="m", explain=True, outputs=[1, 2])
        p.rows.rows, p.rows.cols = 2, 8
        p.rows.shared_memory_f32.region = "fuzz"
        p.rows.shared_memory_f32.byte_size = 64
        p.output_shared_memory.region = "fuzz"
        p.output_shared_memory.offset = 4096
        p.output_shared_memory.byte_size = 8192
        seeds["grove_request/predict_shared_memory"] = p
        e = grove_pb2.ExplainRequest(model="m", interactions=True)
        e.rows.rows, e.rows.cols = 1, 8
        e.rows.shared_memory_f64.region = "odd"
        e.rows.shared_memory_f64.offset = 1
        e.rows.shared_memory_f64.byte_size = 64
        e.output_shared_memory.region = "odd"
        e.output_shared_memory.offset = 65
        e.output_shared_memory.byte_size = 1024
        seeds["grove_request/explain_shared_memory_f64"] = e

        def infer(datatype, rows, cols, raw=None, typed=None):
            r = kserve.ModelInferRequest(model_name="m", model_version="1")
            t = r.inputs.add(name="input__0", datatype=datatype, shape=[rows, cols])
            if raw is not None:
                r.raw_input_contents.append(raw)
            if typed is not None:
                getattr(t.contents, "fp32_contents" if datatype == "FP32" else "fp64_contents").extend(typed)
            r.outputs.add(name="output__0")
            r.outputs.add(name="treeshap_output")
            return r

        seeds["kserve_request/fp32_raw"] = infer("FP32", 2, 8, raw=struct.pack("<16f", *range(16)))
        seeds["kserve_request/fp32_typed"] = infer("FP32", 1, 8, typed=[0.5] * 8)
        seeds["kserve_request/fp64_raw"] = infer("FP64", 1, 8, raw=struct.pack("<8d", *range(8)))
        seeds["kserve_request/fp64_typed"] = infer("FP64", 2, 8, typed=[0.1 * i for i in range(16)])
        seeds["kserve_request/fp64_huge_shape"] = infer("FP64", 2 ** 61, 16)
        r = infer("FP32", 2, 8)
        for tensor, offset, size in ((r.inputs[0], 0, 64), (r.outputs[0], 4096, 16),
                                     (r.outputs[1], 8192, 72)):
            tensor.parameters["shared_memory_region"].string_param = "fuzz"
            tensor.parameters["shared_memory_offset"].int64_param = offset
            tensor.parameters["shared_memory_byte_size"].int64_param = size
        seeds["kserve_request/fp32_shared_memory"] = r

        # Columnar requests for the categories model (city: names, x: numbers, size: names of
        # number categories), typed and raw (BYTES elements length-prefixed).
        r = kserve.ModelInferRequest(model_name="m")
        city = r.inputs.add(name="city", datatype="BYTES", shape=[2])
        city.contents.bytes_contents.extend([b"lyon", b""])
        r.inputs.add(name="x", datatype="FP64", shape=[2, 1]).contents.fp64_contents.extend(
            [0.5, -1])
        r.inputs.add(name="size", datatype="BYTES", shape=[2]).contents.bytes_contents.extend(
            [b"10", b"tokyo"])
        seeds["kserve_request/columns_typed"] = r
        r = kserve.ModelInferRequest(model_name="m")
        r.inputs.add(name="size", datatype="INT64", shape=[2])
        r.inputs.add(name="city", datatype="BYTES", shape=[2])
        r.inputs.add(name="x", datatype="BOOL", shape=[2])
        r.raw_input_contents.extend([struct.pack("<2q", 0, 2),
                                     struct.pack("<I", 5) + b"paris" + struct.pack("<I", 4) + b"lyon",
                                     b"\x01\x00"])
        seeds["kserve_request/columns_raw"] = r
        p = grove_pb2.PredictRequest(model="m")
        p.rows.rows, p.rows.cols = 2, 3
        p.rows.values.extend([float("nan"), 0.5, float("nan"), float("nan"), -1, float("nan")])
        p.rows.category_columns.add(feature="city", names=[b"brest", b""])
        p.rows.category_columns.add(feature="size", names=[b"42", b"3"])
        seeds["grove_request/category_columns"] = p

        # Feature groups: by name and by index in grove.v1, as a JSON parameter in KServe.
        e = grove_pb2.ExplainRequest(model="m")
        e.rows.rows, e.rows.cols = 1, 8
        e.rows.values.extend([0.5] * 8)
        e.groups.add(name="ab", features=["f0", "f1"])
        e.groups.add(name="cd", feature_indices=[2, 3])
        seeds["grove_request/explain_groups"] = e
        r = infer("FP32", 1, 8, typed=[0.5] * 8)
        r.parameters["groups"].string_param = '{"ab": ["f0", "f1"], "cd": [2, 3]}'
        seeds["kserve_request/groups"] = r

        for name, message in seeds.items():
            path = OUT / f"{name}.pb"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(message.SerializeToString())
            print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
