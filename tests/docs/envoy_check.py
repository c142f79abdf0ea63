#!/usr/bin/env python3
"""envoy_check.py - checks an Envoy configuration shown in the docs, which the tests cannot run
(Envoy is not packaged for Debian), against the envoyproxy/ratelimit rules file it is shown with:

  - every cluster a route (`route: {cluster: ...}`) or a gRPC service (`envoy_grpc:
    {cluster_name: ...}`) names is defined under `clusters`;
  - every rate limit filter's `domain` is the rules file's;
  - every `rate_limits` entry's actions build a descriptor whose keys, in order, are entries of
    the rules file (a known value must have an entry for that value, a pattern matching it, or
    the key alone), ending on a descriptor with a `rate_limit`.

    envoy_check.py ENVOY.yaml RULES.yaml     prints each problem; exit 1 when there is one

doctest.py calls check() for a block under `<!-- doctest: envoy RULES_FILE -->`.
"""
import os
import re
import sys

import yaml

# The descriptor key each rate limit action gives (Envoy's defaults when it names none), and
# the field holding a value it always sends (None: the request's value, any).
ACTIONS = {
    "source_cluster": ("source_cluster", None),
    "destination_cluster": ("destination_cluster", None),
    "remote_address": ("remote_address", None),
    "masked_remote_address": ("masked_remote_address", None),
    "request_headers": (None, None),
    "query_parameters": (None, None),
    "generic_key": ("generic_key", "descriptor_value"),
    "header_value_match": ("header_match", "descriptor_value"),
    "query_parameter_value_match": ("query_match", "descriptor_value"),
    "metadata": (None, None),
    "dynamic_metadata": (None, None),
}


def walk(node, fn, path="$"):
    """Calls fn(path, mapping) for every mapping in node, depth first."""
    if isinstance(node, dict):
        fn(path, node)
        for k, v in node.items():
            walk(v, fn, "%s.%s" % (path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk(v, fn, "%s[%d]" % (path, i))


def entries_of(actions, where, problems):
    """The descriptor entries [(key, value or None)] a rate limit's actions build."""
    out = []
    for i, action in enumerate(actions or []):
        if not isinstance(action, dict) or len(action) != 1:
            problems.append("%s.actions[%d]: not one action" % (where, i))
            return None
        (name, body), = action.items()
        if name not in ACTIONS:
            problems.append("%s.actions[%d]: unknown action '%s'" % (where, i, name))
            return None
        key, value_field = ACTIONS[name]
        body = body or {}
        key = body.get("descriptor_key", key)
        if key is None:
            problems.append("%s.actions[%d]: %s without descriptor_key" % (where, i, name))
            return None
        out.append((key, body.get(value_field) if value_field else None))
    return out


def child_for(node, key, value):
    """The child of a rules file's node an entry matches, as envoyproxy/ratelimit looks it up
    (a value, a pattern, the key alone); with value None (any value), any child of that key."""
    kids = [d for d in node.get("descriptors") or [] if d.get("key") == key]
    if value is None:
        return kids[0] if kids else None
    for pick in (lambda d: d.get("value") == value,
                 lambda d: "*" in str(d.get("value", "")) and
                 re.fullmatch(".*".join(map(re.escape, str(d["value"]).split("*"))), value),
                 lambda d: "value" not in d):
        found = [d for d in kids if pick(d)]
        if found:
            return found[0]
    return None


def check(envoy_text, rules_text, rules_name="the rules file"):
    """The problems of an Envoy configuration against a rules file, as sentences."""
    problems = []
    envoy = yaml.safe_load(envoy_text)
    rules = yaml.safe_load(rules_text)
    clusters = {c.get("name") for c in
                ((envoy or {}).get("static_resources") or {}).get("clusters") or []}

    def visit(path, m):
        route = m.get("route")
        if isinstance(route, dict) and "cluster" in route and route["cluster"] not in clusters:
            problems.append("%s.route: the cluster '%s' is not defined" % (path, route["cluster"]))
        grpc = m.get("envoy_grpc")
        if isinstance(grpc, dict) and grpc.get("cluster_name") not in clusters:
            problems.append("%s.envoy_grpc: the cluster '%s' is not defined" %
                            (path, grpc.get("cluster_name")))
        if m.get("@type", "").endswith("filters.http.ratelimit.v3.RateLimit") and \
                m.get("domain") != rules.get("domain"):
            problems.append("%s: domain '%s', but %s's is '%s'" %
                            (path, m.get("domain"), rules_name, rules.get("domain")))
        for i, rl in enumerate(m.get("rate_limits") or []):
            where = "%s.rate_limits[%d]" % (path, i)
            entries = entries_of(rl.get("actions"), where, problems)
            if entries is None:
                continue
            node = rules
            for key, value in entries:
                node = child_for(node, key, value)
                if node is None:
                    shown = ", ".join(k for k, _ in entries)
                    problems.append("%s: the descriptor (%s) has no entry '%s%s' in %s" %
                                    (where, shown, key, "" if value is None else "=" + value,
                                     rules_name))
                    break
            if node is not None and "rate_limit" not in node:
                problems.append("%s: the descriptor (%s) ends on an entry of %s with no "
                                "rate_limit" % (where, ", ".join(k for k, _ in entries),
                                                rules_name))

    walk(envoy, visit)
    if not clusters:
        problems.append("no clusters are defined (static_resources.clusters)")
    return problems


def check_file(envoy_text, rules_path):
    """check() against the rules file at rules_path (a missing file is a problem too)."""
    try:
        with open(rules_path) as f:
            return check(envoy_text, f.read(), os.path.basename(rules_path))
    except OSError as e:
        return ["the rules file: %s" % e]


def main():
    with open(sys.argv[1]) as f:
        problems = check_file(f.read(), sys.argv[2])
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
