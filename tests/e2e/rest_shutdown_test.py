#!/usr/bin/env python3
"""SIGTERM ends groved within its grace period whatever its REST clients do: with a kept-alive
client idle between requests, one that connected and sent nothing, one sending its request head
slowly, and busy ones whose calls (SHAP of 65,536 rows on a 2,000-tree model, several seconds of
compute each) are still queued or computing at the grace deadline. groved must exit 0 within the
grace period plus 1 s, close the idle connections at once, and the busy clients must get an
answer or a closed connection, never a hang.

  rest_shutdown_test.py --groved build/cpu/bin/groved --grove build/cpu/bin/grove --source-dir .
"""
import json
import os
import socket
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402

GRACE_SECONDS = 2
ROWS = 65536
BUSY_CLIENTS = 4


def heavy_model(source_dir, path):
    """examples' demo model with its 40 trees repeated 50 times: the same features, 50 times the
    work per row."""
    m = json.load(open(os.path.join(source_dir, "examples/models/demo/1/model.json")))
    model = m["learner"]["gradient_booster"]["model"]
    trees = []
    for _ in range(50):
        for t in model["trees"]:
            t = dict(t)
            t["id"] = len(trees)
            trees.append(t)
    model["trees"] = trees
    model["tree_info"] = [0] * len(trees)
    model["iteration_indptr"] = list(range(len(trees) + 1))
    model["gbtree_model_param"]["num_trees"] = str(len(trees))
    with open(path, "w") as f:
        json.dump(m, f)


def closed_within(sock, seconds):
    """True when the server closes `sock` (after whatever it still sends) within `seconds`."""
    sock.settimeout(seconds)
    end = time.time() + seconds
    try:
        while time.time() < end:
            if not sock.recv(65536):
                return True
    except (socket.timeout, ConnectionResetError):
        return False
    return False


def main():
    args = h.parse_args()
    f = h.Failures()
    work = tempfile.mkdtemp(prefix="grove_rest_shutdown_")
    repo = os.path.join(work, "repo")
    model = os.path.join(work, "heavy.json")
    heavy_model(args.source_dir, model)
    h.install_model(repo, "heavy", 1, model)
    g = h.Groved(args.groved, repo, ["--use_gpu=false", f"--shutdown_grace_seconds={GRACE_SECONDS}",
                                     "--max_queue_wait_ms=3600000"])
    port = g.http_port

    idle = socket.create_connection(("127.0.0.1", port))
    idle.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
    f.check(idle.recv(64).startswith(b"HTTP/1.1 200"), "the idle client's first request")
    silent = socket.create_connection(("127.0.0.1", port))
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"GET /v2/health/live HTTP/1.1\r\nX-Slow: ")

    raw = struct.pack("<%df" % (ROWS * 8), *([0.5] * (ROWS * 8)))
    head = json.dumps({
        "inputs": [{"name": "input__0", "shape": [ROWS, 8], "datatype": "FP32",
                    "parameters": {"binary_data_size": len(raw)}}],
        "outputs": [{"name": "treeshap_output", "parameters": {"binary_data": True}}]}).encode()
    request = (b"POST /v2/models/heavy/infer HTTP/1.1\r\nHost: x\r\n"
               b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
               % (len(head), len(head) + len(raw))) + head + raw
    outcomes = []
    sent = threading.Barrier(BUSY_CLIENTS + 1)

    def busy():
        s = socket.create_connection(("127.0.0.1", port))
        try:
            s.sendall(request)
            sent.wait()
            s.settimeout(60)
            outcomes.append(s.recv(16)[:12] or b"closed")
        except OSError as e:
            outcomes.append(type(e).__name__.encode())
        finally:
            s.close()

    threads = [threading.Thread(target=busy) for _ in range(BUSY_CLIENTS)]
    for t in threads:
        t.start()
    sent.wait()  # every busy request is sent; the first is computing, the others queued

    start = time.time()
    g.proc.send_signal(h.signal.SIGTERM)
    f.check(closed_within(idle, 1.0), "the idle kept-alive connection was not closed at once")
    f.check(closed_within(silent, 1.0), "the silent connection was not closed at once")
    try:
        code = g.proc.wait(GRACE_SECONDS + 30)
    except h.subprocess.TimeoutExpired:
        code = None
    took = time.time() - start
    for t in threads:
        t.join(30)
    print(f"groved exited {code} {took:.2f} s after SIGTERM (grace {GRACE_SECONDS} s); busy "
          f"clients got {sorted(o.decode(errors='replace') for o in outcomes)}")
    f.check(code == 0, f"groved exited {code}")
    f.check(took < GRACE_SECONDS + 1, f"groved took {took:.2f} s to exit, grace {GRACE_SECONDS} s")
    f.check(closed_within(slow, 1.0), "the slow client's connection stayed open")
    f.check(len(outcomes) == BUSY_CLIENTS, f"busy clients still waiting: {outcomes}")
    g.stop()
    for s in (idle, silent, slow):
        s.close()
    f.finish("e2e_rest_shutdown")


if __name__ == "__main__":
    main()
