"""The commands README.md and docs/ show outside api.md's examples (which e2e_api_docs runs), run as
written against the built programs and a real groved (CTest e2e_docs_commands):

  * README.md's scripts/demo.sh (when the groved under test is build/cpu's, which the script
    builds: its install and build steps are then checks that find nothing to do), on free ports
    (GROVE_GRPC_PORT, GROVE_HTTP_PORT, GROVE_METRICS_PORT), then every command it prints for
    "another terminal" (the bench 1 second long), then Ctrl-C: exit 0;
  * README.md "Using it": every line, each optional [...] part left out and then given in each of
    its forms; the file names it uses as placeholders (model.json, rows.csv, bg.csv) are the demo
    model, its rows and its background; the groved line is the harness's groved on examples/models
    (ephemeral ports where the line says 8001 / 8002); `grove predict --server` must print byte for
    byte what the local `grove predict` prints;
  * docs/interventional.md: its `grove explain --background` line, likewise;
  * docs/api.md "grove bench": both load generator lines (1-second runs in place of 30 s / 10 s);
    the open loop's --json report must show answered requests;
  * docs/operations.md: the first groved line (the harness stands for it); "Bearer tokens": the
    token file as shown, groved started with the flags of its groved line, both client lines with
    the infer token (and a call without a token refused); "Client certificate roles": the roles file
    and groved line as shown, with certificates made by openssl, the infer name's certificate served
    (the local CLI's bytes) and an unlisted name's refused; "config.json": the example file, as a
    model's config.json and as --default_model_config, loads and serves.
Commands that need what CI does not have (a Kubernetes cluster, Docker, helm, a GPU) are
not here; docs/deploy.md says what was and was not run.
"""

import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402


def section(text, title):
    """The text from heading `title` to the next heading of the same or a higher level."""
    start = text.index(title)
    level = len(title) - len(title.lstrip("#"))
    rest = text[start + len(title):]
    m = re.search(r"\n#{1,%d} " % level, rest)
    return rest[:m.start()] if m else rest


