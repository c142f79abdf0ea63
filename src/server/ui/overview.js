// overview.js - #/ : every rule's allowed / denied / shadow-denied requests per second over the
// last 15 minutes, live.
import {api} from "./api.js";
import {timeChart} from "./chart.js";
import {h, fill, num, duration} from "./dom.js";
import {follow, lastSums} from "./stats.js";

export function ruleTags(info) {
  return [
    h("span", {class: "tag"}, info.algorithm),
    h("span", {class: "muted"}, num(info.limit) + " per " + duration(info.window_ms)),
    info.shadow ? h("span", {class: "tag shadow"}, "shadow") : null,
  ];
}

// The sums line of a rule card: last minute's counts.
export function sumsLine(el, s) {
  const m = lastSums(s, 60);
  fill(el,
    h("span", {}, "last minute: "),
    h("span", {}, h("b", {class: "allowed"}, num(m.allowed)), " allowed"),
    h("span", {}, h("b", {class: "denied"}, num(m.denied)), " denied"),
    h("span", {}, h("b", {class: "shadow-denied"}, num(m.shadow_denied)), " shadow-denied"));
  el.dataset.allowed = m.allowed;
  el.dataset.denied = m.denied;
  el.dataset.shadowDenied = m.shadow_denied;
}

const SERIES = ["allowed", "denied", "shadow_denied"];
// A series as chart data: its last `seconds` points (all when not given).
export const chartData = (s, seconds) => {
  const from = seconds ? Math.max(0, s.x.length - seconds) : 0;
  return [s.x, s.allowed, s.denied, s.shadow_denied].map((a) => a.slice(from));
};

const RANGES = [["1 min", 60], ["5 min", 300], ["15 min", 900]];
const RANGE_KEY = "sluice.range";

// Buttons choosing how far back the charts go (remembered for the tab). onChange(seconds).
export function rangePicker(onChange) {
  let seconds = Number(sessionStorage.getItem(RANGE_KEY)) || 300;
  const buttons = RANGES.map(([label, s]) => h("button", {type: "button", class: "range",
    dataset: {seconds: s}, onclick: () => {
      seconds = s;
      sessionStorage.setItem(RANGE_KEY, String(s));
      mark();
      onChange(s);
    }}, label));
  function mark() {
    for (const b of buttons) b.classList.toggle("active", Number(b.dataset.seconds) === seconds);
  }
  mark();
  return {el: h("span", {class: "ranges", id: "range"}, buttons), seconds: () => seconds};
}

export function mount(root) {
  const state = h("span", {class: "muted", id: "stream-state"}, "connecting…");
  const grid = h("div", {class: "grid", id: "rules-grid"});
  let cards = new Map();
  let latest = new Map();
  const range = rangePicker((seconds) => {
    for (const [name, c] of cards) c.chart.update(chartData(latest.get(name), seconds));
  });
  fill(root, h("div", {class: "titlebar"}, h("h1", {}, "Overview ", state), range.el), grid);

  function destroyCharts() {
    for (const c of cards.values()) c.chart.destroy();
    cards = new Map();
  }

  const stop = follow(() => api.stats(), {
    onLoad(rules) {
      latest = rules;
      destroyCharts();
      fill(grid);
      if (rules.size === 0) {
        grid.appendChild(h("p", {class: "muted"}, "No rules yet. ",
          h("a", {href: "#/rules"}, "Create one"), "."));
      }
      for (const [name, s] of rules) {
        const chartEl = h("div", {class: "chart"});
        const sums = h("div", {class: "sums"});
        const card = h("section", {class: "card rule-card", dataset: {rule: name}},
          h("header", {}, h("h2", {}, h("a", {href: "#/rule/" + encodeURIComponent(name)}, name)),
            ruleTags(s.info)),
          sums, chartEl);
        grid.appendChild(card);
        sumsLine(sums, s);
        cards.set(name, {sums, chart: timeChart(chartEl, SERIES, chartData(s, range.seconds()))});
      }
    },
    onTick(rules) {
      latest = rules;
      for (const [name, s] of rules) {
        const c = cards.get(name);
        if (!c) continue;
        sumsLine(c.sums, s);
        c.chart.update(chartData(s, range.seconds()));
      }
    },
    onState(st) {
      state.textContent = st === "live" ? "· live" : "· reconnecting…";
      state.dataset.state = st;
    },
    onError(e) {
      fill(grid, h("p", {class: "error"}, "Could not load the rates: " + e.message));
    },
  });
  return () => {
    stop();
    destroyCharts();
  };
}
