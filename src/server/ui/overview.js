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
export const chartData = (s) => [s.x, s.allowed, s.denied, s.shadow_denied];

export function mount(root) {
  const state = h("span", {class: "muted", id: "stream-state"}, "connecting…");
  const grid = h("div", {class: "grid", id: "rules-grid"});
  fill(root, h("h1", {}, "Overview ", state), grid);
  let cards = new Map();

  function destroyCharts() {
    for (const c of cards.values()) c.chart.destroy();
    cards = new Map();
  }

  const stop = follow(() => api.stats(), {
    onLoad(rules) {
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
        cards.set(name, {sums, chart: timeChart(chartEl, SERIES, chartData(s))});
      }
    },
    onTick(rules) {
      for (const [name, s] of rules) {
        const c = cards.get(name);
        if (!c) continue;
        sumsLine(c.sums, s);
        c.chart.update(chartData(s));
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
