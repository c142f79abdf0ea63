// rule.js - #/rule/<name> : one rule's numbers and rates, for a rule whose algorithm holds
// units its units in flight and the keys holding most (inflight.js), its top keys by decisions
// and by denials over the last minute, and a key inspector that peeks a key (cost 0: nothing used) and
// says whether a request of cost 1 would be allowed now.
import {api} from "./api.js";
import {timeChart} from "./chart.js";
import {h, fill, num, duration} from "./dom.js";
import {ruleTags, sumsLine, chartData, rangePicker} from "./overview.js";
import {follow, lastSums} from "./stats.js";
import {inflightCard} from "./inflight.js";

const TOP_EVERY_MS = 2000; // how often the top keys are asked again

function topTable(by) {
  const body = h("tbody", {});
  const status = h("p", {class: "muted"}, "loading…");
  const table = h("table", {class: "topkeys", dataset: {by}},
    h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "key"),
      h("th", {class: "num"}, by === "denied" ? "denials" : "decisions"),
      h("th", {class: "num", title: "the count may be over by at most this much"}, "± error"))),
    body);
  return {table, body, status};
}

function showTop(t, reply, onPick) {
  fill(t.body);
  for (const [i, k] of reply.keys.entries()) {
    t.body.appendChild(h("tr", {},
      h("td", {class: "num"}, i + 1),
      h("td", {class: "key"}, h("a", {href: "#", class: "top-key", onclick: (e) => {
        e.preventDefault();
        onPick(k.key);
      }}, k.key)),
      h("td", {class: "num"}, num(k.count)),
      h("td", {class: "num"}, num(k.error))));
  }
  t.status.className = "muted";
  t.status.textContent = reply.keys.length === 0 ? "no keys in the last " + reply.window_s + " s" :
    "over the last " + reply.window_s + " s";
}

function inspector(rule) {
  const key = h("input", {id: "peek-key", type: "text", placeholder: "key", size: 40,
    spellcheck: "false"});
  const out = h("div", {id: "peek-result"});
  async function peek(e) {
    if (e) e.preventDefault();
    fill(out, h("p", {class: "muted"}, "asking…"));
    try {
      const d = await api.peek(rule, key.value);
      // The peek has cost 0, which fits even a key with nothing left, so its "allowed" and
      // retry_after_ms (0) say nothing of a real request: a request of cost 1 now is allowed
      // when at least 1 remains. Otherwise the key has room again by the time it is fresh.
      const allowed = d.remaining >= 1;
      const retry = allowed ? "now" : d.retry_after_ms < 0 ? "never" :
        "within " + d.reset_after_ms + " ms (when the key is fresh again)";
      fill(out,
        h("p", {}, "Key ", h("code", {class: "key", id: "peek-key-shown"}, key.value), ": ",
          allowed ? h("b", {class: "ok"}, "a request of cost 1 now would be allowed") :
            h("b", {class: "error"}, "a request of cost 1 now would be refused"),
          d.shadow && !allowed ? h("span", {class: "muted"},
            " (shadow rule: let through anyway, counted as shadow-denied)") : null),
        h("dl", {class: "kv"},
          h("dt", {}, "limit"), h("dd", {}, num(d.limit)),
          h("dt", {}, "remaining"), h("dd", {id: "peek-remaining"}, num(d.remaining)),
          h("dt", {}, "retry"), h("dd", {id: "peek-retry"}, retry),
          h("dt", {}, "back to fresh in"), h("dd", {}, d.reset_after_ms + " ms")));
      out.dataset.remaining = d.remaining;
      out.dataset.verdict = allowed ? "allowed" : "refused";
    } catch (err) {
      fill(out, h("p", {class: "error"}, err.message));
    }
  }
  const form = h("form", {class: "row", id: "peek-form", onsubmit: peek}, key,
    h("button", {type: "submit", class: "primary"}, "Peek"));
  const el = h("section", {class: "card"}, h("h2", {}, "Key inspector"),
    h("p", {class: "muted"}, "What the rule would answer this key now; a peek uses nothing."),
    form, out);
  return {el, pick: (k) => {
    key.value = k;
    peek();
  }};
}

