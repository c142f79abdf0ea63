// api.js - sluiced's HTTP API as the console calls it. Reads need nothing; changes and replays
// need the admin token when the server has one. The token entered (kept in sessionStorage, for
// this tab only) goes with every request, and so does X-Sluice-Client: sluiced takes a change
// only with a header no form and no other site's page can make a browser send (a DELETE has no
// JSON body to show it), and names the console as the client in its log of changes.

const TOKEN_KEY = "sluice.adminToken";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// An API reply that is not 2xx. problem is the RFC 9457 body ({title, status, detail, field?})
// or null; message is what to show a person.
export class ApiError extends Error {
  constructor(status, problem, message) {
    super(message);
    this.status = status;
    this.problem = problem;
    this.field = problem && typeof problem.field === "string" ? problem.field : null;
  }
}

function messageFor(status, problem) {
  const detail = problem && problem.detail ? problem.detail : "";
  if (status === 401) {
    return (token() ? "the admin token was refused" : "this needs the admin token (enter it at the top)") +
      (detail ? ": " + detail : "");
  }
  if (detail) return detail;
  return "HTTP " + status + (problem && problem.title ? " " + problem.title : "");
}

// Calls method path with body (an object sent as JSON, or undefined). Resolves to the parsed
// JSON reply (null for 204); rejects with ApiError for a reply that is not 2xx, or Error when
// the server cannot be reached.
export async function call(method, path, body) {
  const headers = {Accept: "application/json", "X-Sluice-Client": "console"};
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  let res;
  try {
    // same-origin: the request carries the page's Origin, which sluiced checks on a change
    res = await fetch(path, {method, headers, body: payload, cache: "no-store",
      referrerPolicy: "same-origin"});
  } catch (e) {
    throw new Error("sluiced did not answer (" + e.message + ")");
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (e) {
      if (res.ok) throw new Error("sluiced sent a reply that is not JSON");
    }
  }
  if (!res.ok) throw new ApiError(res.status, data, messageFor(res.status, data));
  return data;
}

export const enc = encodeURIComponent;

export const api = {
  stats: (seconds) => call("GET", "/v1/stats" + (seconds ? "?seconds=" + seconds : "")),
  holders: (rule, n) => call("GET", "/v1/rules/" + enc(rule) + "/holders?n=" + (n || 10)),
  top: (rule, by, n) => call("GET", "/v1/rules/" + enc(rule) + "/top?n=" + (n || 10) + "&by=" + by),
  peek: (rule, key) => call("POST", "/v1/allow", {rule, key, cost: 0}),
  rules: () => call("GET", "/v1/rules"),
  rule: (name) => call("GET", "/v1/rules/" + enc(name)),
  putRule: (name, rule) => call("PUT", "/v1/rules/" + enc(name), rule),
  deleteRule: (name) => call("DELETE", "/v1/rules/" + enc(name)),
  replay: (req) => call("POST", "/v1/replay", req),
  algorithms,
  adaptive,
};

// The algorithms sluiced knows, from its table (GET /v1/algorithms): what the forms offer and
// which numbers each takes, asked once per page load (again after a failure).
let tableAsked = null;
function table() {
  if (!tableAsked) {
    tableAsked = call("GET", "/v1/algorithms").catch((err) => {
      tableAsked = null;
      throw err;
    });
  }
  return tableAsked;
}
function algorithms() {
  return table().then((r) => r.algorithms);
}
// The adaptive algorithms ([{name, summary, options}]): what a concurrency rule's limit may do.
function adaptive() {
  return table().then((r) => r.adaptive || []);
}

// The names of the algorithms that take a parameter ("burst", "buckets", "max_delay").
export const taking = (algs, param) => algs.filter((a) => a[param] !== null).map((a) => a.name);

// The algorithm a form offers first: the one the table suggests, or the first.
export const suggested = (algs) => (algs.find((a) => a.suggested) || algs[0] || {name: ""}).name;
