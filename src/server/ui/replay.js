// replay.js - #/replay : what a rule would have done to a traffic log (sluice replay's format:
// "TIME KEY [COST]" per line), computed by sluiced with the same core (POST /v1/replay):
// admitted and rejected per key and over time. A replay needs the admin token when sluiced has
// one (it is work sluiced does on a thread of its own, within a deadline and a memory budget);
// one stopped early says why and how many lines of the log it replayed.
import {api, ApiError, taking, suggested} from "./api.js";
import {timeChart} from "./chart.js";
import {h, fill, num} from "./dom.js";

const UNIT_S = {s: 1, ms: 1e-3, us: 1e-6, ns: 1e-9};
const KEYS_SHOWN = 200; // rows of the per-key table
const STOPPED = {
  deadline: "it reached sluiced's time limit for a replay (--replay-timeout)",
  memory: "its keys needed more memory than sluiced gives a replay (--replay-memory)",
  shutdown: "sluiced was stopping",
};

const numberOrText = (v) => (/^(0|[1-9][0-9]{0,15})$/.test(v) ? Number(v) : v);

export function mount(root) {
  const log = h("textarea", {id: "replay-log", rows: 10, spellcheck: "false",
    placeholder: "1700000000000 user:alice\n1700000000100 user:alice 2\n1700000000200 user:bob"});
  const file = h("input", {id: "replay-file", type: "file", accept: ".log,.txt,text/plain"});
  file.addEventListener("change", () => {
    const f = file.files[0];
    if (!f) return;
    f.text().then((t) => {
      log.value = t;
    });
  });
  // the algorithms and which take a burst: sluiced's table (GET /v1/algorithms), filled in below
  const alg = h("select", {id: "replay-algorithm"});
  let bursts = [];
  const limit = h("input", {id: "replay-limit", type: "text", value: "5", size: 8});
  const windowIn = h("input", {id: "replay-window", type: "text", value: "1s", size: 8});
  const burst = h("input", {id: "replay-burst", type: "text", size: 8, placeholder: "limit"});
  const unit = h("select", {id: "replay-unit"}, Object.keys(UNIT_S).map((u) =>
    h("option", {value: u}, u)));
  unit.value = "ms";
  const error = h("p", {class: "error", id: "replay-error", role: "alert"});
  const result = h("div", {id: "replay-result"});
  const syncBurst = () => {
    burst.disabled = !bursts.includes(alg.value);
  };
  alg.addEventListener("change", syncBurst);
  let chart = null;
  let authError = false; // the message shown is the server refusing the admin token (or none)

  async function run(e) {
    e.preventDefault();
    error.textContent = "";
    authError = false;
    const req = {algorithm: alg.value, limit: numberOrText(limit.value.trim()),
      window: windowIn.value.trim(), unit: unit.value, log: log.value};
    if (!burst.disabled && burst.value.trim() !== "") req.burst = numberOrText(burst.value.trim());
    const button = e.submitter;
    if (button) button.disabled = true;
    try {
      show(await api.replay(req), unit.value);
    } catch (err) {
      error.textContent = err.message;
      authError = err instanceof ApiError && err.status === 401;
    } finally {
      if (button) button.disabled = false;
    }
  }

  function show(r, u) {
    if (chart) chart.destroy();
    chart = null;
    const chartEl = h("div", {class: "chart"});
    const rows = r.keys.slice(0, KEYS_SHOWN).map((k) => h("tr", {},
      h("td", {class: "key"}, k.key), h("td", {class: "num"}, num(k.admitted)),
      h("td", {class: "num"}, num(k.rejected))));
    const lines = r.lines_replayed === 1 ? "line" : "lines";
    const stopped = r.complete === false ? h("p", {class: "warn", id: "replay-stopped",
      dataset: {stopped: r.stopped, lines: r.lines_replayed}},
    "Stopped early: " + (STOPPED[r.stopped] || r.stopped) + ". These are the counts of the " +
      "log's first " + num(r.lines_replayed) + " " + lines + ".") : null;
    fill(result,
      h("section", {class: "card"}, stopped,
        h("div", {class: "sums", id: "replay-totals", dataset: {admitted: r.admitted,
          rejected: r.rejected}},
        h("span", {}, h("b", {class: "allowed"}, num(r.admitted)), " admitted"),
        h("span", {}, h("b", {class: "denied"}, num(r.rejected)), " rejected"),
        h("span", {class: "muted"}, r.keys.length + " keys")),
        chartEl),
      h("section", {class: "card"}, h("h2", {}, "Per key, most rejected first"),
        r.keys.length > KEYS_SHOWN ? h("p", {class: "muted"}, "the first " + KEYS_SHOWN +
          " keys of " + r.keys.length) : null,
        h("table", {id: "replay-keys"}, h("thead", {}, h("tr", {}, h("th", {}, "key"),
          h("th", {class: "num"}, "admitted"), h("th", {class: "num"}, "rejected"))),
        h("tbody", {}, rows))));
    if (r.series.length > 0) {
      // times since the epoch are shown as dates; others (a log starting at 0) as seconds
      const xs = r.series.map((p) => p.t * UNIT_S[u]);
      chart = timeChart(chartEl, ["admitted", "rejected"],
        [xs, r.series.map((p) => p.admitted), r.series.map((p) => p.rejected)], 200,
        xs[0] > 1e9);
    }
  }

  const intro = h("p", {class: "muted"}, "What a rule would have done to traffic you already " +
    "have: one request per line, TIME KEY [COST], as for sluice replay.");
  const page = () => fill(root, h("h1", {}, "Replay"), intro,
    h("form", {class: "card", id: "replay-form", onsubmit: run},
      h("div", {class: "row"}, h("label", {for: "replay-file"}, "Log file "), file),
      log,
      h("div", {class: "row"},
        h("label", {for: "replay-algorithm"}, "Algorithm"), alg,
        h("label", {for: "replay-limit"}, "Limit"), limit,
        h("label", {for: "replay-window"}, "Window"), windowIn,
        h("label", {for: "replay-burst"}, "Burst"), burst,
        h("label", {for: "replay-unit"}, "Time unit"), unit,
        h("button", {type: "submit", class: "primary", id: "replay-run"}, "Replay")),
      error),
    result);
  // The form once its algorithms are known (without them: the form, and why it has none).
  let mounted = true;
  fill(root, h("h1", {}, "Replay"), intro);
  api.algorithms().then((algs) => {
    if (!mounted) return;
    fill(alg, algs.map((a) => h("option", {value: a.name}, a.name)));
    alg.value = suggested(algs);
    bursts = taking(algs, "burst");
    syncBurst();
    page();
  }, (err) => {
    if (!mounted) return;
    error.textContent = "Could not read the algorithms: " + err.message;
    page();
  });
  // A new admin token: a refusal shown for the one before no longer holds (what was typed stays).
  const onToken = () => {
    if (authError) error.textContent = "";
    authError = false;
  };
  window.addEventListener("sluice:token", onToken);
  return () => {
    mounted = false;
    window.removeEventListener("sluice:token", onToken);
    if (chart) chart.destroy();
  };
}
