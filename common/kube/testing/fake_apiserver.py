#!/usr/bin/env python3
"""A fake Kubernetes API server for sonde's tests. Test-only; listens on loopback.

It speaks the parts of the real wire protocol that sonde uses, for any resource path:

  GET    /api/v1[/namespaces/NS]/PLURAL                      list (labelSelector, fieldSelector,
  GET    /apis/G/V[/namespaces/NS]/PLURAL                     limit/continue, resourceVersion)
  GET    ...PLURAL?watch=true&resourceVersion=RV              watch: chunked newline-delimited JSON
                                                              events, BOOKMARKs when
                                                              allowWatchBookmarks=true,
                                                              timeoutSeconds honoured
  POST   ...PLURAL                                            create (409 AlreadyExists)
  GET/PUT/PATCH/DELETE ...PLURAL/NAME[/status]                PUT and PATCH (merge patch only)
                                                              check metadata.resourceVersion and
                                                              answer 409 Conflict when stale

Lists with resourceVersion=0 are served as the real server's watch cache serves them: the
latest state, `limit` ignored (the whole collection in one response) unless /_fake/config
"watch_cache" is false, which serves them like etcd (paged). A continue token together with a
resourceVersion is refused (400), as the real server does.

Cluster-scoped resources (nodes, namespaces, ...; a custom resource whose CRD says
scope: Cluster) have only cluster paths: a namespaced path answers 404, as on a real server.
Namespaces get the kubernetes.io/metadata.name label the real server sets.

Field selectors are limited to the fields the real server supports per resource
(FIELD_SELECTORS: metadata.name and metadata.namespace everywhere, pods: spec.nodeName,
status.phase, ...); any other field answers 400 BadRequest "field label not supported".

Authorization (--rbac FILE with --identity TOKEN=USER): FILE holds the chart's rendered
Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (`helm template charts/sonde`, any
other documents are ignored); each bearer token maps to a user, "admin" (everything allowed) or
"system:serviceaccount:NS:NAME". A request is allowed when a rule bound to that service account
(a ClusterRoleBinding anywhere, a RoleBinding in its namespace) covers its verb (get, list,
watch, create, update, patch, delete), API group, resource (with "/status" for the
subresource) and name; otherwise 403 Forbidden with the real server's Status and message. An
unknown token answers 401. Without --rbac every request is allowed (the "admin" mode unit
tests use), subject to --token. The same FILE's ValidatingAdmissionPolicies and their bindings
are then enforced on every write (Admission: each CEL expression through its Python twin in
ADMISSION_TWINS); an identity's extra attributes (;extra=KEY:V) are the request's
userInfo.extra, as the node a pod-bound token belongs to is on a real server.

Resource versions are one global revision counter, written in an opaque non-numeric form
("x1f") so a client that compares or parses them breaks in tests. Every write is kept in a
history that watches replay from; compaction (/_fake/compact or a watch "expire") drops it, after
which watching or listing from an older version answers 410 Gone.

Test control (JSON bodies), never part of the Kubernetes API:
  POST /_fake/config         {"split_events": bool, "bookmark_interval": seconds,
                              "status_subresources": [plural, ...], "watch_cache": bool}
  POST /_fake/faults         {"method": "GET", "path": regex, "watch": bool (optional),
                              "query": regex, "status": 429, "retry_after": 1, "times": n,
                              "drop": bool, "hang": seconds}
                              answers the next n matching requests with that error (or drops the
                              connection without answering, or holds it unanswered for "hang"
                              seconds — until the rules are cleared — then drops it);
                              {"clear": true} removes all rules
  POST /_fake/watch_control  {"action": "bookmark" | "drop" | "drop_partial" | "expire" |
                              "silence"}
                              on every open watch: send a bookmark now; close the connection
                              without the final chunk; write half of the next event then close;
                              send an ERROR event carrying 410 and compact the history; go
                              silent (no byte, no FIN) until the client closes the connection
  POST /_fake/compact        forget history up to now and expire continue tokens
  POST /_fake/crds           {"enforce": bool}: turn the CRD schema checks off or on

Custom resources whose CRD is in --crds (default: the repository's crds/) are handled as the
real server handles them (crd_schema.py): unknown fields are pruned, defaults applied, and a
create or update that violates the OpenAPI schema or a CEL rule is answered 422 Invalid.
  GET  /_fake/requests       the request log (method, path, query, status, userAgent, bytes of
                             the request body, time); DELETE clears it
  GET  /_fake/watches        number of open watches
"""

import argparse
import bisect
import select
import copy
import datetime
import json
import os
import re
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crd_schema  # noqa: E402

KINDS = {
    "pods": "Pod",
    "nodes": "Node",
    "leases": "Lease",
    "events": "Event",
    "namespaces": "Namespace",
    "profilingpolicies": "ProfilingPolicy",
    "clusterprofilingpolicies": "ClusterProfilingPolicy",
    "profilingnodereports": "ProfilingNodeReport",
    "podmonitors": "PodMonitor",
    "customresourcedefinitions": "CustomResourceDefinition",
}


# The field selectors the real API server accepts, per resource (its field label conversion
# functions); every resource also takes metadata.name and metadata.namespace. Custom resources
# get only those two (sonde's CRDs declare no selectableFields).
FIELD_SELECTORS = {
    "pods": {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
             "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
             "status.podIPs", "status.nominatedNodeName"},
    "nodes": {"spec.unschedulable"},
    "events": {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion",
               "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
               "reportingComponent", "source", "type"},
    "namespaces": {"status.phase"},
    "secrets": {"type"},
}


def unsupported_field(plural, selector):
    """The first field of `selector` the real server rejects for `plural`, or None."""
    allowed = {"metadata.name", "metadata.namespace"} | FIELD_SELECTORS.get(plural, set())
    for part in split_top_level(selector or ""):
        key = re.split(r"!=|==|=", part, maxsplit=1)[0].strip()
        if key not in allowed:
            return key
    return None