export function mount(root, name) {
  const head = h("header", {});
  const facts = h("dl", {class: "kv", id: "rule-facts"});
  const sums = h("div", {class: "sums"});
  const chartEl = h("div", {class: "chart"});
  const byDecisions = topTable("decisions");
  const byDenied = topTable("denied");
  const insp = inspector(name);
  let chart = null;
  let latest = null;
  const range = rangePicker((seconds) => {
    if (chart && latest) chart.update(chartData(latest, seconds));
    inflight.redraw();
  });
  const inflight = inflightCard(name, () => range.seconds());
  const inflightSlot = h("div", {});
  fill(root,
    h("p", {}, h("a", {href: "#/"}, "← overview")),
    h("div", {class: "titlebar"}, h("h1", {id: "rule-name"}, name), range.el),
    h("section", {class: "card"}, head, facts, sums, chartEl),
    inflightSlot,
    h("div", {class: "cols"},
      h("section", {class: "card", id: "top-decisions"}, h("h2", {}, "Top keys by decisions"),
        byDecisions.status, byDecisions.table),
      h("section", {class: "card", id: "top-denied"}, h("h2", {}, "Top keys by denials"),
        byDenied.status, byDenied.table)),
    insp.el);

  const stop = follow(() => api.stats(), {
    onLoad(rules) {
      const s = rules.get(name);
      latest = s || null;
      if (chart) chart.destroy();
      chart = null;
      if (!s) {
        fill(head, h("p", {class: "error"}, "No rule of this name."));
        return;
      }
      fill(head, ruleTags(s.info));
      showInflight(s.info.algorithm);
      const q = lastSums(s, 900);
      fill(facts,
        h("dt", {}, "algorithm"), h("dd", {}, s.info.algorithm),
        h("dt", {}, "limit"), h("dd", {}, num(s.info.limit) + " per " + duration(s.info.window_ms)),
        h("dt", {}, "shadow"), h("dd", {}, s.info.shadow ? "yes: decides and counts, always allows" : "no"),
        h("dt", {}, "last 15 minutes"), h("dd", {}, num(q.allowed) + " allowed, " + num(q.denied) +
          " denied, " + num(q.shadow_denied) + " shadow-denied"));
      sumsLine(sums, s);
      chart = timeChart(chartEl, ["allowed", "denied", "shadow_denied"], chartData(s, range.seconds()));
    },
    onTick(rules) {
      const s = rules.get(name);
      latest = s || null;
      if (!s || !chart) return;
      sumsLine(sums, s);
      chart.update(chartData(s, range.seconds()));
    },
    onState() {},
    onError(e) {
      fill(head, h("p", {class: "error"}, "Could not load the rates: " + e.message));
    },
  });

  // The in-flight card, for a rule whose algorithm holds units (sluiced's table says which).
  async function showInflight(algorithm) {
    let holds = false;
    try {
      const algs = await api.algorithms();
      const a = algs.find((x) => x.name === algorithm);
      holds = Boolean(a && a.capabilities && a.capabilities.includes("holds"));
    } catch (e) {
      holds = false;
    }
    if (stopped) return;
    if (holds && !inflightSlot.firstChild) {
      fill(inflightSlot, inflight.el);
      inflight.start();
    } else if (!holds && inflightSlot.firstChild) {
      inflight.stop();
      fill(inflightSlot);
    }
  }

  let timer = null;
  let stopped = false;
  async function refreshTop() {
    for (const t of [byDecisions, byDenied]) {
      try {
        showTop(t, await api.top(name, t.table.dataset.by, 10), insp.pick);
      } catch (e) {
        t.status.textContent = e.message;
        t.status.className = "error";
      }
    }
    if (!stopped) timer = setTimeout(refreshTop, TOP_EVERY_MS);
  }
  refreshTop();
  return () => {
    stopped = true;
    clearTimeout(timer);
    inflight.stop();
    stop();
    if (chart) chart.destroy();
  };
}
