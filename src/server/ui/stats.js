// stats.js - per-rule counts per second: loaded once from GET /v1/stats, then kept current from
// the stream GET /v1/stats/stream (one "stats" event a second). Shared by the overview and the
// rule page.

const KEEP = 900; // seconds kept per rule, as the server keeps

// A rule's series: {info: {name, algorithm, limit, window_ms, shadow}, x: [unix s],
// allowed: [], denied: [], shadow_denied: []}, oldest first.
function seriesFrom(stats, r) {
  const n = r.allowed.length;
  const x = new Array(n);
  for (let i = 0; i < n; i++) x[i] = (stats.end_ms - (n - 1 - i) * stats.interval_ms) / 1000;
  return {
    info: {name: r.name, algorithm: r.algorithm, limit: r.limit, window_ms: r.window_ms,
      shadow: r.shadow},
    x, allowed: r.allowed.slice(), denied: r.denied.slice(),
    shadow_denied: (r.shadow_denied || new Array(n).fill(0)).slice(),
  };
}

function push(s, t, one) {
  s.x.push(t);
  s.allowed.push(one.allowed);
  s.denied.push(one.denied);
  s.shadow_denied.push(one.shadow_denied || 0);
  if (s.x.length > KEEP) {
    for (const k of ["x", "allowed", "denied", "shadow_denied"]) s[k].splice(0, s[k].length - KEEP);
  }
}

// The time of the newest second held (unix s), or null when none is.
function lastTime(rules) {
  for (const s of rules.values()) if (s.x.length > 0) return s.x[s.x.length - 1];
  return null;
}

// Sums of the last `seconds` entries of a series: {allowed, denied, shadow_denied}.
export function lastSums(s, seconds) {
  const out = {allowed: 0, denied: 0, shadow_denied: 0};
  const from = Math.max(0, s.x.length - seconds);
  for (const k of Object.keys(out)) for (let i = from; i < s[k].length; i++) out[k] += s[k][i];
  return out;
}

// Follows the stats: calls onLoad(Map name -> series) after the first load and whenever the
// set of rules changes, onTick(Map) after each event, onState("live" | "reconnecting").
// load is () => Promise of the GET /v1/stats reply. Returns a function that stops.
export function follow(load, {onLoad, onTick, onState, onError}) {
  let stopped = false;
  let rules = new Map();
  let source = null;
  let reloading = false;

  async function reload() {
    reloading = true;
    try {
      const stats = await load();
      if (stopped) return;
      rules = new Map(stats.rules.map((r) => [r.name, seriesFrom(stats, r)]));
      onLoad(rules);
    } catch (e) {
      if (!stopped) onError(e);
    } finally {
      reloading = false;
    }
  }

  function onEvent(ev) {
    if (stopped || reloading) return;
    let d;
    try {
      d = JSON.parse(ev.data);
    } catch (e) {
      return;
    }
    const names = new Set(d.rules.map((r) => r.name));
    const changed = d.rules.some((r) => !rules.has(r.name)) ||
      [...rules.keys()].some((n) => !names.has(n));
    const t = d.end_ms / 1000;
    const last = lastTime(rules);
    if (last !== null && t <= last) return; // a second the load already had
    if (changed || (last !== null && t > last + 1.5)) {
      reload(); // rules came or went, or seconds were missed (a reconnect): ask for them all
      return;
    }
    for (const r of d.rules) push(rules.get(r.name), t, r);
    onTick(rules);
  }

  reload().then(() => {
    if (stopped) return;
    source = new EventSource("/v1/stats/stream");
    source.addEventListener("stats", onEvent);
    source.addEventListener("open", () => onState("live"));
    source.addEventListener("error", () => onState("reconnecting"));
  });
  return () => {
    stopped = true;
    if (source) source.close();
  };
}