# Built-in resources that are cluster-scoped (custom resources: their CRD's spec.scope).
CLUSTER_SCOPED = {"nodes", "namespaces", "customresourcedefinitions", "clusterroles",
                  "clusterrolebindings", "persistentvolumes", "storageclasses", "priorityclasses",
                  "tokenreviews", "subjectaccessreviews"}

# The label the real server puts on every namespace (NamespaceDefaultLabelName, 1.21+).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def cluster_scoped(plural):
    crd = STATE.crds.get(plural)
    return crd["scope"] == "Cluster" if crd is not None else plural in CLUSTER_SCOPED


def label_namespace(gvr, obj):
    """A namespace carries its name as a label, whatever a write says, as on a real server."""
    if gvr == ("", "v1", "namespaces"):
        meta = obj.setdefault("metadata", {})
        meta.setdefault("labels", {})[NAMESPACE_NAME_LABEL] = meta.get("name", "")


VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


# The audience a token carries when its identity names none: the API server's own, which a
# TokenReview without spec.audiences checks against (kube-apiserver --api-audiences).
API_AUDIENCE = "https://kubernetes.default.svc"


class Identity:
    """A bearer token's user, its audiences, whether it expired, its user's extra attributes and
    whether the authenticator behind it ignores the audiences asked for:
    'TOKEN=USER[;aud=A,B][;expired][;extra=KEY:V1|V2][;ignores-audiences]'. A user with extra
    attributes is allowed by a SubjectAccessReview only when the review carries them (as a
    webhook authorizer that scopes tokens by them would)."""

    def __init__(self, spec):
        self.token, rest = spec.split("=", 1)
        parts = rest.split(";")
        self.user, self.audiences, self.expired = parts[0], [API_AUDIENCE], False
        self.extra, self.ignores_audiences = {}, False
        for p in parts[1:]:
            if p.startswith("aud="):
                self.audiences = p[len("aud="):].split(",")
            elif p == "expired":
                self.expired = True
            elif p.startswith("extra="):
                key, _, values = p[len("extra="):].partition(":")
                self.extra[key] = values.split("|")
            elif p == "ignores-audiences":
                self.ignores_audiences = True


class Authorizer:
    """RBAC over rendered Roles/ClusterRoles and their bindings, per service account."""

    def __init__(self, documents, identities):
        self.tokens = {i.token: i for i in identities}
        # token -> user, for requests to the server itself (an expired token is refused)
        self.identities = {i.token: i.user for i in identities if not i.expired}
        self.roles, self.cluster_roles, self.bindings = {}, {}, []
        for doc in documents:
            if not isinstance(doc, dict):
                continue
            kind, meta = doc.get("kind"), doc.get("metadata") or {}
            if kind == "Role":
                self.roles[(meta.get("namespace"), meta.get("name"))] = doc.get("rules") or []
            elif kind == "ClusterRole":
                self.cluster_roles[meta.get("name")] = doc.get("rules") or []
            elif kind in ("RoleBinding", "ClusterRoleBinding"):
                self.bindings.append((kind, meta.get("namespace"), doc.get("roleRef") or {},
                                      doc.get("subjects") or []))

    @staticmethod
    def subject_matches(subject, user):
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "ServiceAccount":
            return user == "system:serviceaccount:%s:%s" % (subject.get("namespace"), name)
        if kind == "User":
            return user == name
        if kind == "Group" and user.startswith("system:serviceaccount:"):
            ns = user.split(":")[2]
            return name in ("system:serviceaccounts", "system:serviceaccounts:" + ns,
                            "system:authenticated")
        return False

    def rules_for(self, user, namespace):
        """Rules that apply to `user` for a request in `namespace` (None: cluster scope)."""
        for kind, binding_ns, ref, subjects in self.bindings:
            if not any(self.subject_matches(s, user) for s in subjects):
                continue
            if kind == "RoleBinding" and binding_ns != namespace:
                continue
            if ref.get("kind") == "ClusterRole":
                yield from self.cluster_roles.get(ref.get("name"), [])
            elif ref.get("kind") == "Role" and kind == "RoleBinding":
                yield from self.roles.get((binding_ns, ref.get("name")), [])

    def allowed_path(self, user, verb, path):
        """A non-resource URL (/metrics): granted by ClusterRoles through ClusterRoleBindings
        only, a rule's nonResourceURLs matching exactly or by a trailing '*'."""
        if user == "admin":
            return True
        for kind, _, ref, subjects in self.bindings:
            if kind != "ClusterRoleBinding" or ref.get("kind") != "ClusterRole":
                continue
            if not any(self.subject_matches(s, user) for s in subjects):
                continue
            for rule in self.cluster_roles.get(ref.get("name"), []):
                if not {"*", verb} & set(rule.get("verbs") or []):
                    continue
                for url in rule.get("nonResourceURLs") or []:
                    if url == path or (url.endswith("*") and path.startswith(url[:-1])):
                        return True
        return False

    def allowed(self, user, verb, group, resource, namespace, name):
        if user == "admin":
            return True
        for rule in self.rules_for(user, namespace):
            if not {"*", verb} & set(rule.get("verbs") or []):
                continue
            if not {"*", group} & set(rule.get("apiGroups") or []):
                continue
            if not {"*", resource} & set(rule.get("resources") or []):
                continue
            names = rule.get("resourceNames") or []
            if names and name not in names:
                continue
            return True
        return False


