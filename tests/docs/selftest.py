#!/usr/bin/env python3
"""selftest.py - the doc tests catch wrong docs: doctest.py run on documents with a known fault
must fail, and say where; the same documents without the fault must pass.

    selftest.py --source DIR --build DIR

Cases: README.md with one number of its first session changed; small documents with a wrong
output, a block nobody checks, a skip without a reason, a failing command whose status is not
shown, a `same` value that differs (a script loaded without its last newline), a C example that
does not compile; docs/nginx.md's Traefik recipe, as it is and with each of its cross references
broken (checked by reading its files where Traefik is not installed); an Envoy configuration
(checked, not run) routing to a cluster it does not define, or building a descriptor its rules
file has no entry for. Exit 0 when every case behaves, 1 otherwise, 77 when doctest.py skips.
"""
import argparse
import os
import subprocess
import sys
import tempfile

GOOD_SESSION = """# a document
```console
$ sluice check api tenant:42
allowed limit=200 remaining=199 retry_after_ms=0 reset_after_ms=10
$ sluice rules get nope
sluice: no rule 'nope'
$ echo $?
1
```
"""

# An Envoy configuration (never run) checked against the rules file shown after it.
ENVOY_DOC = """<!-- doctest: envoy r.yaml -->
```yaml
static_resources:
  listeners:
    - filter_chains:
        - filters:
            - typed_config:
                route_config:
                  virtual_hosts:
                    - rate_limits:
                        - actions:
                            - request_headers: {header_name: ":path", descriptor_key: path}
                      routes:
                        - route: {cluster: app}
  clusters:
    - name: app
```

<!-- doctest: file r.yaml -->
```yaml
domain: d
descriptors:
  - key: path
    rate_limit: {unit: second, requests_per_unit: 1}
```
"""

# (name, document, text the failure must contain; None: the document must pass)
CASES = [
    ("a good session passes", GOOD_SESSION, None),
    ("a wrong number", GOOD_SESSION.replace("reset_after_ms=10", "reset_after_ms=5"),
     "doc.md:3: `sluice check api tenant:42` printed something else"),
    ("a wrong exit status", GOOD_SESSION.replace("$ echo $?\n1", "$ echo $?\n3"),
     "doc.md:7: `echo $?` printed something else"),
    ("a failing command whose status is not shown",
     "```console\n$ sluice rules get nope\nsluice: no rule 'nope'\n```\n",
     "doc.md:2: `sluice rules get nope` exited with status 1"),
    ("a block nobody checks", "```\nsluice check api u1\n```\n",
     "doc.md:1: a block that is neither run nor checked"),
    ("a skip without a reason", "<!-- doctest: skip -->\n```\nx\n```\n",
     "doc.md:1: doctest 'skip' needs an argument (the reason)"),
    ("a skip with a reason passes", "<!-- doctest: skip a synopsis -->\n```\nx\n```\n", None),
    ("a value that must be the same twice",
     "<!-- doctest: start redis -->\n<!-- doctest: same [0-9a-f]{40} -->\n```console\n"
     "$ redis-cli SCRIPT LOAD \"$(cat build/src/store/lua/gcra.lua)\"\n"
     "\"566aaa90f4f5a950ce32988c6d7feb2b9939817b\"\n"
     "$ sha1sum < build/src/store/lua/gcra.lua\n"
     "566aaa90f4f5a950ce32988c6d7feb2b9939817b  -\n```\n",
     "`sha1sum < build/src/store/lua/gcra.lua` printed something else"),
    ("a C example that does not compile", "```c\nint x = undeclared;\n```\n",
     "doc.md:1: the C example does not compile"),
    ("a rules file sluiced refuses", "```yaml\nrules:\n  - name: x\n    algorithm: gcra\n```\n",
     "doc.md:1: sluiced's parser refuses this rules file"),
    ("an Envoy configuration that matches its rules file", ENVOY_DOC, None),
    ("an Envoy route to a cluster not defined", ENVOY_DOC.replace("{cluster: app}", "{cluster: web}"),
     "doc.md:2: this Envoy configuration: $.static_resources.listeners[0].filter_chains[0]."
     "filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route: the cluster 'web' "
     "is not defined"),
    ("an Envoy action whose key the rules file has not",
     ENVOY_DOC.replace("descriptor_key: path", "descriptor_key: route"),
     "rate_limits[0]: the descriptor (route) has no entry 'route' in r.yaml"),
]