def indented_blocks(text):
    """The indented (4-space) blocks of `text`, each a list of commands: continuation lines joined,
    comment lines and trailing comments dropped."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("    "):
            current = current if current is not None else []
            current.append(line[4:])
        elif line.strip() == "" and current is not None:
            continue
        elif current is not None:
            blocks.append(current)
            current = None
    if current is not None:
        blocks.append(current)
    out = []
    for lines in blocks:
        commands, joined = [], ""
        for line in lines:
            if line.lstrip().startswith("#"):
                continue
            joined += re.sub(r"\s+#.*$", "", line).strip()
            if joined.endswith("\\"):
                joined = joined[:-1] + " "
            else:
                commands.append(joined)
                joined = ""
        out.append(commands)
    return out


def variants(command):
    """`command` with every optional [...] part left out, then in each of its forms:
    "[--kind a|b]" -> "", "--kind a", "--kind b"; "[--flag]" -> "", "--flag"."""
    groups = re.findall(r"\[([^\]]+)\]", command)
    choices = []
    for g in groups:
        flag, _, values = g.partition(" ")
        choices.append([""] + ([f"{flag} {v}" for v in values.split("|")] if values else [flag]))
    out = []
    for pick in itertools.product(*choices):
        c = command
        for g, p in zip(groups, pick):
            c = c.replace(f"[{g}]", p, 1)
        out.append(" ".join(c.split()))
    return out


def run(f, what, command, cwd, env=None, expect_ok=True):
    r = subprocess.run(["bash", "-e", "-c", command], cwd=cwd, capture_output=True, text=True,
                       timeout=300, env=env)
    if expect_ok is None:  # the caller judges the exit code
        pass
    elif expect_ok:
        f.check(r.returncode == 0, f"{what}: `{command}` failed ({r.returncode}):\n{r.stdout[-2000:]}"
                                   f"{r.stderr[-2000:]}")
    else:
        f.check(r.returncode != 0, f"{what}: `{command}` succeeded, expected a refusal")
    return r


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_demo(f, src, groved):
    """scripts/demo.sh on free ports, the commands it prints, Ctrl-C."""
    if os.path.realpath(groved) != os.path.realpath(os.path.join(src, "build", "cpu", "bin", "groved")):
        print(f"note: scripts/demo.sh not run: it builds build/cpu, and the groved under test is {groved}")
        return
    env = dict(os.environ, GROVE_GRPC_PORT=str(free_port()), GROVE_HTTP_PORT=str(free_port()),
               GROVE_METRICS_PORT=str(free_port()))
    proc = subprocess.Popen(["scripts/demo.sh"], cwd=src, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        # The commands it prints once groved is about to start (the build may take a while).
        deadline = time.monotonic() + 900
        while not any(line.strip().startswith("curl") and "/metrics" in line for line in lines):
            if proc.poll() is not None or time.monotonic() > deadline:
                f.check(False, "scripts/demo.sh printed no commands:\n" + "".join(lines[-40:]))
                return
            time.sleep(0.2)
        start = next(i for i, line in enumerate(lines) if "In another terminal:" in line)
        commands = [line.strip() for line in lines[start + 1:] if line.startswith("     ")]
        commands = commands[:next(i for i, c in enumerate(commands) if c.startswith("curl") and "/metrics" in c) + 1]
        f.check(len(commands) == 5, f"scripts/demo.sh printed {commands}")
        grpc_port = int(env["GROVE_GRPC_PORT"])
        deadline = time.monotonic() + 120
        while h_health(grpc_port) != "SERVING" and time.monotonic() < deadline:
            time.sleep(0.2)
        for c in commands:
            c += " --duration 1" if " bench " in c else ""
            r = run(f, "scripts/demo.sh's command", c, src)
            if "ready" in c:
                f.check(r.stdout.strip() == "200", f"`{c}` printed {r.stdout!r}")
        print(f"scripts/demo.sh served its {len(commands)} commands")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        reader.join(5)
        f.check(rc == 0, f"scripts/demo.sh exited {rc} on Ctrl-C:\n" + "".join(lines[-20:]))


def client_certificate_roles(f, groved, src, ops, work, env, local_predict):
    """operations.md "Client certificate roles": its roles file and groved line as shown (the files
    made with openssl: a CA, the server's certificate, a client certificate per name), then a
    predict with the infer name's certificate (the local CLI's bytes) and one with a certificate of
    a name the file does not list (refused)."""
    openssl = shutil.which("openssl")
    if not f.check(openssl is not None, "openssl is not installed (Debian package openssl)"):
        return
    block = indented_blocks(section(ops, "### Client certificate roles"))[0]
    roles = [c for c in block if c.split()[0] in ("infer", "admin")]
    groved_line = [" ".join(c.split()) for c in block if c.startswith("groved ")]
    f.check(groved_line == ["groved --model_repository=/models --tls_cert_file=server.pem "
                            "--tls_key_file=server.key --tls_client_ca_file=clients-ca.pem "
                            "--tls_client_roles_file=/etc/grove/client-roles"],
            f"operations.md's client certificate groved line changed: {groved_line}")
    names = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in roles}
    if not f.check(set(names) == {"infer", "admin"}, f"operations.md's client-roles lines: {roles}"):
        return
    pki = os.path.join(work, "pki")
    os.makedirs(pki)

    def ssl(*a):
        r = subprocess.run([openssl] + list(a), cwd=pki, capture_output=True, text=True, timeout=120)
        f.check(r.returncode == 0, f"openssl {' '.join(a[:2])}: {r.stderr[-500:]}")

    with open(os.path.join(pki, "server.ext"), "w") as out:
        out.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    with open(os.path.join(pki, "client.ext"), "w") as out:
        out.write("extendedKeyUsage=clientAuth\n")
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "clients-ca.pem",
        "-days", "2", "-subj", "/CN=grove-docs-ca")
    for who, cn, ext in (("server", "localhost", "server.ext"), ("infer", names["infer"], "client.ext"),
                         ("stranger", "not listed", "client.ext")):
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out", f"{who}.csr",
            "-subj", f"/CN={cn}")
        ssl("x509", "-req", "-in", f"{who}.csr", "-CA", "clients-ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{who}.pem", "-days", "2", "-extfile", ext)
    roles_file = os.path.join(work, "client-roles")
    with open(roles_file, "w") as out:
        out.write("\n".join(roles) + "\n")
    flags = [a.replace("/etc/grove/client-roles", roles_file)
             .replace("=server", "=" + os.path.join(pki, "server"))
             .replace("=clients-ca.pem", "=" + os.path.join(pki, "clients-ca.pem"))
             for a in groved_line[0].split()[2:]]
    with h.Groved(groved, os.path.join(src, "examples", "models"), flags) as server:
        def predict(who):
            return run(f, f"a call with the {who} certificate",
                       f"grove predict --server {server.target} --model demo --input rows.csv "
                       f"--tls-ca {pki}/clients-ca.pem --tls-cert {pki}/{who}.pem --tls-key {pki}/{who}.key",
                       work, env, expect_ok=who != "stranger")
        r = predict("infer")
        f.check(r.stdout == local_predict, "operations.md's client certificate roles: the infer "
                                           "certificate's prediction differs from the local CLI")
        r = predict("stranger")
        f.check("PERMISSION_DENIED" in r.stderr, f"a certificate of an unlisted name: {r.stderr[-500:]}")
    print(f"operations.md: client certificate roles as shown (infer = {names['infer']!r})")


def h_health(port):
    """grpc.health.v1 Check of "" through deploy_lib (no generated code), or an error name."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
    import deploy_lib  # noqa: PLC0415
    return deploy_lib.health_check(f"127.0.0.1:{port}", "", timeout=2)