# CEL has no Python interpreter here, so each expression a ValidatingAdmissionPolicy of the chart
# uses has a hand-written twin: (pattern, factory), the pattern matched against the whole
# expression, the factory given the match and returning a function of the evaluation context
# (request, variables). A policy with an expression that has no twin stops the fake at start.
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
ADMISSION_TWINS = [
    (r"request\.userInfo\.username == '([^'\\]*)'",
     lambda m: lambda c: c["request"]["userInfo"]["username"] == m.group(1)),
    (re.escape("'%s' in request.userInfo.extra ? request.userInfo.extra['%s'][0] : ''"
               % (NODE_NAME_EXTRA, NODE_NAME_EXTRA)),
     lambda m: lambda c: (c["request"]["userInfo"]["extra"].get(NODE_NAME_EXTRA) or [""])[0]),
    (re.escape("request.resource.resource == 'leases' ? 'sonde-node-' + variables.node : "
               "variables.node"),
     lambda m: lambda c: ("sonde-node-" if c["request"]["resource"]["resource"] == "leases"
                          else "") + c["variables"]["node"]),
    (re.escape("variables.node != ''"), lambda m: lambda c: c["variables"]["node"] != ""),
    (re.escape("request.name == variables.own"),
     lambda m: lambda c: c["request"]["name"] == c["variables"]["own"]),
    (re.escape("'an agent writes only its own node\\'s ' + request.resource.resource + ', ' + "
               "variables.own + ', not ' + request.name"),
     lambda m: lambda c: "an agent writes only its own node's %s, %s, not %s"
     % (c["request"]["resource"]["resource"], c["variables"]["own"], c["request"]["name"])),
]


def admission_twin(expression, where):
    for pattern, factory in ADMISSION_TWINS:
        m = re.fullmatch(pattern, expression)
        if m:
            return factory(m)
    raise SystemExit("fake_apiserver: %s: no Python twin for the CEL expression %r: add one to "
                     "ADMISSION_TWINS" % (where, expression))


class Admission:
    """The chart's ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) and their
    bindings, evaluated on every write (create, update, patch, delete) as the real server does:
    resourceRules (apiGroups, apiVersions, operations, resources with "/status"), matchConditions,
    variables in order, then validations; a failed one with a Deny binding answers its `reason`
    (default Invalid) with the real server's message. Bindings select namespaces by
    namespaceSelector.matchLabels (the kubernetes.io/metadata.name label is every namespace's)."""

    def __init__(self, documents):
        policies, self.bindings = {}, []
        for doc in documents:
            if not isinstance(doc, dict):
                continue
            kind, meta = doc.get("kind"), doc.get("metadata") or {}
            spec = doc.get("spec") or {}
            if kind == "ValidatingAdmissionPolicy":
                name = meta.get("name")
                where = "ValidatingAdmissionPolicy " + name
                policies[name] = {
                    "rules": (spec.get("matchConstraints") or {}).get("resourceRules") or [],
                    "conditions": [admission_twin(c["expression"], where)
                                   for c in spec.get("matchConditions") or []],
                    "variables": [(v["name"], admission_twin(v["expression"], where))
                                  for v in spec.get("variables") or []],
                    "validations": [
                        (admission_twin(v["expression"], where), v.get("reason") or "Invalid",
                         v.get("message") or "failed expression: " + v["expression"],
                         admission_twin(v["messageExpression"], where)
                         if v.get("messageExpression") else None)
                        for v in spec.get("validations") or []],
                }
            elif kind == "ValidatingAdmissionPolicyBinding":
                self.bindings.append((meta.get("name"), spec))
        self.bound = []
        for name, spec in self.bindings:
            if spec.get("policyName") not in policies:
                raise SystemExit("fake_apiserver: ValidatingAdmissionPolicyBinding %s binds no "
                                 "policy of the file (%s)" % (name, spec.get("policyName")))
            if "Deny" in (spec.get("validationActions") or []):
                self.bound.append((name, spec, spec["policyName"], policies[spec["policyName"]]))

    @staticmethod
    def rule_matches(rule, request):
        res = request["resource"]
        resource = res["resource"] + ("/" + request["subResource"] if request["subResource"] else "")
        return ({"*", res["group"]} & set(rule.get("apiGroups") or []) and
                {"*", res["version"]} & set(rule.get("apiVersions") or []) and
                {"*", request["operation"]} & set(rule.get("operations") or []) and
                {"*", resource} & set(rule.get("resources") or []))

    @staticmethod
    def namespace_matches(spec, namespace):
        selector = (spec.get("matchResources") or {}).get("namespaceSelector")
        if not selector:
            return True
        if namespace is None:
            return False
        labels = {NAMESPACE_NAME_LABEL: namespace}
        ns = STATE.objects.get(("", "v1", "namespaces"), {}).get(("", namespace))
        labels.update(((ns or {}).get("metadata") or {}).get("labels") or {})
        return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())

    def denial(self, request, namespace):
        """None, or (HTTP code, reason, message) of the first failed validation."""
        for binding, spec, name, policy in self.bound:
            if not any(self.rule_matches(r, request) for r in policy["rules"]):
                continue
            if not self.namespace_matches(spec, namespace):
                continue
            context = {"request": request, "variables": {}}
            if not all(cond(context) for cond in policy["conditions"]):
                continue
            for var, fn in policy["variables"]:
                context["variables"][var] = fn(context)
            for check, reason, message, message_fn in policy["validations"]:
                if check(context):
                    continue
                text = message_fn(context) if message_fn else message
                code = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}.get(
                    reason, 422)
                return code, reason, ("ValidatingAdmissionPolicy '%s' with binding '%s' denied "
                                      "request: %s" % (name, binding, text))
        return None


def forbidden_status(user, verb, gvr, sub, namespace, name):
    group, plural = gvr[0], gvr[2]
    resource = plural + ("/" + sub if sub else "")
    qualified = plural + ("." + group if group else "")
    if name:
        qualified += ' "%s"' % name
    scope = ('in the namespace "%s"' % namespace) if namespace is not None else "at the cluster scope"
    body = status_body(403, "Forbidden", '%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s" %s'
                       % (qualified, user, verb, resource, group, scope))
    body["details"] = {"group": group, "kind": plural}
    if name:
        body["details"]["name"] = name
    return body


def rv_str(rev):
    return "x%x" % rev


