// inflight.js - the in-flight card of a rule whose algorithm holds units (#/rule/<name>): the
// units its live holds hold, over time, and the keys holding most. Both come from
// GET /v1/rules/<name>/holders (one walk of the rule's keys on the server, as /metrics'
// sluice_in_flight), asked every HOLDERS_EVERY_MS while the page is open; the chart is what
// this page has seen since it opened, at most KEEP points.
import {api} from "./api.js";
import {timeChart} from "./chart.js";
import {h, fill, num} from "./dom.js";

const HOLDERS_EVERY_MS = 1000;
const KEEP = 900; // points kept: 15 minutes at one a second

function holdersTable() {
  const body = h("tbody", {});
  const table = h("table", {class: "topkeys", id: "holders"},
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "key"),
      h("th", {class: "num"}, "units held"))),
    body);
  return {table, body};
}

function showHolders(t, reply) {
  fill(t.body);
  for (const [i, k] of reply.keys.entries()) {
    t.body.appendChild(h("tr", {dataset: {units: k.units}},
      h("td", {class: "num"}, i + 1),
      h("td", {class: "key holder-key"}, k.key + (k.truncated ? "…" : "")),
      h("td", {class: "num"}, num(k.units))));
  }
}

// The card, and start()/stop() of its polling. rangeSeconds() is how far back the chart goes.
export function inflightCard(name, rangeSeconds) {
  const now = h("p", {id: "inflight-now"}, "loading…");
  const chartEl = h("div", {class: "chart", id: "inflight-chart"});
  const holders = holdersTable();
  const status = h("p", {class: "muted"}, "");
  const el = h("section", {class: "card", id: "inflight"},
    h("h2", {}, "In flight"),
    h("p", {class: "muted"}, "Units the rule's live holds hold, summed over its keys, as this " +
      "page has seen them since it opened."),
    now, chartEl,
    h("h3", {}, "Keys holding most"), status, holders.table);
  const xs = [];
  const ys = [];
  let chart = null;
  let timer = null;
  let stopped = true;
  // The points within the range, led by an empty one at its start: the time axis spans the
  // range chosen, as the rates' chart above, however few points the page has seen.
  const data = () => {
    const start = (xs.length > 0 ? xs[xs.length - 1] : Date.now() / 1000) - rangeSeconds();
    let from = xs.length;
    while (from > 0 && xs[from - 1] > start) from--;
    return [[start].concat(xs.slice(from)), [null].concat(ys.slice(from))];
  };

  async function poll() {
    try {
      const r = await api.holders(name, 10);
      if (stopped) return;
      if (r.in_flight === null) {
        fill(now, h("span", {class: "muted"},
          "The request store keeps the holds (Redis): sluiced cannot count them here."));
        now.dataset.units = "";
      } else {
        xs.push(Date.now() / 1000);
        ys.push(r.in_flight);
        if (xs.length > KEEP) {
          xs.splice(0, xs.length - KEEP);
          ys.splice(0, ys.length - KEEP);
        }
        fill(now, "now: ", h("b", {}, num(r.in_flight)), " units held (at most " +
          num(r.limit) + " per key)");
        now.dataset.units = r.in_flight;
        if (chart) chart.update(data());
        else chart = timeChart(chartEl, ["in_flight"], data(), 160);
      }
      showHolders(holders, r);
      status.className = "muted";
      status.textContent = r.keys.length === 0 ? "no key holds anything now" : "held now";
    } catch (e) {
      if (stopped) return;
      status.textContent = e.message;
      status.className = "error";
    }
    if (!stopped) timer = setTimeout(poll, HOLDERS_EVERY_MS);
  }

  return {
    el,
    start() {
      if (!stopped) return;
      stopped = false;
      poll();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      if (chart) chart.destroy();
      chart = null;
    },
    redraw() {
      if (chart) chart.update(data());
    },
  };
}
