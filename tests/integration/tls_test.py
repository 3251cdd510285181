# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of isowatchd's TLS and authentication (docs/security.md), with certificates
made at test time by the `openssl` command (a CA, a server certificate for 127.0.0.1 and
localhost, a client certificate, and a second CA that signed neither), one case per run:

  grpc_tls    TLS on the gRPC port: a replay that trusts the CA gets through; a plaintext one,
              one that trusts another CA and one that expects another server name do not
  grpc_mtls   mutual TLS: a collector needs a certificate the client CA signed
  grpc_token  TLS and a bearer token: no token and a wrong token are UNAUTHENTICATED
  http_tls    HTTPS: a client that trusts the CA gets answers; plaintext and another CA fail, and
              the failed handshakes are counted; with a client CA, a client needs a certificate
  http_token  a token for /api/v1/* (401 without it or with another); /metrics and the probes
              open by default, behind the token with http.auth.metrics/health=token
  warnings    an address other than loopback without authentication is warned about at start;
              with authentication, or on loopback, it is not
  demo        `isowatch demo` with TLS, a client certificate and a token end to end

Usage: tls_test.py PATH/TO/isowatch PATH/TO/isowatchd CASE
Each daemon runs on loopback, on free ports, with its store in a temporary directory.
"""

import http.client
import json
import os
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from daemon_limits_test import (  # noqa: E402
    Daemon, Failure, check, make_history, run, run_cases)


def openssl(*args, cwd):
    p = subprocess.run(["openssl"] + list(args), cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    check(p.returncode == 0, f"openssl {' '.join(args)}: {p.stdout.decode(errors='replace')}")


class Pki:
    """Keys and certificates in `dir`: ca, server (127.0.0.1, localhost), client (signed by ca),
    other_ca and other_client (signed by other_ca); each NAME as NAME.pem and NAME.key. Also a
    token file (with a trailing newline, as `echo` writes it) and a file with another token."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "pki")
        os.makedirs(self.dir)
        for ca, name in (("ca", "isowatch test CA"), ("other_ca", "another CA")):
            openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                    "-subj", f"/CN={name}", cwd=self.dir)
        self._leaf("server", "ca", "localhost",
                   "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        self._leaf("client", "ca", "collector", "extendedKeyUsage=clientAuth\n")
        self._leaf("other_client", "other_ca", "intruder", "extendedKeyUsage=clientAuth\n")
        self.token = self.path("token")
        with open(self.token, "w") as f:
            f.write("a-token-of-32-characters-or-so-1\n")
        self.wrong_token = self.path("wrong_token")
        with open(self.wrong_token, "w") as f:
            f.write("a-token-of-32-characters-or-so-2\n")
        for name in os.listdir(self.dir):
            os.chmod(self.path(name), 0o600)

    def _leaf(self, name, ca, cn, extensions):
        with open(self.path(f"{name}.ext"), "w") as f:
            f.write(extensions)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}",
                cwd=self.dir)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
                cwd=self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def grpc_tls(self, client_ca=False):
        args = ["--set", f"grpc.tls.cert_file={self.path('server.pem')}",
                "--set", f"grpc.tls.key_file={self.path('server.key')}"]
        if client_ca:
            args += ["--set", f"grpc.tls.client_ca_file={self.path('ca.pem')}"]
        return args

    def http_tls(self, client_ca=False):
        args = ["--set", f"http.tls.cert_file={self.path('server.pem')}",
                "--set", f"http.tls.key_file={self.path('server.key')}"]
        if client_ca:
            args += ["--set", f"http.tls.client_ca_file={self.path('ca.pem')}"]
        return args


def replay(cli, history, d, stream, *flags):
    """Replays `history` to the daemon's gRPC port with `flags` on a stream of its own, its ids
    prefixed with the stream's name (ids are unique across the streams of a daemon); (exit
    status, output)."""
    status, out, _ = run([cli, "replay", history, "--to", f"127.0.0.1:{d.grpc}",
                          "--stream", stream, "--id-prefix", f"{stream}-",
                          "--connect-timeout-ms", "3000"] + list(flags))
    return status, out


def expect_replay(cli, history, d, stream, flags, ok, says=None):
    status, out = replay(cli, history, d, stream, *flags)
    if ok:
        check(status == 0, f"replay {' '.join(flags)} failed: {out}")
    else:
        check(status != 0, f"replay {' '.join(flags)} got through: {out}")
        if says is not None:
            check(says in out, f"replay {' '.join(flags)} does not say \"{says}\": {out}")


def https_context(pki, ca="ca", cert=None):
    ctx = ssl.create_default_context(cafile=pki.path(f"{ca}.pem"))
    if cert is not None:
        ctx.load_cert_chain(pki.path(f"{cert}.pem"), pki.path(f"{cert}.key"))
    return ctx


def get(port, target, context=None, token=None, host="127.0.0.1"):
    """(status, headers, body) of GET, over HTTPS with `context`; the error as a string."""
    if context is None:
        conn = http.client.HTTPConnection(host, port, timeout=10)
    else:
        conn = http.client.HTTPSConnection(host, port, timeout=10, context=context)
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        conn.request("GET", target, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    except (OSError, http.client.HTTPException) as e:
        return f"{type(e).__name__}: {e}", {}, ""
    finally:
        conn.close()


def token_of(path):
    with open(path) as f:
        return f.read().strip()


def metric(body, series):
    for line in body.splitlines():
        if line.split(" ")[0] == series:
            return float(line.split()[-1])
    raise Failure(f"no series {series} in /metrics")


def case_grpc_tls(cli, daemond, tmp):
    pki = Pki(tmp)
    history = make_history(cli, tmp)
    d = Daemon(daemond, tmp, "gtls", pki.grpc_tls())
    try:
        expect_replay(cli, history, d, "ok", ["--tls-ca", pki.path("ca.pem")], ok=True)
        expect_replay(cli, history, d, "name", ["--tls-ca", pki.path("ca.pem"),
                                                "--tls-server-name", "localhost"], ok=True)
        expect_replay(cli, history, d, "plain", [], ok=False, says="cannot connect")
        expect_replay(cli, history, d, "other_ca", ["--tls-ca", pki.path("other_ca.pem")],
                      ok=False, says="with TLS")
        expect_replay(cli, history, d, "wrong_name", ["--tls-ca", pki.path("ca.pem"),
                                                      "--tls-server-name", "elsewhere"],
                      ok=False, says="cannot connect")
        status, _, body = get(d.http, "/api/v1/status")
        check(status == 200, f"/api/v1/status: {status}")
        streams = sorted(s["name"] for s in json.loads(body)["streams"])
        check(streams == ["name", "ok"], f"streams that got through: {streams}")
    finally:
        d.stop()


def case_grpc_mtls(cli, daemond, tmp):
    pki = Pki(tmp)
    history = make_history(cli, tmp)
    d = Daemon(daemond, tmp, "mtls", pki.grpc_tls(client_ca=True))
    try:
        ca = ["--tls-ca", pki.path("ca.pem")]
        expect_replay(cli, history, d, "ok", ca + ["--tls-cert", pki.path("client.pem"),
                                                   "--tls-key", pki.path("client.key")], ok=True)
        expect_replay(cli, history, d, "no_cert", ca, ok=False, says="cannot connect")
        expect_replay(cli, history, d, "other_cert",
                      ca + ["--tls-cert", pki.path("other_client.pem"),
                            "--tls-key", pki.path("other_client.key")],
                      ok=False, says="cannot connect")
        # A key that is not the certificate's is refused before anything is sent.
        expect_replay(cli, history, d, "mismatch",
                      ca + ["--tls-cert", pki.path("client.pem"),
                            "--tls-key", pki.path("other_client.key")],
                      ok=False, says="is not the key of")
        expect_replay(cli, history, d, "plain", [], ok=False, says="cannot connect")
    finally:
        d.stop()


def case_grpc_token(cli, daemond, tmp):
    pki = Pki(tmp)
    history = make_history(cli, tmp)
    d = Daemon(daemond, tmp, "gtoken",
               pki.grpc_tls() + ["--set", f"grpc.auth.token_file={pki.token}"])
    try:
        ca = ["--tls-ca", pki.path("ca.pem")]
        expect_replay(cli, history, d, "ok", ca + ["--token-file", pki.token], ok=True)
        expect_replay(cli, history, d, "none", ca, ok=False, says="needs a bearer token")
        expect_replay(cli, history, d, "wrong", ca + ["--token-file", pki.wrong_token], ok=False,
                      says="wrong bearer token")
        check("a-token-of" not in d.log_text(), "the daemon's log shows a token")
    finally:
        d.stop()
    # A token without TLS is a configuration error, not a token sent in clear.
    status, out, _ = run([daemond, "--data-dir", os.path.join(tmp, "x"),
                          "--set", f"grpc.auth.token_file={pki.token}"])
    check(status == 2 and "a bearer token needs TLS" in out,
          f"isowatchd with a gRPC token and no TLS: {status}: {out}")


def case_http_tls(cli, daemond, tmp):
    pki = Pki(tmp)
    d = Daemon(daemond, tmp, "htls", pki.http_tls())
    try:
        for target in ("/healthz", "/metrics"):
            status, _, _ = get(d.http, target, https_context(pki))
            check(status == 200, f"GET {target} over HTTPS: {status}")
        status, _, _ = get(d.http, "/healthz", https_context(pki), host="localhost")
        check(status == 200, f"GET /healthz from https://localhost: {status}")
        status, _, _ = get(d.http, "/healthz")
        check(status != 200, f"plaintext HTTP to the HTTPS port answered {status}")
        status, _, _ = get(d.http, "/healthz", https_context(pki, ca="other_ca"))
        check(isinstance(status, str) and "CERTIFICATE_VERIFY_FAILED" in status,
              f"HTTPS trusting another CA: {status}")
        _, _, body = get(d.http, "/metrics", https_context(pki))
        failed = metric(body, 'isowatch_http_connections_dropped_total{reason="tls_handshake"}')
        check(failed >= 1, f"failed handshakes counted: {failed}")
    finally:
        d.stop()
    d = Daemon(daemond, tmp, "hmtls", pki.http_tls(client_ca=True))
    try:
        status, _, _ = get(d.http, "/healthz", https_context(pki, cert="client"))
        check(status == 200, f"HTTPS with a client certificate: {status}")
        status, _, _ = get(d.http, "/healthz", https_context(pki))
        check(status != 200, f"HTTPS without a client certificate answered {status}")
        status, _, _ = get(d.http, "/healthz", https_context(pki, cert="other_client"))
        check(status != 200, f"HTTPS with a client certificate of another CA answered {status}")
    finally:
        d.stop()


def case_http_token(cli, daemond, tmp):
    pki = Pki(tmp)
    token = token_of(pki.token)
    args = pki.http_tls() + ["--set", f"http.auth.token_file={pki.token}"]
    d = Daemon(daemond, tmp, "htoken", args)
    ctx = https_context(pki)
    try:
        for target in ("/api/v1/status", "/api/v1/violations"):
            status, headers, body = get(d.http, target, ctx)
            check(status == 401, f"{target} without a token: {status}")
            check(headers.get("WWW-Authenticate", "").startswith("Bearer"),
                  f"{target}: 401 without WWW-Authenticate: {headers}")
            check(json.loads(body)["error"] == "this endpoint needs a bearer token", body)
            status, _, _ = get(d.http, target, ctx, token=token_of(pki.wrong_token))
            check(status == 401, f"{target} with a wrong token: {status}")
            status, _, _ = get(d.http, target, ctx, token=token)
            check(status == 200, f"{target} with the token: {status}")
        # Open by default.
        for target in ("/metrics", "/healthz", "/livez", "/readyz"):
            status, _, _ = get(d.http, target, ctx)
            check(status == 200, f"{target} without a token (open by default): {status}")
        _, _, body = get(d.http, "/metrics", ctx)
        rejected = metric(body, 'isowatch_http_requests_rejected_total{reason="unauthorized"}')
        check(rejected == 4, f"unauthorized requests counted: {rejected}, want 4")
    finally:
        d.stop()
    d = Daemon(daemond, tmp, "htoken2", args + ["--set", "http.auth.metrics=token",
                                                "--set", "http.auth.health=token"])
    try:
        for target in ("/metrics", "/healthz", "/livez", "/readyz"):
            status, _, body = get(d.http, target, ctx)
            check(status == 401, f"{target} without a token (http.auth.*=token): {status}")
            check(body.strip() == "this endpoint needs a bearer token", f"{target}: {body}")
            status, _, _ = get(d.http, target, ctx, token=token)
            check(status == 200, f"{target} with the token: {status}")
    finally:
        d.stop()
    # Only metrics behind the token: health stays open.
    d = Daemon(daemond, tmp, "htoken3", args + ["--set", "http.auth.metrics=token"])
    try:
        status, _, _ = get(d.http, "/metrics", ctx)
        check(status == 401, f"/metrics without a token (http.auth.metrics=token): {status}")
        status, _, _ = get(d.http, "/healthz", ctx)
        check(status == 200, f"/healthz without a token (http.auth.health=open): {status}")
    finally:
        d.stop()


def case_warnings(cli, daemond, tmp):
    pki = Pki(tmp)
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: the daemon warns, then cannot bind
    # and exits, so nothing ever listens off loopback.
    away = ["--set", "grpc.listen=192.0.2.1", "--set", "http.listen=192.0.2.1"]

    def start(name, args):
        status, out, _ = run([daemond, "--data-dir", os.path.join(tmp, name), "--grpc-port", "0",
                              "--http-port", "0"] + args, timeout=60)
        check(status == 2, f"isowatchd on 192.0.2.1 exited with {status}: {out}")
        return out

    out = start("open", away)
    check("gRPC listens on 192.0.2.1 without authentication" in out, f"no gRPC warning: {out}")
    check("HTTP listens on 192.0.2.1 without authentication" in out, f"no HTTP warning: {out}")
    out = start("clear", away + ["--set", f"http.auth.token_file={pki.token}"])
    check("the token travels in clear" in out, f"no warning of a token in clear: {out}")
    out = start("closed", away + pki.grpc_tls(client_ca=True) + pki.http_tls() +
                ["--set", f"http.auth.token_file={pki.token}"])
    check("warn" not in out, f"warnings with authentication: {out}")
    out = start("token", away + pki.grpc_tls() + pki.http_tls() +
                ["--set", f"grpc.auth.token_file={pki.token}",
                 "--set", f"http.auth.token_file={pki.token}"])
    check("warn" not in out, f"warnings with tokens: {out}")
    d = Daemon(daemond, tmp, "loopback")
    try:
        pass
    finally:
        d.stop()
    check("without authentication" not in d.log_text(), f"a warning on loopback: {d.log_text()}")


def case_demo(cli, daemond, tmp):
    pki = Pki(tmp)
    status, out, _ = run(
        [cli, "demo", "--txns", "3000", "--rate", "0",
         "--set", f"grpc.tls.cert_file={pki.path('server.pem')}",
         "--set", f"grpc.tls.key_file={pki.path('server.key')}",
         "--set", f"grpc.tls.client_ca_file={pki.path('ca.pem')}",
         "--set", f"grpc.auth.token_file={pki.token}",
         "--tls-ca", pki.path("ca.pem"), "--tls-cert", pki.path("client.pem"),
         "--tls-key", pki.path("client.key"), "--token-file", pki.token], timeout=300)
    check("gRPC with TLS" in out, f"the demo does not say it uses TLS: {out}")
    check("feeding the daemon failed" not in out, f"the demo could not feed its daemon: {out}")
    check(status in (0, 1), f"isowatch demo exited with {status}: {out}")
    status, out, _ = run(
        [cli, "demo", "--txns", "3000", "--rate", "0",
         "--set", f"grpc.tls.cert_file={pki.path('server.pem')}",
         "--set", f"grpc.tls.key_file={pki.path('server.key')}",
         "--set", f"grpc.auth.token_file={pki.token}",
         "--tls-ca", pki.path("ca.pem"), "--token-file", pki.wrong_token], timeout=300)
    check("wrong bearer token" in out, f"the demo with a wrong token: {status}: {out}")


CASES = {
    "grpc_tls": case_grpc_tls,
    "grpc_mtls": case_grpc_mtls,
    "grpc_token": case_grpc_token,
    "http_tls": case_http_tls,
    "http_token": case_http_token,
    "warnings": case_warnings,
    "demo": case_demo,
}


if __name__ == "__main__":
    sys.exit(run_cases(CASES, sys.argv, __doc__))