def main():
    args = h.parse_args()
    args.grove, args.groved = os.path.abspath(args.grove), os.path.abspath(args.groved)
    src = os.path.abspath(args.source_dir)
    bin_dir = os.path.dirname(os.path.abspath(args.grove))
    f = h.Failures()
    demo = os.path.join(src, "examples", "models", "demo")
    run_demo(f, src, args.groved)
    work = tempfile.mkdtemp(prefix="grove_docs_commands_")
    try:
        # A directory laid out like the repository root: examples/, and the placeholders' files.
        os.symlink(os.path.join(src, "examples"), os.path.join(work, "examples"))
        shutil.copyfile(os.path.join(demo, "1", "model.json"), os.path.join(work, "model.json"))
        shutil.copyfile(os.path.join(src, "examples", "rows.csv"), os.path.join(work, "rows.csv"))
        shutil.copyfile(os.path.join(demo, "background.csv"), os.path.join(work, "bg.csv"))
        local_predict = subprocess.run([args.grove, "predict", "--model", "model.json", "--input", "rows.csv",
                                        "--no-progress"], cwd=work, capture_output=True, text=True).stdout

        def at(command, server):
            return (command.replace("build/cpu/bin/", bin_dir + "/")
                    .replace("localhost:8001", server.target).replace("groved:8001", server.target))

        readme = indented_blocks(section(open(os.path.join(src, "README.md")).read(), "## Using it"))
        commands = [c for block in readme for c in block]
        served = [c for c in commands if "localhost:8001" in c]
        groved = [c for c in commands if c.startswith("build/cpu/bin/groved ")]
        f.check(groved == ["build/cpu/bin/groved --model_repository=examples/models --grpc_port=8001 "
                           "--metrics_port=8002"], f"README's groved line changed: {groved}")
        interventional = indented_blocks(open(os.path.join(src, "docs", "interventional.md")).read())[0]
        api = open(os.path.join(src, "docs", "api.md")).read()
        bench = [c for block in indented_blocks(section(api, "### grove bench")) for c in block]
        f.check(len(bench) == 2 and all(c.startswith("grove bench --server localhost:8001") for c in bench),
                f"api.md's grove bench lines changed: {bench}")

        # Local commands: every form of every line (README's name build/cpu/bin/grove, the others
        # grove on PATH).
        count = 0
        env = dict(os.environ, PATH=bin_dir + ":" + os.environ.get("PATH", ""))
        for command in [c for c in commands if c not in served and c not in groved] + interventional:
            for c in variants(command):
                r = run(f, "local command", c.replace("build/cpu/bin/", bin_dir + "/"), work, env)
                f.check(r.stdout.strip() != "", f"`{c}` printed nothing")
                count += 1
        print(f"{count} forms of the local commands ran")

        with h.Groved(args.groved, os.path.join(src, "examples", "models")) as server:
            for c in served:
                c = at(c, server)
                if " bench " in c:
                    c += " --duration 1"
                r = run(f, "README served command", c, work)
                if " predict " in c:
                    f.check(r.stdout == local_predict, "README: grove predict --server differs from the local CLI")
            for c in bench:
                c = at(c, server).replace("--duration 30", "--duration 1")
                c += "" if "--duration" in c else " --duration 1"
                if "--rate" not in c:
                    run(f, "api.md grove bench", c, work, env)
                    continue
                # The open loop offers a fixed rate: where the host cannot keep up (2 cores shared
                # with other tests) groved sheds the excess, and bench then exits 1 as documented.
                # Shed calls are the only failures allowed; the report must still be complete.
                r = run(f, "api.md grove bench", c, work, env, expect_ok=None)
                f.check(r.returncode in (0, 1), f"api.md open-loop bench exited {r.returncode}: {r.stderr[-1000:]}")
                report = json.loads(r.stdout) if r.returncode in (0, 1) else {}
                shed = {"RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"}
                f.check(report.get("requests_ok", 0) > 0 and report.get("mode") == "open" and
                        set(report.get("failures", {})) <= shed and
                        (r.returncode == 0) == (report.get("requests_failed", 0) == 0),
                        f"api.md open-loop bench report: {r.stdout[:800]}")
        print(f"README's {len(served)} served commands and api.md's {len(bench)} bench lines ran")

        # operations.md: bearer tokens as shown.
        ops = open(os.path.join(src, "docs", "operations.md")).read()
        first = indented_blocks(ops)[0]
        f.check(first == ["groved --model_repository=/models --grpc_port=8001 --metrics_port=8002"],
                f"operations.md's first groved line changed: {first}")
        # One code block holds the token file and the groved line; the next the client lines.
        blocks = indented_blocks(section(ops, "### Bearer tokens"))
        token_lines = [c for c in blocks[0] if c.split()[0] in ("infer", "admin")]
        groved_line = [c for c in blocks[0] if c.startswith("groved ")]
        clients = blocks[1] if len(blocks) > 1 else []
        token_file = os.path.join(work, "tokens")
        with open(token_file, "w") as out:
            out.write("\n".join(token_lines) + "\n")
        os.chmod(token_file, 0o600)
        infer_token = next(line.split()[1] for line in token_lines if line.startswith("infer "))
        f.check(groved_line == ["groved --model_repository=/models --auth_token_file=/etc/grove/tokens "
                                "--model_control"], f"operations.md's token groved line changed: {groved_line}")
        flags = [a.replace("/etc/grove/tokens", token_file) for a in groved_line[0].split()[2:]]
        with h.Groved(args.groved, os.path.join(src, "examples", "models"), flags) as server:
            token_env = dict(env, TOKEN=infer_token)
            token_env.pop("GROVE_TOKEN", None)
            f.check(len(clients) == 2, f"operations.md's token client lines changed: {clients}")
            for c in clients:
                r = run(f, "operations.md token client", at(c, server), work, token_env)
                f.check(r.stdout == local_predict, f"`{c}` answered differently from the local CLI")
            no_token = at(clients[0], server).replace(' --token "$TOKEN"', "")
            run(f, "a call without a token", no_token, work, token_env, expect_ok=False)

        client_certificate_roles(f, args.groved, src, ops, work, env, local_predict)

        # operations.md: the config.json example, per model and as the server-wide default.
        example = re.search(r"```json\n(.*?)```", section(ops, "### config.json"), re.S).group(1)
        repo = os.path.join(work, "repo")
        os.makedirs(os.path.join(repo, "demo", "1"))
        shutil.copyfile(os.path.join(demo, "1", "model.json"), os.path.join(repo, "demo", "1", "model.json"))
        with open(os.path.join(repo, "demo", "config.json"), "w") as out:
            out.write(example)
        with open(os.path.join(work, "default.json"), "w") as out:
            out.write(example)
        with h.Groved(args.groved, repo, [f"--default_model_config={os.path.join(work, 'default.json')}"]) as server:
            r = run(f, "a model under operations.md's config.json", at(
                "grove predict --server localhost:8001 --model demo --input rows.csv", server), work, env)
            f.check(r.stdout == local_predict, "operations.md's config.json: the served prediction differs")
        print("operations.md: tokens and config.json as shown")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    f.finish("e2e_docs_commands")


if __name__ == "__main__":
    sys.exit(main())