def rv_parse(text):
    if not re.fullmatch(r"x[0-9a-f]+", text or ""):
        return None
    return int(text[1:], 16)


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def split_top_level(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def label_matcher(selector):
    reqs = []
    for part in split_top_level(selector or ""):
        m = re.fullmatch(r"([^\s!=]+)\s+(in|notin)\s+\((.*)\)", part)
        if m:
            values = {v.strip() for v in m.group(3).split(",")}
            reqs.append((m.group(2), m.group(1), values))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            reqs.append(("!=", k.strip(), v.strip()))
        elif "=" in part:
            k, v = part.split("==", 1) if "==" in part else part.split("=", 1)
            reqs.append(("=", k.strip(), v.strip()))
        elif part.startswith("!"):
            reqs.append(("!exists", part[1:].strip(), None))
        else:
            reqs.append(("exists", part, None))

    def match(labels):
        for op, key, value in reqs:
            present = key in labels
            if op == "=" and labels.get(key) != value:
                return False
            if op == "!=" and labels.get(key) == value:
                return False
            if op == "in" and labels.get(key) not in value:
                return False
            if op == "notin" and present and labels[key] in value:
                return False
            if op == "exists" and not present:
                return False
            if op == "!exists" and present:
                return False
        return True
    return match


def field_matcher(selector):
    reqs = []
    for part in split_top_level(selector or ""):
        if "!=" in part:
            k, v = part.split("!=", 1)
            reqs.append((False, k.strip(), v.strip()))
        else:
            k, v = part.split("==", 1) if "==" in part else part.split("=", 1)
            reqs.append((True, k.strip(), v.strip()))

    def lookup(obj, path):
        for seg in path.split("."):
            if not isinstance(obj, dict):
                return ""
            obj = obj.get(seg, "")
        return "" if obj is None else str(obj)

    def match(obj):
        return all((lookup(obj, k) == v) == eq for eq, k, v in reqs)
    return match


class Watcher:
    def __init__(self):
        self.actions = []
        self.drop_partial = False  # cut the next event in half, then close
        self.silent = False  # write nothing more; hold the connection until the client closes


class State:
    def __init__(self):
        self.cond = threading.Condition()
        self.rev = 1
        self.objects = {}    # (group, version, plural) -> {(namespace, name): object}
        self.history = []    # (rev, gvr, type, old, new), ordered by rev
        self.history_revs = []
        self.compacted = 0   # history at or below this revision is gone
        self.status_subresources = {"profilingpolicies", "pods", "namespaces"}
        self.split_events = False
        self.bookmark_interval = 0.0
        self.faults = []
        self.watchers = set()
        self.watch_cache = True  # resourceVersion=0 lists ignore limit, as the real cache does
        self.continues = {}
        self.requests = []
        self.crds = {}       # plural -> crd_schema.load_crds() entry
        self.enforce_crds = True

    def commit(self, gvr, etype, old, new):
        self.rev += 1
        if new is not None:
            new["metadata"]["resourceVersion"] = rv_str(self.rev)
        record = copy.deepcopy(new if new is not None else old)
        if etype == "DELETED":
            record["metadata"]["resourceVersion"] = rv_str(self.rev)
        self.history.append((self.rev, gvr, etype, old, record))
        self.history_revs.append(self.rev)
        self.cond.notify_all()

    def compact(self):
        self.compacted = self.rev
        self.history = []
        self.history_revs = []
        self.continues = {}


STATE = State()


def parse_path(path):
    segs = [s for s in path.split("/") if s]
    if segs[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", segs[2:]
    elif len(segs) >= 3 and segs[0] == "apis":
        group, version, rest = segs[1], segs[2], segs[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and not (
            len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    return {"gvr": (group, version, rest[0]), "namespace": namespace,
            "name": rest[1] if len(rest) > 1 else None,
            "sub": rest[2] if len(rest) > 2 else None}


# The review APIs: POST only, answered and forgotten (Handler.review).
REVIEWS = {("authentication.k8s.io", "v1", "tokenreviews"),
           ("authorization.k8s.io", "v1", "subjectaccessreviews")}


def api_version(gvr):
    return gvr[1] if not gvr[0] else "%s/%s" % (gvr[0], gvr[1])


def strip_volatile(obj):
    clean = copy.deepcopy(obj)
    clean.get("metadata", {}).pop("resourceVersion", None)
    return clean


def schema_defaulted(gvr, obj):
    crd = STATE.crds.get(gvr[2])
    if crd is None or not STATE.enforce_crds or (crd["group"], crd["version"]) != gvr[:2]:
        return obj
    return crd_schema.prune_and_default(crd["schema"], obj)


def schema_checked(gvr, obj, old):
    """(the object pruned and defaulted, None) or (obj, (422, reason, message)) when it violates
    its CRD's schema. Objects of resources without a loaded CRD pass unchanged."""
    crd = STATE.crds.get(gvr[2])
    if crd is None or not STATE.enforce_crds or (crd["group"], crd["version"]) != gvr[:2]:
        return obj, None
    pruned = crd_schema.prune_and_default(crd["schema"], obj)
    old_pruned = crd_schema.prune_and_default(crd["schema"], old) if old is not None else None
    errors = crd_schema.validate(crd["schema"], pruned, old_pruned)
    if errors:
        name = (obj.get("metadata") or {}).get("name", "")
        return obj, (422, "Invalid", '%s.%s "%s" is invalid: %s' % (
            crd["kind"], crd["group"], name, "; ".join(errors)))
    return pruned, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    required_token = None
    authorizer = None  # an Authorizer with --rbac
    admission = None  # the --rbac file's ValidatingAdmissionPolicies (Admission)

    def log_message(self, fmt, *args):
        pass

    def setup(self):
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # ---- plumbing ----
    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        return json.loads(raw)

    def send_json(self, code, body, headers=None):
        data = json.dumps(body).encode()
        # Logged before answering, so a client that has its answer finds it in the log.
        self.log_request_entry(code)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_status(self, code, reason, message, headers=None):
        self.send_json(code, status_body(code, reason, message), headers)

    def log_request_entry(self, code):
        url = urlsplit(self.path)
        with STATE.cond:
            STATE.requests.append({
                "method": self.command, "path": url.path,
                "query": {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()},
                "status": code, "userAgent": self.headers.get("User-Agent", ""),
                "bytes": int(self.headers.get("Content-Length") or 0), "time": time.time()})

    def drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def dispatch(self):
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            if url.path.startswith("/_fake/"):
                return self.control(url.path, query)
            body = self.read_body() if self.command in ("POST", "PUT", "PATCH") else None
            if self.required_token and \
                    self.headers.get("Authorization") != "Bearer " + self.required_token:
                return self.send_status(401, "Unauthorized", "Unauthorized")
            if self.apply_fault(url.path, query):
                return
            route = parse_path(url.path)
            if route is not None and route["namespace"] is not None and \
                    cluster_scoped(route["gvr"][2]):
                route = None  # a cluster-scoped resource has no namespaced path
            if route is None:
                return self.send_status(404, "NotFound", "the server could not find the requested resource")
            if not self.authorize(route, query):
                return None
            if self.command in VERBS and route["gvr"] not in REVIEWS and not self.admit(route, body):
                return None
            if self.command == "POST" and route["gvr"] in REVIEWS:
                return self.review(route["gvr"], body)
            if self.command == "GET" and route["name"] is None:
                if query.get("watch") in ("true", "1"):
                    return self.watch(route, query)
                return self.list(route, query)
            if self.command == "POST" and route["name"] is None:
                return self.create(route, body)
            if route["name"] is None:
                return self.send_status(405, "MethodNotAllowed", "method not allowed on a collection")
            if self.command == "GET":
                return self.get(route)
            if self.command == "PUT":
                return self.update(route, body)
            if self.command == "PATCH":
                return self.patch(route, body)
            if self.command == "DELETE":
                return self.delete(route)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        return None

    def authorize(self, route, query):
        """False (answered 401/403) when --rbac is on and the token's user may not do this."""
        if self.authorizer is None:
            return True
        auth = self.headers.get("Authorization") or ""
        user = self.authorizer.identities.get(auth[len("Bearer "):]) if auth.startswith("Bearer ") else None
        if user is None:
            self.send_status(401, "Unauthorized", "Unauthorized")
            return False
        if self.command == "GET":
            if route["name"] is not None:
                verb = "get"
            else:
                verb = "watch" if query.get("watch") in ("true", "1") else "list"
        else:
            verb = VERBS.get(self.command, self.command.lower())
        resource = route["gvr"][2] + ("/" + route["sub"] if route["sub"] else "")
        if self.authorizer.allowed(user, verb, route["gvr"][0], resource, route["namespace"], route["name"]):
            return True
        self.send_json(403, forbidden_status(user, verb, route["gvr"], route["sub"],
                                             route["namespace"], route["name"]))
        return False

    def admit(self, route, body):
        """False (answered) when a ValidatingAdmissionPolicy of the --rbac file denies this write."""
        if self.admission is None:
            return True
        auth = self.headers.get("Authorization") or ""
        ident = self.authorizer.tokens.get(auth[len("Bearer "):]) if auth.startswith("Bearer ") else None
        name = route["name"]
        if name is None and isinstance(body, dict):
            name = (body.get("metadata") or {}).get("name") or ""
        operation = {"POST": "CREATE", "DELETE": "DELETE"}.get(self.command, "UPDATE")
        request = {
            "operation": operation, "name": name or "", "namespace": route["namespace"] or "",
            "resource": {"group": route["gvr"][0], "version": route["gvr"][1],
                         "resource": route["gvr"][2]},
            "subResource": route["sub"] or "",
            "userInfo": {"username": ident.user if ident else "", "extra": ident.extra if ident else {}},
        }
        denied = self.admission.denial(request, route["namespace"])
        if denied is None:
            return True
        code, reason, message = denied
        self.send_status(code, reason, message)
        return False

    def review(self, gvr, body):
        """TokenReview and SubjectAccessReview as the real server answers them: 201 with the
        object and its status; nothing is stored."""
        if self.authorizer is None:
            return self.send_status(404, "NotFound", "the fake answers reviews with --rbac only")
        if not isinstance(body, dict) or not isinstance(body.get("spec"), dict):
            return self.send_status(400, "BadRequest", "body must be a JSON object with a spec")
        spec, out = body["spec"], copy.deepcopy(body)
        out.setdefault("metadata", {})
        if gvr[2] == "tokenreviews":
            ident = self.authorizer.tokens.get(spec.get("token") or "")
            wanted = spec.get("audiences") or [API_AUDIENCE]
            if ident is None:
                status = {"authenticated": False, "error": "[invalid bearer token, token lookup failed]"}
            elif ident.expired:
                status = {"authenticated": False, "error": "[invalid bearer token, Token has expired.]"}
            elif ident.ignores_audiences:
                # An authenticator that does not check spec.audiences: it says which audiences
                # the token has, and the caller must check them.
                status = {"authenticated": True, "user": {"username": ident.user,
                                                          "groups": ["system:authenticated"]},
                          "audiences": ident.audiences}
            elif not set(ident.audiences) & set(wanted):
                status = {"authenticated": False,
                          "error": "[invalid bearer token, token audiences %s is invalid for the "
                                   "target audiences %s]" % (json.dumps(ident.audiences), json.dumps(wanted))}
            else:
                user = ident.user
                groups = ["system:authenticated"]
                if user.startswith("system:serviceaccount:"):
                    groups = ["system:serviceaccounts", "system:serviceaccounts:" + user.split(":")[2],
                              "system:authenticated"]
                status = {"authenticated": True, "user": {"username": user, "groups": groups},
                          "audiences": [a for a in wanted if a in ident.audiences]}
                if ident.extra:
                    status["user"]["extra"] = ident.extra
        else:
            attrs = spec.get("resourceAttributes") or {}
            if spec.get("nonResourceAttributes"):
                path_attrs = spec["nonResourceAttributes"]
                allowed = self.authorizer.allowed_path(spec.get("user") or "",
                                                       path_attrs.get("verb") or "",
                                                       path_attrs.get("path") or "")
            else:
                allowed = self.authorizer.allowed(spec.get("user") or "", attrs.get("verb") or "",
                                                  attrs.get("group") or "",
                                                  attrs.get("resource") or "",
                                                  attrs.get("namespace") or None, attrs.get("name"))
            scoped = [i for i in self.authorizer.tokens.values()
                      if i.user == spec.get("user") and i.extra]
            missing_extra = any(spec.get("extra") != i.extra for i in scoped)
            status = {"allowed": allowed and not missing_extra}
            if missing_extra:
                status["reason"] = "the review does not carry the user's extra attributes"
            elif not allowed:
                status["reason"] = "no RBAC rule allows it"
        out["status"] = status
        return self.send_json(201, out)

    def apply_fault(self, path, query):
        is_watch = query.get("watch") in ("true", "1")
        with STATE.cond:
            for rule in STATE.faults:
                if rule["times"] <= 0:
                    continue
                if rule.get("method", "*") not in ("*", self.command):
                    continue
                if "watch" in rule and rule["watch"] != is_watch:
                    continue
                if not re.search(rule.get("path", ""), path):
                    continue
                if not re.search(rule.get("query", ""), self.path.partition("?")[2]):
                    continue
                rule["times"] -= 1
                break
            else:
                return False
        if rule.get("hang"):
            # Read and never answered: what a client sees of a server that stopped mid-call.
            self.log_request_entry(0)
            until = time.time() + float(rule["hang"])
            while time.time() < until:
                with STATE.cond:
                    if rule not in STATE.faults:
                        break
                time.sleep(0.05)
            self.drop()
            return True
        if rule.get("drop"):
            self.log_request_entry(0)
            self.drop()
            return True
        code = rule.get("status", 500)
        headers = {}
        if "retry_after" in rule:
            headers["Retry-After"] = str(rule["retry_after"])
        reasons = {410: "Expired", 429: "TooManyRequests", 500: "InternalError",
                   503: "ServiceUnavailable", 409: "Conflict"}
        message = rule.get("message", "injected failure")
        self.send_status(code, rule.get("reason", reasons.get(code, "Unknown")), message, headers)
        return True

    # ---- control ----
    def control(self, path, query):
        body = self.read_body() if self.command in ("POST", "PUT") else None
        body = body or {}
        with STATE.cond:
            if path == "/_fake/config" and self.command == "POST":
                if "split_events" in body:
                    STATE.split_events = bool(body["split_events"])
                if "bookmark_interval" in body:
                    STATE.bookmark_interval = float(body["bookmark_interval"])
                if "status_subresources" in body:
                    STATE.status_subresources = set(body["status_subresources"])
                if "watch_cache" in body:
                    STATE.watch_cache = bool(body["watch_cache"])
                result = {}
            elif path == "/_fake/faults" and self.command == "POST":
                if body.get("clear"):
                    STATE.faults = []
                else:
                    body.setdefault("times", 1)
                    STATE.faults.append(body)
                result = {}
            elif path == "/_fake/watch_control" and self.command == "POST":
                action = body.get("action")
                if action not in ("bookmark", "drop", "drop_partial", "expire", "silence"):
                    return self.send_json(400, {"error": "unknown action"})
                for w in STATE.watchers:
                    if action == "drop_partial":
                        w.drop_partial = True
                    elif action == "silence":
                        w.silent = True
                    else:
                        w.actions.append(action)
                if action == "expire":
                    STATE.compact()
                STATE.cond.notify_all()
                result = {"watches": len(STATE.watchers)}
            elif path == "/_fake/crds" and self.command == "POST":
                STATE.enforce_crds = bool(body.get("enforce", True))
                result = {"crds": sorted(STATE.crds)}
            elif path == "/_fake/compact" and self.command == "POST":
                STATE.compact()
                result = {"compacted": rv_str(STATE.compacted)}
            elif path == "/_fake/requests" and self.command == "GET":
                result = {"requests": list(STATE.requests)}
            elif path == "/_fake/requests" and self.command == "DELETE":
                STATE.requests = []
                result = {}
            elif path == "/_fake/watches":
                result = {"watches": len(STATE.watchers)}
            else:
                return self.send_json(404, {"error": "unknown control path"})
        data = json.dumps(result).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return None

    # ---- reads ----
    def visible(self, route, query):
        labels = label_matcher(query.get("labelSelector"))
        fields = field_matcher(query.get("fieldSelector"))

        def match(obj):
            if obj is None:
                return False
            meta = obj.get("metadata", {})
            if route["namespace"] is not None and meta.get("namespace") != route["namespace"]:
                return False
            return labels(meta.get("labels") or {}) and fields(obj)
        return match

    def bad_field_selector(self, route, query):
        """Answers 400 (and True) for a field selector the real server does not support."""
        field = unsupported_field(route["gvr"][2], query.get("fieldSelector"))
        if field is None:
            return False
        self.send_status(400, "BadRequest", "field label not supported: %s" % field)
        return True

    def list(self, route, query):
        gvr = route["gvr"]
        limit = int(query.get("limit") or 0)
        if self.bad_field_selector(route, query):
            return None
        if query.get("continue") and query.get("resourceVersion"):
            return self.send_status(400, "BadRequest",
                                    "specifying resource version is not allowed when using continue")
        if query.get("resourceVersion") == "0" and STATE.watch_cache:
            limit = 0  # the watch cache serves the whole collection
        with STATE.cond:
            token = query.get("continue")
            if token:
                page = STATE.continues.pop(token, None)
                if page is None:
                    return self.send_status(
                        410, "Expired",
                        "The provided continue parameter is too old to display a consistent list "
                        "result. You can start a new list without the continue parameter.")
                items, list_rv = page
            else:
                rv = query.get("resourceVersion")
                if rv not in (None, "", "0"):
                    rev = rv_parse(rv)
                    if rev is None:
                        return self.send_status(400, "BadRequest", "invalid resourceVersion " + rv)
                    if rev < STATE.compacted:
                        return self.send_status(
                            410, "Expired", "too old resource version: %s (%s)" % (rv, rv_str(STATE.compacted)))
                match = self.visible(route, query)
                objs = STATE.objects.get(gvr, {})
                items = [copy.deepcopy(objs[k]) for k in sorted(objs) if match(objs[k])]
                list_rv = rv_str(STATE.rev)
            meta = {"resourceVersion": list_rv}
            if limit and len(items) > limit:
                new_token = uuid.uuid4().hex
                STATE.continues[new_token] = (items[limit:], list_rv)
                meta["continue"] = new_token
                meta["remainingItemCount"] = len(items) - limit
                items = items[:limit]
        kind = KINDS.get(gvr[2], gvr[2].capitalize())
        self.send_json(200, {"kind": kind + "List", "apiVersion": api_version(gvr),
                             "metadata": meta, "items": items})
        return None

    def get(self, route):
        with STATE.cond:
            obj = STATE.objects.get(route["gvr"], {}).get((route["namespace"] or "", route["name"]))
            obj = copy.deepcopy(obj)
        if obj is None:
            return self.send_status(404, "NotFound", '%s "%s" not found' % (route["gvr"][2], route["name"]))
        return self.send_json(200, obj)

    # ---- watch ----
    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
        self.wfile.flush()

    def write_event(self, event, partial=False):
        line = (json.dumps(event) + "\n").encode()
        if partial:
            self.write_chunk(line[: len(line) // 2])
            return
        if STATE.split_events and len(line) > 3:
            # Each piece is its own HTTP chunk, flushed as its own TCP segment (TCP_NODELAY).
            # No sleep between pieces: a watch that writes slower than events arrive falls
            # behind and delays control actions queued behind the backlog.
            third = len(line) // 3
            for piece in (line[:third], line[third: 2 * third], line[2 * third:]):
                self.write_chunk(piece)
        else:
            self.write_chunk(line)

    def hold_silently(self):
        """Writes nothing until the client closes the connection (a hung server or dead peer)."""
        while True:
            readable, _, _ = select.select([self.connection], [], [], 0.1)
            if not readable:
                continue
            try:
                if not self.connection.recv(1, socket.MSG_PEEK):
                    return
            except ValueError:  # TLS sockets take no recv flags: read (and drop) instead
                if not self.connection.recv(1):
                    return
            except OSError:
                return

    def watch(self, route, query):
        gvr = route["gvr"]
        if self.bad_field_selector(route, query):
            return None
        match = self.visible(route, query)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        timeout = float(query.get("timeoutSeconds") or 0)
        kind = KINDS.get(gvr[2], gvr[2].capitalize())
        rv = query.get("resourceVersion")
        initial = []
        with STATE.cond:
            if rv in (None, "", "0"):
                cursor = STATE.rev
                objs = STATE.objects.get(gvr, {})
                initial = [{"type": "ADDED", "object": copy.deepcopy(objs[k])}
                           for k in sorted(objs) if match(objs[k])]
                expired = False
            else:
                cursor = rv_parse(rv)
                if cursor is None:
                    return self.send_status(400, "BadRequest", "invalid resourceVersion " + rv)
                expired = cursor < STATE.compacted
            watcher = Watcher()
            STATE.watchers.add(watcher)
        self.log_request_entry(200)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        deadline = time.time() + timeout if timeout > 0 else None
        last_bookmark = time.time()
        try:
            if expired:
                self.write_event({"type": "ERROR", "object": status_body(
                    410, "Expired", "too old resource version: %s (%s)" % (rv, rv_str(STATE.compacted)))})
                self.write_chunk(b"")
                return None
            for event in initial:
                self.write_event(event)
            while True:
                with STATE.cond:
                    start = bisect.bisect_right(STATE.history_revs, cursor)
                    pending = STATE.history[start:]
                    cursor = max(cursor, STATE.rev)
                    actions, watcher.actions = watcher.actions, []
                    silent = watcher.silent
                    if not pending and not actions and not silent:
                        STATE.cond.wait(0.05)
                    current_rv = rv_str(cursor)
                if silent:
                    self.hold_silently()
                    self.close_connection = True
                    return None
                for _, egvr, etype, old, new in pending:
                    if egvr != gvr:
                        continue
                    event = self.filter_event(etype, old, new, match)
                    if event is None:
                        continue
                    if watcher.drop_partial:
                        self.write_event(event, partial=True)
                        self.drop()
                        return None
                    self.write_event(event)
                for action in actions:
                    if action == "bookmark" and bookmarks:
                        self.write_bookmark(kind, gvr, current_rv)
                    elif action == "drop":
                        self.drop()
                        return None
                    elif action == "expire":
                        self.write_event({"type": "ERROR", "object": status_body(
                            410, "Expired", "too old resource version: %s (%s)" % (current_rv, current_rv))})
                        self.write_chunk(b"")
                        return None
                now = time.time()
                if bookmarks and STATE.bookmark_interval > 0 and now - last_bookmark >= STATE.bookmark_interval:
                    last_bookmark = now
                    self.write_bookmark(kind, gvr, current_rv)
                if deadline is not None and now >= deadline:
                    self.write_chunk(b"")
                    return None
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            return None
        finally:
            with STATE.cond:
                STATE.watchers.discard(watcher)

    def write_bookmark(self, kind, gvr, rv):
        self.write_event({"type": "BOOKMARK", "object": {
            "kind": kind, "apiVersion": api_version(gvr), "metadata": {"resourceVersion": rv}}})

    @staticmethod
    def filter_event(etype, old, new, match):
        if etype == "ADDED":
            return {"type": "ADDED", "object": new} if match(new) else None
        if etype == "DELETED":
            return {"type": "DELETED", "object": new} if match(old) else None
        was, now = match(old), match(new)
        if was and now:
            return {"type": "MODIFIED", "object": new}
        if now:
            return {"type": "ADDED", "object": new}
        if was:
            return {"type": "DELETED", "object": new}
        return None

    # ---- writes ----
    def create(self, route, body):
        if not isinstance(body, dict):
            return self.send_status(400, "BadRequest", "body must be a JSON object")
        gvr = route["gvr"]
        meta = body.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                return self.send_status(422, "Invalid", "metadata.name: Required value")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if route["namespace"] is not None:
            meta["namespace"] = route["namespace"]
        key = (route["namespace"] or "", meta["name"])
        with STATE.cond:
            objs = STATE.objects.setdefault(gvr, {})
            if key in objs:
                return self.send_status(409, "AlreadyExists",
                                        '%s "%s" already exists' % (gvr[2], meta["name"]))
            body, invalid = schema_checked(gvr, body, None)
            if invalid:
                return self.send_status(*invalid)
            label_namespace(gvr, body)
            meta = body["metadata"]
            meta["uid"] = str(uuid.uuid4())
            meta["generation"] = 1
            meta["creationTimestamp"] = now_rfc3339()
            body.setdefault("apiVersion", api_version(gvr))
            body.setdefault("kind", KINDS.get(gvr[2], gvr[2].capitalize()))
            objs[key] = body
            STATE.commit(gvr, "ADDED", None, body)
            out = copy.deepcopy(body)
        return self.send_json(201, out)

    def write_existing(self, route, new_body_fn):
        gvr = route["gvr"]
        key = (route["namespace"] or "", route["name"])
        with STATE.cond:
            objs = STATE.objects.get(gvr, {})
            old = objs.get(key)
            if old is None:
                return self.send_status(404, "NotFound", '%s "%s" not found' % (gvr[2], route["name"]))
            proposed, error = new_body_fn(copy.deepcopy(old))
            if error:
                return self.send_status(*error)
            if not isinstance(proposed, dict):
                return self.send_status(400, "BadRequest", "body must be a JSON object")
            # Defaults first, as the real server decodes them in, so they never count as a
            # spec change.
            proposed = schema_defaulted(gvr, proposed)
            want_rv = (proposed.get("metadata") or {}).get("resourceVersion")
            if want_rv and want_rv != old["metadata"]["resourceVersion"]:
                return self.send_status(
                    409, "Conflict",
                    'Operation cannot be fulfilled on %s "%s": the object has been modified; '
                    "please apply your changes to the latest version and try again" % (gvr[2], route["name"]))
            has_status = gvr[2] in STATE.status_subresources
            new = copy.deepcopy(old)
            if route["sub"] == "status":
                new["status"] = proposed.get("status")
                if new["status"] is None:
                    new.pop("status")
            else:
                for field in list(new):
                    if field not in ("metadata", "status") or (field == "status" and not has_status):
                        new.pop(field)
                for field, value in proposed.items():
                    if field == "metadata" or (field == "status" and has_status):
                        continue
                    new[field] = value
                meta = new["metadata"]
                for field in ("labels", "annotations", "ownerReferences", "finalizers"):
                    if field in proposed.get("metadata", {}):
                        meta[field] = proposed["metadata"][field]
                    elif field in meta:
                        meta.pop(field)
                label_namespace(gvr, new)
                spec_changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != \
                    {k: v for k, v in old.items() if k not in ("metadata", "status")}
                if spec_changed:
                    meta["generation"] = old["metadata"].get("generation", 1) + 1
            new, invalid = schema_checked(gvr, new, old)
            if invalid:
                return self.send_status(*invalid)
            if strip_volatile(new) != strip_volatile(old):
                objs[key] = new
                STATE.commit(gvr, "MODIFIED", old, new)
            out = copy.deepcopy(objs[key])
        return self.send_json(200, out)

    def update(self, route, body):
        if not isinstance(body, dict):
            return self.send_status(400, "BadRequest", "body must be a JSON object")
        return self.write_existing(route, lambda old: (body, None))

    def patch(self, route, body):
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype != "application/merge-patch+json":
            return self.send_status(415, "UnsupportedMediaType",
                                    "the fake supports application/merge-patch+json only")

        def patched(old):
            result = merge_patch(old, body)
            if not (body.get("metadata") or {}).get("resourceVersion"):
                result.setdefault("metadata", {}).pop("resourceVersion", None)
            return result, None
        return self.write_existing(route, patched)

    def delete(self, route):
        gvr = route["gvr"]
        key = (route["namespace"] or "", route["name"])
        with STATE.cond:
            old = STATE.objects.get(gvr, {}).pop(key, None)
            if old is None:
                return self.send_status(404, "NotFound", '%s "%s" not found' % (gvr[2], route["name"]))
            STATE.commit(gvr, "DELETED", old, None)
        return self.send_json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Success", "details": {"name": route["name"]}})


def watch_parent(parent):
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="exit when the process that started us goes away")
    parser.add_argument("--tls-cert", help="serve HTTPS with this PEM certificate")
    parser.add_argument("--tls-key", help="the certificate's PEM private key")
    parser.add_argument("--token", help="require 'Authorization: Bearer TOKEN' (else 401)")
    parser.add_argument("--rbac", help="authorize with the Roles/ClusterRoles and bindings in "
                        "this multi-document YAML (helm template output)")
    parser.add_argument("--identity", action="append", default=[],
                        metavar="TOKEN=USER[;aud=A,B][;expired]",
                        help="with --rbac: the user of a bearer token, 'admin' or "
                        "'system:serviceaccount:NS:NAME', the audiences TokenReview checks it "
                        "against (default the API server's) and whether it expired (repeatable)")
    parser.add_argument("--crds", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", "..", "..", "crds"),
                        help="folder of CRD YAMLs whose schemas are enforced (default: crds/)")
    args = parser.parse_args()
    STATE.crds = crd_schema.load_crds(args.crds)
    STATE.status_subresources |= {plural for plural, crd in STATE.crds.items() if crd["status"]}
    Handler.required_token = args.token
    if args.rbac:
        import yaml  # Debian python3-yaml; only needed for --rbac
        with open(args.rbac) as f:
            documents = list(yaml.load_all(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
        Handler.authorizer = Authorizer(documents, [Identity(i) for i in args.identity])
        Handler.admission = Admission(documents)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    if args.exit_with_parent:
        threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    sys.exit(main())