def run_doc(args, path):
    r = subprocess.run([sys.executable, os.path.join(args.source, "tests", "docs", "doctest.py"),
                        "--source", args.source, "--build", args.build, path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240)
    return r.returncode, r.stdout.decode("utf-8", "replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="sluice-doc-selftest.") as tmp:
        path = os.path.join(tmp, "doc.md")
        for name, text, want in CASES:
            with open(path, "w") as f:
                f.write(text)
            rc, out = run_doc(args, path)
            if rc == 77:
                print(out)
                sys.exit(77)
            ok = rc == 0 if want is None else (rc == 1 and want in out)
            print("%s: %s" % ("ok  " if ok else "FAIL", name))
            if not ok:
                failures += 1
                print("  exit %d, want %s; output:\n%s" % (rc, "0" if want is None else
                                                          "1 and %r" % want, out))
        # docs/nginx.md's Traefik recipe: as it is, and broken in each way its check looks for
        with open(os.path.join(args.source, "docs", "nginx.md")) as f:
            nginx = f.read()
        start, end = nginx.index("## Traefik (ForwardAuth)"), nginx.index("## Performance")
        traefik = ("<!-- doctest: start sluiced --rules examples/rules.yaml --trusted-proxy "
                   "127.0.0.1 -->\n" + nginx[start:end])
        breaks = [
            ("a Traefik router naming an undefined middleware",
             "      middlewares:\n        - uploads-limit\n",
             "      middlewares:\n        - upload-limit\n",
             "router 'uploads' names middleware 'upload-limit', which is not defined"),
            ("a Traefik router naming an undefined entry point",
             "      entryPoints:\n        - web\n", "      entryPoints:\n        - websecure\n",
             "router 'uploads' names entry point 'websecure'"),
            ("a Traefik router naming an undefined service", "      service: app\n",
             "      service: backend\n", "router 'uploads' names service 'backend'"),
            ("a Traefik file provider naming another file", "    filename: dynamic.yml",
             "    filename: dynamic.yaml", "cannot read dynamic.yaml"),
            ("a forwardAuth address that is not sluiced's /v1/auth",
             '"http://127.0.0.1:8390/v1/auth/uploads"', '"http://127.0.0.1:8390/v1/uploads"',
             "is not sluiced's http://127.0.0.1:8390/v1/auth/RULE"),
            ("a forwardAuth asking about a rule sluiced does not have",
             '"http://127.0.0.1:8390/v1/auth/uploads"', '"http://127.0.0.1:8390/v1/auth/upload"',
             "asks about rule 'upload', which sluiced does not have"),
        ]
        cases = [("docs/nginx.md's Traefik recipe passes", traefik, None)]
        for name, old, new, want in breaks:
            assert traefik.count(old) == 1, "docs/nginx.md's Traefik recipe: %r" % old
            cases.append((name, traefik.replace(old, new), want))
        for name, text, want in cases:
            path = os.path.join(tmp, "traefik.md")
            with open(path, "w") as f:
                f.write(text)
            rc, out = run_doc(args, path)
            ok = rc == 0 if want is None else (rc == 1 and want in out)
            print("%s: %s" % ("ok  " if ok else "FAIL", name))
            if not ok:
                failures += 1
                print("  exit %d; output:\n%s" % (rc, out))
        # the real README, one number of its first session changed
        with open(os.path.join(args.source, "README.md")) as f:
            readme = f.read()
        wrong = readme.replace("3) (integer) 199", "3) (integer) 198", 1)
        assert wrong != readme, "README.md no longer shows '3) (integer) 199'"
        path = os.path.join(tmp, "README.md")
        with open(path, "w") as f:
            f.write(wrong)
        rc, out = run_doc(args, path)
        ok = rc == 1 and "redis-cli -p 6390 SL.ALLOW api tenant:42" in out and \
            "+3) (integer) 199" in out
        print("%s: README.md with a number changed fails" % ("ok  " if ok else "FAIL"))
        if not ok:
            failures += 1
            print("  exit %d; output:\n%s" % (rc, out))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
