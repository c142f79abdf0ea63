// console.js - the console (/ui/) in a real browser: Debian's chromium, headless, driven by
// puppeteer-core. Run by tests/integration/test_console.sh, which starts the servers and passes:
//
//   CHROMIUM        the browser executable
//   SLUICE_HTTP     HTTP port of a sluiced with no admin token (rules api, burst, web, jobs)
//   SLUICE_RESP     its RESP port
//   SLUICE_T_HTTP   HTTP port of a sluiced with the admin token SLUICE_TOKEN
//   SLUICE_SHOTS    directory for the pages' screenshots
//   REPLAY_LOG      a traffic log; REPLAY_SUMMARY: `sluice replay --summary` of it (gcra 5/1s)
//   ATTACK_HTTP     port of a plain web server on 127.0.0.1 (another origin) serving attack.html
//
// The browser resolves evil.example to 127.0.0.1 (--host-resolver-rules), as a DNS rebinding
// attack would make it: a page of that name is same-origin, to the browser, with sluiced.
// Every wait is for an event (a selector, a condition) with a bounded timeout; nothing sleeps.
// Prints "ok NAME" / "FAIL NAME: why" per case, then "N passed, M failed"; exits 1 on a failure.
"use strict";
const {execFileSync} = require("child_process");
const fs = require("fs");
const path = require("path");
const puppeteer = require("puppeteer-core");

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(name + " is not set");
  return v;
};
const BASE = "http://127.0.0.1:" + env("SLUICE_HTTP") + "/ui/";
const TBASE = "http://127.0.0.1:" + env("SLUICE_T_HTTP") + "/ui/";
const RESP = env("SLUICE_RESP");
const TOKEN = env("SLUICE_TOKEN");
const SHOTS = env("SLUICE_SHOTS");
const ATTACK = "http://127.0.0.1:" + env("ATTACK_HTTP") + "/attack.html?port=" +
  env("SLUICE_HTTP") + "&tport=" + env("SLUICE_T_HTTP");
const WAIT = {timeout: 20000}; // ms: one event on a loaded machine
const XSS = "<script>alert(1)</script>";

let passed = 0;
let failed = 0;
function check(name, cond, why) {
  if (cond) {
    passed++;
    console.log("ok " + name);
  } else {
    failed++;
    console.log("FAIL " + name + (why ? ": " + why : ""));
  }
}

// One RESP command through redis-cli (arguments as given, no quoting): its reply lines.
function resp(...args) {
  return execFileSync("redis-cli", ["-p", RESP, ...args], {encoding: "utf8", timeout: 10000})
    .trim().split("\n");
}

// A page that records console errors, uncaught exceptions and dialogs.
async function newPage(browser) {
  const page = await browser.newPage();
  await page.setViewport({width: 1280, height: 860});
  page.errors = [];
  page.dialogs = [];
  page.on("console", (m) => {
    if (m.type() === "error") page.errors.push("console: " + m.text());
  });
  page.on("pageerror", (e) => page.errors.push("exception: " + e.message));
  page.on("dialog", async (d) => {
    page.dialogs.push(d.type() + ": " + d.message());
    await d.dismiss();
  });
  return page;
}

async function shot(page, name) {
  await page.screenshot({path: path.join(SHOTS, name + ".png"), fullPage: false});
}

// Sets an input's value as typing would (clears it first).
async function setField(page, selector, value) {
  await page.$eval(selector, (el) => {
    el.value = "";
  });
  if (value !== "") await page.type(selector, value);
}

async function textOf(page, selector) {
  return page.$eval(selector, (el) => el.textContent);
}

// ---- the cases ---------------------------------------------------------------------------------

// Every page loads, shows what it is for, and logs no error.
async function pagesLoad(browser) {
  const page = await newPage(browser);
  const pages = [
    ["overview", "#/", "#stream-state[data-state=live]"],
    ["rule", "#/rule/api", "#top-decisions p.muted"],
    ["rules", "#/rules", "#rules-table tbody tr"],
    ["replay", "#/replay", "#replay-form"],
  ];
  for (const [name, hash, ready] of pages) {
    await page.goto("about:blank"); // a new document: nothing of the page before is running
    page.errors.length = 0;
    await page.goto(BASE + hash, {waitUntil: "load"});
    try {
      await page.waitForSelector(ready, WAIT);
      check("loads-" + name, true);
    } catch (e) {
      check("loads-" + name, false, ready + " never appeared");
    }
    check("no-console-error-" + name, page.errors.length === 0, page.errors.join(" | "));
  }
  await page.close();
}

// A burst over RESP shows as denials on the overview's live chart of the rule.
async function liveDenials(browser) {
  const page = await newPage(browser);
  await page.goto(BASE + "#/", {waitUntil: "load"});
  await page.waitForSelector("#stream-state[data-state=live]", WAIT);
  await page.waitForSelector('.rule-card[data-rule="burst"] .sums', WAIT);
  const before = await page.$eval('.rule-card[data-rule="burst"] .sums', (el) => Number(el.dataset.denied));
  check("burst-no-denials-before", before === 0, "denied " + before);
  let denied = 0;
  for (let i = 0; i < 12; i++) if (resp("SL.ALLOW", "burst", "b")[0] === "0") denied++;
  check("burst-denied-over-resp", denied === 7, "denied " + denied + " of 12 (limit 5)");
  try {
    await page.waitForFunction(() => {
      const s = document.querySelector('.rule-card[data-rule="burst"] .sums');
      return s && Number(s.dataset.denied) === 7 && Number(s.dataset.allowed) === 5;
    }, WAIT);
    check("chart-shows-denials", true);
  } catch (e) {
    const d = await page.$eval('.rule-card[data-rule="burst"] .sums', (el) => JSON.stringify(el.dataset));
    check("chart-shows-denials", false, "sums " + d);
  }
  // the chart plots the same: the data its plot holds (data-totals) has the 7 denials
  try {
    await page.waitForFunction(() => {
      const c = document.querySelector('.rule-card[data-rule="burst"] .chart');
      const t = c && c.dataset.totals ? JSON.parse(c.dataset.totals) : null;
      return t && t.denied === 7 && t.allowed === 5;
    }, WAIT);
    check("chart-plots-denials", true);
  } catch (e) {
    check("chart-plots-denials", false, "totals " +
      await page.$eval('.rule-card[data-rule="burst"] .chart', (el) => el.dataset.totals));
  }
  // waves on "web" (30 an hour), each once the chart has the one before: a chart over seconds
  let sent = 0;
  let wavesSeen = true;
  for (const n of [6, 9, 12, 8, 10]) {
    for (let i = 0; i < n; i++) resp("SL.ALLOW", "web", "w");
    sent += n;
    try {
      await page.waitForFunction((want) => {
        const s = document.querySelector('.rule-card[data-rule="web"] .sums');
        return s && Number(s.dataset.allowed) + Number(s.dataset.denied) === want;
      }, WAIT, sent);
    } catch (e) {
      wavesSeen = false;
    }
  }
  const web = await page.$eval('.rule-card[data-rule="web"] .sums', (el) => [Number(el.dataset.allowed), Number(el.dataset.denied)]);
  check("waves-counted", wavesSeen && JSON.stringify(web) === "[30,15]", JSON.stringify(web));
  await page.click('#range button[data-seconds="60"]'); // the last minute, as the screenshot shows
  await page.waitForSelector('#range button[data-seconds="60"].active', WAIT);
  check("overview-no-console-error", page.errors.length === 0, page.errors.join(" | "));
  await shot(page, "overview");
  await page.close();
}

// The hammered key heads the rule's top keys; a key "<script>..." is shown as text; the
// inspector peeks a key without using it.
async function topKeysAndEscaping(browser) {
  for (let i = 0; i < 40; i++) resp("SL.ALLOW", "api", "hot");
  for (let i = 0; i < 9; i++) resp("SL.ALLOW", "api", XSS);
  for (let i = 0; i < 4; i++) resp("SL.ALLOW", "api", "warm");
  resp("SL.ALLOW", "api", "cold");
  const page = await newPage(browser);
  await page.goto(BASE + "#/rule/api", {waitUntil: "load"});
  try {
    await page.waitForFunction((xss) => {
      const keys = [...document.querySelectorAll('table[data-by="decisions"] .top-key')];
      return keys.length >= 4 && keys[0].textContent === "hot" &&
        keys.some((k) => k.textContent === xss);
    }, WAIT, XSS);
    check("top-hammered-first", true);
  } catch (e) {
    const keys = await page.$$eval('table[data-by="decisions"] .top-key', (k) => k.map((x) => x.textContent));
    check("top-hammered-first", false, "keys " + JSON.stringify(keys));
  }
  const counts = await page.$$eval('table[data-by="decisions"] tbody tr', (rows) =>
    rows.map((r) => [r.children[1].textContent, r.children[2].textContent]));
  check("top-counts", JSON.stringify(counts.slice(0, 2)) === JSON.stringify([["hot", "40"], [XSS, "9"]]),
    JSON.stringify(counts));
  // the key is its characters on the page: no element was made from it, nothing ran
  const scripts = await page.$$eval("main script", (s) => s.length);
  check("xss-no-script-element", scripts === 0, scripts + " script elements in main");
  const visible = await page.$eval("main", (m) => m.innerText);
  check("xss-text-visible", visible.includes(XSS));
  // the inspector: clicking the key peeks it
  await page.$$eval('table[data-by="decisions"] .top-key', (keys, xss) => {
    keys.find((k) => k.textContent === xss).click();
  }, XSS);
  try {
    await page.waitForFunction((xss) => {
      const k = document.getElementById("peek-key-shown");
      return k && k.textContent === xss;
    }, WAIT, XSS);
    check("inspector-shows-key", true);
  } catch (e) {
    check("inspector-shows-key", false, await page.$eval("#peek-result", (el) => el.textContent));
  }
  const remaining = await page.$eval("#peek-result", (el) => el.dataset.remaining);
  check("inspector-remaining", remaining === "991", "remaining " + remaining + ", want 1000 - 9");
  await page.$eval("#peek-form button", (b) => b.click()); // peeking again uses nothing
  await page.waitForFunction(() => document.getElementById("peek-remaining") !== null, WAIT);
  check("peek-uses-nothing", resp("SL.PEEK", "api", XSS)[2] === "991");
  check("xss-no-dialog", page.dialogs.length === 0, page.dialogs.join(" | "));
  check("rule-page-no-console-error", page.errors.length === 0, page.errors.join(" | "));
  await shot(page, "rule");
  await page.close();
}

// The burst key "b" was used up by liveDenials: peeking it says a request now is refused, and
// when the key is fresh again, not "allowed, retry after 0 ms" (a peek of cost 0 fits anyway).
async function inspectorExhausted(browser) {
  const page = await newPage(browser);
  await page.goto(BASE + "#/rule/burst", {waitUntil: "load"});
  await page.waitForSelector("#peek-form", WAIT);
  await setField(page, "#peek-key", "b");
  await page.$eval("#peek-form button", (b) => b.click());
  await page.waitForFunction(() => document.getElementById("peek-remaining") !== null, WAIT);
  const text = await textOf(page, "#peek-result");
  const verdict = await page.$eval("#peek-result", (el) => el.dataset.verdict);
  check("inspector-exhausted-refused", verdict === "refused" &&
    text.includes("would be refused") && !text.includes("would be allowed"), text);
  check("inspector-exhausted-remaining", (await textOf(page, "#peek-remaining")) === "0");
  const retry = await page.$eval("#peek-result", (el) => {
    const r = el.querySelector("#peek-retry");
    return r ? r.textContent : "(no retry shown)";
  });
  check("inspector-exhausted-retry", /^within [0-9]+ ms/.test(retry) && !retry.startsWith("within 0 "),
    retry);
  // a key never used is allowed, with nothing to wait for
  await setField(page, "#peek-key", "fresh");
  await page.$eval("#peek-form button", (b) => b.click());
  await page.waitForFunction(() => document.getElementById("peek-key-shown") &&
    document.getElementById("peek-key-shown").textContent === "fresh", WAIT);
  check("inspector-fresh-allowed", (await page.$eval("#peek-result", (el) => el.dataset.verdict)) ===
    "allowed" && (await textOf(page, "#peek-remaining")) === "5", await textOf(page, "#peek-result"));
  check("inspector-exhausted-no-console-error", page.errors.length === 0, page.errors.join(" | "));
  await page.close();
}

// An in-flight rule's page: after the test holds a known number of units over RESP (3 on
// "alice", 2 on "bob", 1 on "carol"), the card says 6 are held, its chart's last point is 6, and
// the keys holding most are alice, bob, carol with 3, 2, 1; a release of alice's hold shows as 3
// held and alice gone. A rule that holds nothing has no such card.
async function inflight(browser) {
  const held = [["alice", 3], ["bob", 2], ["carol", 1]];
  const ids = {};
  for (const [key, cost] of held) {
    const r = resp("SL.ACQUIRE", "jobs", key, "COST", String(cost));
    ids[key] = r[5];
    check("inflight-acquire-" + key, r[0] === "1" && Number(r[5]) > 0, JSON.stringify(r));
  }
  const page = await newPage(browser);
  await page.goto(BASE + "#/rule/jobs", {waitUntil: "load"});
  const shows = async (name, units, keys) => {
    try {
      await page.waitForFunction((units, keys) => {
        const now = document.getElementById("inflight-now");
        const chart = document.getElementById("inflight-chart");
        const last = chart && chart.dataset.last ? JSON.parse(chart.dataset.last) : null;
        const rows = [...document.querySelectorAll("#holders tbody tr")].map((r) =>
          [r.children[1].textContent, Number(r.dataset.units)]);
        return now && Number(now.dataset.units) === units && last && last.in_flight === units &&
          JSON.stringify(rows) === JSON.stringify(keys);
      }, WAIT, units, keys);
      check(name, true);
    } catch (e) {
      const seen = await page.evaluate(() => ({
        now: document.getElementById("inflight-now") &&
          document.getElementById("inflight-now").textContent,
        last: document.getElementById("inflight-chart") &&
          document.getElementById("inflight-chart").dataset.last,
        rows: [...document.querySelectorAll("#holders tbody tr")].map((r) => r.textContent),
      }));
      check(name, false, JSON.stringify(seen));
    }
  };
  await shows("inflight-shows-held", 6, [["alice", 3], ["bob", 2], ["carol", 1]]);
  const text = await textOf(page, "#inflight-now");
  check("inflight-text", text === "now: 6 units held (at most 5 per key)", text);
  try { // a few points drawn, for the screenshot: the plot's sum is 6 a point
    await page.waitForFunction(() => {
      const t = document.getElementById("inflight-chart").dataset.totals;
      return t && JSON.parse(t).in_flight >= 18;
    }, WAIT);
  } catch (e) {
    check("inflight-points", false, "the chart drew fewer than 3 points");
  }
  await (await page.$("#inflight")).screenshot({path: path.join(SHOTS, "inflight.png")});
  check("inflight-release", resp("SL.RELEASE", "jobs", "alice", ids.alice)[0] === "OK");
  await shows("inflight-shows-release", 3, [["bob", 2], ["carol", 1]]);
  for (const key of ["bob", "carol"]) resp("SL.RELEASE", "jobs", key, ids[key]);
  await shows("inflight-shows-none", 0, []);
  check("inflight-no-console-error", page.errors.length === 0, page.errors.join(" | "));
  await page.goto("about:blank");
  await page.goto(BASE + "#/rule/burst", {waitUntil: "load"});
  await page.waitForSelector("#rule-facts dd", WAIT);
  await page.waitForSelector("#top-decisions p.muted", WAIT);
  check("inflight-not-for-other-rules", (await page.$("#inflight")) === null);
  await page.close();
}

// A hash that is not valid percent-encoding (#/rule/%E0) leads to the overview, with no error:
// loaded as it is, and reached from another page.
async function badHash(browser) {
  const page = await newPage(browser);
  await page.goto(BASE + "#/rule/%E0", {waitUntil: "load"});
  try {
    await page.waitForSelector("#rules-grid .rule-card", WAIT);
    check("bad-hash-overview", true);
  } catch (e) {
    check("bad-hash-overview", false, await textOf(page, "main"));
  }
  await page.evaluate(() => {
    location.hash = "#/rules";
  });
  await page.waitForSelector("#rules-table", WAIT);
  await page.evaluate(() => {
    location.hash = "#/rule/%E0%A4";
  });
  try {
    await page.waitForSelector("#rules-grid .rule-card", WAIT);
    check("bad-hash-change-overview", true);
  } catch (e) {
    check("bad-hash-change-overview", false, await textOf(page, "main"));
  }
  check("bad-hash-no-console-error", page.errors.length === 0, page.errors.join(" | "));
  await page.close();
}

// Saves the editor's form; resolves once the reply is shown (done or an error).
async function saveForm(page) {
  await page.$eval("#form-done", (el) => {
    el.textContent = "";
  });
  await page.click("#save-rule");
  await page.waitForFunction(() =>
    document.getElementById("form-done").textContent !== "" ||
    document.getElementById("form-error").textContent !== "" ||
    [...document.querySelectorAll(".field-error")].some((e) => e.textContent !== ""), WAIT);
}

// A rule created and changed in the editor is in force over RESP; a refused value is shown at
// its field; shadow on and off; delete.
async function editor(browser) {
  const page = await newPage(browser);
  await page.goto(BASE + "#/rules", {waitUntil: "load"});
  await page.waitForSelector('#rules-table tr[data-rule="api"]', WAIT);
  await setField(page, "#f-name", "edited");
  await page.select("#f-algorithm", "sliding_log");
  await setField(page, "#f-limit", "2");
  await setField(page, "#f-window", "1h");
  await saveForm(page);
  check("create-saved", (await textOf(page, "#form-done")).includes("Saved"),
    await textOf(page, "#form-error"));
  const r = [1, 2, 3].map(() => resp("SL.ALLOW", "edited", "k")[0]);
  check("create-in-force-resp", JSON.stringify(r) === '["1","1","0"]', JSON.stringify(r));
  await page.waitForSelector('#rules-table tr[data-rule="edited"]', WAIT);

  // change it: limit 3 gives k one more
  await page.click('#rules-table tr[data-rule="edited"] button.edit');
  await page.waitForFunction(() => document.getElementById("f-name").value === "edited", WAIT);
  await setField(page, "#f-limit", "3");
  await saveForm(page);
  check("change-saved", (await textOf(page, "#form-done")).includes("Saved"));
  const after = [1, 2].map(() => resp("SL.ALLOW", "edited", "k")[0]);
  check("change-in-force-resp", JSON.stringify(after) === '["1","0"]', JSON.stringify(after));

  // a refused value: the server's message at the field, the rule in force unchanged
  page.errors.length = 0;
  await setField(page, "#f-limit", "0");
  await saveForm(page);
  const limitErr = await textOf(page, "#err-limit");
  check("validation-at-field", limitErr === "must be an integer > 0", limitErr);
  check("validation-field-marked", await page.$eval("#f-limit", (el) => el.classList.contains("invalid")));
  check("validation-not-elsewhere", (await textOf(page, "#form-error")) === "" &&
    (await textOf(page, "#err-window")) === "");
  await shot(page, "rules");
  await setField(page, "#f-window", "soon");
  await setField(page, "#f-limit", "3");
  await saveForm(page);
  const windowErr = await textOf(page, "#err-window");
  check("validation-window-field", windowErr.includes("'soon'") && (await textOf(page, "#err-limit")) === "",
    windowErr);
  check("refused-left-rule", resp("SL.RULE", "GET", "edited").join("").includes('"limit":3'));

  // shadow on: denied keys are allowed; off again
  await page.waitForSelector('#rules-table tr[data-rule="edited"] button.shadow-toggle', WAIT);
  await page.click('#rules-table tr[data-rule="edited"] button.shadow-toggle');
  await page.waitForFunction(() => {
    const tr = document.querySelector('#rules-table tr[data-rule="edited"]');
    return tr && tr.children[4].textContent === "on";
  }, WAIT);
  check("shadow-on-resp", resp("SL.ALLOW", "edited", "k")[0] === "1");
  await page.click('#rules-table tr[data-rule="edited"] button.shadow-toggle');
  await page.waitForFunction(() => {
    const tr = document.querySelector('#rules-table tr[data-rule="edited"]');
    return tr && tr.children[4].textContent === "off";
  }, WAIT);
  check("shadow-off-resp", resp("SL.ALLOW", "edited", "k")[0] === "0");

  // a new rule of a name in use asks before it replaces that rule
  await page.click("#new-rule");
  await page.waitForFunction(() => document.getElementById("f-name").value === "" &&
    !document.getElementById("f-name").readOnly, WAIT);
  await setField(page, "#f-name", "edited");
  await page.select("#f-algorithm", "sliding_log");
  await setField(page, "#f-limit", "9");
  await setField(page, "#f-window", "1h");
  await page.click("#save-rule");
  try {
    await page.waitForFunction(() => document.getElementById("form-confirm").textContent !== "", WAIT);
    check("replace-asks", (await textOf(page, "#form-confirm")).includes("edited"));
  } catch (e) {
    check("replace-asks", false, "no warning; form-done: " + (await textOf(page, "#form-done")));
  }
  check("replace-asks-unchanged", resp("SL.RULE", "GET", "edited").join("").includes('"limit":3'));
  await saveForm(page);
  check("replace-saved", (await textOf(page, "#form-done")).includes("Saved"), await textOf(page, "#form-error"));
  check("replace-in-force", resp("SL.RULE", "GET", "edited").join("").includes('"limit":9'));

  // delete asks twice
  await page.click('#rules-table tr[data-rule="edited"] button.danger');
  check("delete-asks", resp("SL.RULE", "GET", "edited").join("").includes('"limit":9'));
  await page.click('#rules-table tr[data-rule="edited"] button.danger');
  await page.waitForFunction(() => !document.querySelector('#rules-table tr[data-rule="edited"]'), WAIT);
  check("delete-resp", resp("SL.RULE", "GET", "edited").join(" ").includes("unknown rule"));
  check("editor-no-dialog", page.dialogs.length === 0);
  await page.close();
}

// Rules with priorities and with an adaptive limit: one made over RESP shows its fields in the
// editor, and one made in the editor is in force over RESP with them.
async function prioritiesAdaptive(browser) {
  resp("SL.RULE", "SET", "tiers", JSON.stringify({algorithm: "fixed_window", limit: 10, window: "1h",
    priorities: ["low", "high", "critical"], reserve: {critical: "20%", high: 3}}));
  resp("SL.RULE", "SET", "backend", JSON.stringify({algorithm: "concurrency", limit: 2,
    hold_timeout: "1h", adaptive: "aimd", min_limit: 1, max_limit: 8, backoff: 50,
    latency_timeout: "100ms"}));
  const page = await newPage(browser);
  await page.goto(BASE + "#/rules", {waitUntil: "load"});
  await page.waitForSelector('#rules-table tr[data-rule="tiers"] button.edit', WAIT);
  const value = (sel) => page.$eval(sel, (el) => el.value);
  const disabled = (sel) => page.$eval(sel, (el) => el.disabled);
  await page.click('#rules-table tr[data-rule="tiers"] button.edit');
  await page.waitForFunction(() => document.getElementById("f-name").value === "tiers", WAIT);
  check("priorities-shown", (await value("#f-priorities")) === "low, high, critical",
    await value("#f-priorities"));
  check("reserve-shown", (await value("#f-reserve")) === "critical: 20%, high: 3", await value("#f-reserve"));
  check("fixed-window-no-adaptive", (await disabled("#f-adaptive")) && (await disabled("#f-min_limit")));
  await page.click('#rules-table tr[data-rule="backend"] button.edit');
  await page.waitForFunction(() => document.getElementById("f-name").value === "backend", WAIT);
  const shown = {};
  for (const f of ["adaptive", "min_limit", "max_limit", "backoff", "latency_timeout"]) {
    shown[f] = await value("#f-" + f);
  }
  check("adaptive-shown", JSON.stringify(shown) === JSON.stringify({adaptive: "aimd", min_limit: "1",
    max_limit: "8", backoff: "50", latency_timeout: "100ms"}), JSON.stringify(shown));
  check("adaptive-aimd-fields", !(await disabled("#f-backoff")) && (await disabled("#f-probe")));
  await shot(page, "rules-adaptive");

  // made in the editor: an adaptive vegas rule, then a rule with priorities
  await page.click("#new-rule");
  await page.waitForFunction(() => document.getElementById("f-name").value === "", WAIT);
  await setField(page, "#f-name", "ed-adapt");
  await page.select("#f-algorithm", "concurrency");
  await setField(page, "#f-limit", "3");
  await setField(page, "#f-window", "1m");
  await page.select("#f-adaptive", "vegas");
  check("adaptive-vegas-fields", (await disabled("#f-backoff")) && !(await disabled("#f-probe")));
  await setField(page, "#f-min_limit", "2");
  await setField(page, "#f-max_limit", "16");
  await setField(page, "#f-probe", "40");
  await saveForm(page);
  check("adaptive-saved", (await textOf(page, "#form-done")).includes("Saved"), await textOf(page, "#form-error"));
  const got = resp("SL.RULE", "GET", "ed-adapt").join("");
  check("adaptive-in-force", got.includes('"adaptive":"vegas"') && got.includes('"min_limit":2') &&
    got.includes('"max_limit":16') && got.includes('"probe":40'), got);
  await page.click("#new-rule");
  await page.waitForFunction(() => document.getElementById("f-name").value === "", WAIT);
  await setField(page, "#f-name", "ed-prio");
  await page.select("#f-algorithm", "sliding_log");
  await setField(page, "#f-limit", "4");
  await setField(page, "#f-window", "1h");
  await setField(page, "#f-priorities", "low, high");
  await setField(page, "#f-reserve", "high: 2");
  await saveForm(page);
  check("priorities-saved", (await textOf(page, "#form-done")).includes("Saved"), await textOf(page, "#form-error"));
  const low = [1, 2, 3].map(() => resp("SL.ALLOW", "ed-prio", "k", "PRIORITY", "low")[0]);
  const high = [1, 2, 3].map(() => resp("SL.ALLOW", "ed-prio", "k", "PRIORITY", "high")[0]);
  check("priorities-in-force", JSON.stringify(low) === '["1","1","0"]' &&
    JSON.stringify(high) === '["1","1","0"]', JSON.stringify([low, high]));
  // a new rule's name is first looked up (GET /v1/rules/NAME), and the browser logs its 404
  const errors = page.errors.filter((e) => !e.includes("status of 404"));
  check("priorities-adaptive-no-console-error", errors.length === 0, errors.join(" | "));
  for (const name of ["tiers", "backend", "ed-adapt", "ed-prio"]) resp("SL.RULE", "DEL", name);
  await page.close();
}

// A counter of a server's /metrics (its HTTP port), as a number (0 when absent).
async function metricOf(port, series) {
  const res = await fetch("http://127.0.0.1:" + port + "/metrics");
  const line = (await res.text()).split("\n").find((l) => l.startsWith(series + " "));
  return line ? Number(line.split(" ")[1]) : 0;
}

// Waits (bounded) until a counter reaches want; returns what it is then.
async function metricReaches(port, series, want) {
  const until = Date.now() + WAIT.timeout;
  let got = await metricOf(port, series);
  while (got < want && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
    got = await metricOf(port, series);
  }
  return got;
}

// A page of another site (attack.html, from another port) tries a form POST, "simple"
// fetches, a Blob with no type, a beacon, a JSON PUT and a DELETE (preflighted) and a settle on
// the server with a token: every one that the browser sends is refused (counted in /metrics by
// sluiced, so it did arrive), the preflighted ones are never sent, and nothing changed.
async function crossSite(browser) {
  const rule = resp("SL.RULE", "GET", "api").join("");
  const victim = resp("SL.PEEK", "api", "victim").join(" ");
  const ORIGIN = 'sluice_http_refused_total{reason="origin"}';
  const before = await metricOf(env("SLUICE_HTTP"), ORIGIN);
  const tokBefore = await metricOf(env("SLUICE_T_HTTP"), ORIGIN);
  const page = await newPage(browser);
  await page.goto(ATTACK, {waitUntil: "load"});
  await page.waitForSelector("body[data-done]", WAIT);
  const got = JSON.parse(await page.$eval("body", (b) => b.dataset.done));
  check("cross-site-form-sent", got.form === "submitted", JSON.stringify(got));
  check("cross-site-simple-fetches-opaque", got.fetch_text === "opaque" &&
    got.fetch_allow_text === "opaque" && got.fetch_blob === "opaque", JSON.stringify(got));
  check("cross-site-preflighted-never-sent", got.fetch_put_json === "threw" &&
    got.fetch_delete === "threw", JSON.stringify(got));
  check("cross-site-beacon-queued", got.beacon === true, JSON.stringify(got));
  // the form, three fetches and the beacon reached sluiced and were refused: five, no more
  const refused = await metricReaches(env("SLUICE_HTTP"), ORIGIN, before + 5);
  check("cross-site-refused-five", refused === before + 5, (refused - before) + " refused");
  check("cross-site-settle-refused",
    (await metricReaches(env("SLUICE_T_HTTP"), ORIGIN, tokBefore + 1)) === tokBefore + 1);
  check("cross-site-rule-unchanged", resp("SL.RULE", "GET", "api").join("") === rule);
  check("cross-site-key-not-charged", resp("SL.PEEK", "api", "victim").join(" ") === victim,
    resp("SL.PEEK", "api", "victim").join(" ") + " vs " + victim);
  await page.close();
}

// DNS rebinding: evil.example resolves to 127.0.0.1, so its pages are same-origin with sluiced
// to the browser. sluiced refuses the name: the console does not load under it, and a script
// of that origin can neither read the rules nor change one (same-origin: no preflight stops it).
async function rebinding(browser) {
  const rule = resp("SL.RULE", "GET", "api").join("");
  const page = await newPage(browser);
  const res = await page.goto("http://evil.example:" + env("SLUICE_HTTP") + "/ui/",
    {waitUntil: "load"});
  check("rebinding-console-421", res.status() === 421, String(res.status()));
  const got = await page.evaluate(async () => {
    const read = await fetch("/v1/rules");
    const put = await fetch("/v1/rules/api", {method: "PUT",
      headers: {"Content-Type": "application/json", "X-Sluice-Client": "console"},
      body: '{"algorithm":"sliding_log","limit":1,"window":"1h"}'});
    return [read.status, put.status, await put.text()];
  });
  check("rebinding-read-421", got[0] === 421, JSON.stringify(got));
  check("rebinding-put-421", got[1] === 421 && got[2].includes("--http-host"), JSON.stringify(got));
  check("rebinding-rule-unchanged", resp("SL.RULE", "GET", "api").join("") === rule);
  await page.close();
}

// GET /v1/rules/NAME on the server with the admin token, with the token: the HTTP status.
async function tokRuleStatus(name) {
  const res = await fetch("http://127.0.0.1:" + env("SLUICE_T_HTTP") + "/v1/rules/" +
    encodeURIComponent(name), {headers: {Authorization: "Bearer " + TOKEN}});
  await res.text();
  return res.status;
}

// Enters value in the admin token field and presses Use; resolves once the page has it.
async function useToken(page, value) {
  await setField(page, "#token", value);
  await page.click("#token-save");
  await page.waitForFunction((v) => sessionStorage.getItem("sluice.adminToken") === v &&
    document.getElementById("token").value === "", WAIT, value);
}

// The editor's name, limit and window as typed.
async function formValues(page) {
  return page.evaluate(() => ["f-name", "f-limit", "f-window"].map((id) =>
    document.getElementById(id).value));
}

// With an admin token on the server: without it the editor lists the rules (a read) but a
// change is refused and says so; with the token (entered at the top, kept for the tab) it is
// made; a wrong one is refused.
async function tokenNeeded(browser) {
  const page = await newPage(browser);
  await page.goto(TBASE + "#/rules", {waitUntil: "load"});
  await page.waitForSelector('#rules-table tr[data-rule="api"]', WAIT);
  check("token-list-open", (await textOf(page, "#rules-error")) === "");
  await setField(page, "#f-name", "tok");
  await setField(page, "#f-limit", "4");
  await setField(page, "#f-window", "1m");
  await saveForm(page);
  const saveErr = await textOf(page, "#form-error");
  check("token-write-refused", saveErr.includes("needs the admin token"), saveErr);

  // the server has no such rule (asked with the token: a read needs none, but a 404 with it
  // is not a refusal)
  check("token-write-not-done", (await tokRuleStatus("tok")) === 404);

  // entering a token keeps what was typed: the form is not built again
  await useToken(page, "wrong");
  check("token-form-kept", JSON.stringify(await formValues(page)) === '["tok","4","1m"]',
    JSON.stringify(await formValues(page)));
  await saveForm(page);
  const wrongErr = await textOf(page, "#form-error");
  check("token-wrong-refused", wrongErr.includes("admin token was refused"), wrongErr);
  check("token-wrong-not-done", (await tokRuleStatus("tok")) === 404);

  await useToken(page, TOKEN);
  check("token-kept-in-session", (await page.evaluate(() => sessionStorage.getItem("sluice.adminToken"))) === TOKEN);
  await saveForm(page);
  check("token-write-ok", (await textOf(page, "#form-done")).includes("Saved"), await textOf(page, "#form-error"));
  await page.waitForSelector('#rules-table tr[data-rule="tok"]', WAIT);
  await page.close();
}

// The replay page gives the counts `sluice replay --summary` gives for the same log.
// What `sluice replay --summary` printed for REPLAY_LOG: {total: [admitted, rejected], keys}.
function replaySummary() {
  const want = {keys: []};
  for (const line of fs.readFileSync(env("REPLAY_SUMMARY"), "utf8").split("\n")) {
    const m = line.match(/^# (\S+) admitted=(\d+) rejected=(\d+)$/);
    if (!m) continue;
    if (m[1] === "total") want.total = [Number(m[2]), Number(m[3])];
    else want.keys.push([m[1], Number(m[2]), Number(m[3])]);
  }
  // the last "total" line is the total (a key may be named total too)
  return want;
}

// Fills the replay form with log and the rule, and presses Replay.
async function replayForm(page, log, algorithm, limit, window) {
  await page.$eval("#replay-log", (el, text) => {
    el.value = text;
  }, log);
  await page.select("#replay-algorithm", algorithm);
  await setField(page, "#replay-limit", limit);
  await setField(page, "#replay-window", window);
  await page.select("#replay-unit", "ms");
  await page.click("#replay-run");
}

async function replay(browser) {
  const log = fs.readFileSync(env("REPLAY_LOG"), "utf8");
  const want = replaySummary();
  const page = await newPage(browser);
  await page.goto(BASE + "#/replay", {waitUntil: "load"});
  await page.waitForSelector("#replay-form", WAIT);
  await replayForm(page, log, "gcra", "5", "1s");
  try {
    await page.waitForSelector("#replay-totals", WAIT);
  } catch (e) {
    check("replay-answered", false, await textOf(page, "#replay-error"));
    await page.close();
    return;
  }
  const got = await page.$eval("#replay-totals", (el) => [Number(el.dataset.admitted), Number(el.dataset.rejected)]);
  check("replay-total", JSON.stringify(got) === JSON.stringify(want.total),
    JSON.stringify(got) + " vs sluice replay " + JSON.stringify(want.total));
  const rows = await page.$$eval("#replay-keys tbody tr", (trs) =>
    trs.map((tr) => [tr.children[0].textContent, Number(tr.children[1].textContent.replace(/,/g, "")),
      Number(tr.children[2].textContent.replace(/,/g, ""))]));
  const sort = (a) => a.slice().sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  check("replay-per-key", JSON.stringify(sort(rows)) === JSON.stringify(sort(want.keys)),
    JSON.stringify(rows) + " vs " + JSON.stringify(want.keys));
  check("replay-some-rejected", want.total[1] > 0 && want.total[0] > 0);
  // the chart's data (data-totals) holds what was admitted and rejected over time
  const plotted = await page.$eval("#replay-result .chart", (el) => el.dataset.totals || "{}");
  check("replay-chart", JSON.stringify(JSON.parse(plotted)) ===
    JSON.stringify({admitted: want.total[0], rejected: want.total[1]}), plotted);
  check("replay-no-console-error", page.errors.length === 0, page.errors.join(" | "));
  await shot(page, "replay");
  await page.close();
}

// With an admin token on the server a replay needs it: without it the page says so; with it
// (entered at the top, the form kept as typed) the counts are `sluice replay --summary`'s. A
// replay that outgrows sluiced's memory budget for one says it stopped, and after how many
// lines: 20,000 keys, each new, under the token server's --replay-memory of 64 KiB.
async function replayToken(browser) {
  const want = replaySummary();
  const page = await newPage(browser);
  await page.goto(TBASE + "#/replay", {waitUntil: "load"});
  await page.waitForSelector("#replay-form", WAIT);
  await replayForm(page, fs.readFileSync(env("REPLAY_LOG"), "utf8"), "gcra", "5", "1s");
  await page.waitForFunction(() => document.getElementById("replay-error").textContent !== "", WAIT);
  const err = await textOf(page, "#replay-error");
  check("replay-token-refused", err.includes("needs the admin token"), err);
  check("replay-token-no-result", (await page.$("#replay-totals")) === null);

  await useToken(page, TOKEN);
  check("replay-token-error-cleared", (await textOf(page, "#replay-error")) === "");
  await page.click("#replay-run");
  try {
    await page.waitForSelector("#replay-totals", WAIT);
  } catch (e) {
    check("replay-token-answered", false, await textOf(page, "#replay-error"));
    await page.close();
    return;
  }
  const got = await page.$eval("#replay-totals", (el) => [Number(el.dataset.admitted), Number(el.dataset.rejected)]);
  check("replay-token-total", JSON.stringify(got) === JSON.stringify(want.total),
    JSON.stringify(got) + " vs sluice replay " + JSON.stringify(want.total));
  check("replay-token-complete", (await page.$("#replay-stopped")) === null);

  let big = "";
  for (let i = 0; i < 20000; i++) big += i + " k" + i + "\n";
  await replayForm(page, big, "gcra", "5", "1h");
  try {
    await page.waitForSelector("#replay-stopped", WAIT);
  } catch (e) {
    check("replay-stopped-shown", false, await textOf(page, "#replay-error"));
    await page.close();
    return;
  }
  const stopped = await page.$eval("#replay-stopped", (el) => [el.dataset.stopped, el.dataset.lines, el.textContent]);
  const lines = Number(stopped[1]);
  check("replay-stopped-memory", stopped[0] === "memory" && lines > 0 && lines < 20000,
    JSON.stringify(stopped));
  check("replay-stopped-says-lines", stopped[2].includes("first " + lines + " lines"), stopped[2]);
  const totals = await page.$eval("#replay-totals", (el) => Number(el.dataset.admitted));
  check("replay-stopped-counts", totals === lines, String(totals)); /* every key new: admitted */
  // the browser logs the refused request itself (the 401 before the token); nothing else
  const errors = page.errors.filter((m) => !m.includes("status of 401"));
  check("replay-token-no-console-error", errors.length === 0, errors.join(" | "));
  await shot(page, "replay-stopped");
  await page.close();
}

// The forms offer what sluiced's table of algorithms says (GET /v1/algorithms), in its order,
// with the table's suggestion first, and enable a number only for the algorithms that take it.
async function formsFromTable(browser) {
  const page = await newPage(browser);
  await page.goto(BASE + "#/rules", {waitUntil: "load"});
  await page.waitForSelector('#rules-table tr[data-rule="api"]', WAIT);
  const algs = await page.evaluate(async () => (await (await fetch("/v1/algorithms")).json()).algorithms);
  const names = algs.map((a) => a.name);
  check("table-has-algorithms", names.length >= 6 && names.includes("sliding_buckets"),
    JSON.stringify(names));
  const options = await page.$$eval("#f-algorithm option", (os) => os.map((o) => o.value));
  check("editor-options-are-the-table", JSON.stringify(options) === JSON.stringify(names),
    JSON.stringify(options));
  const pick = (algs.find((a) => a.suggested) || algs[0]).name;
  check("editor-new-rule-suggested", (await page.$eval("#f-algorithm", (el) => el.value)) === pick);
  const disabled = async (sel) => page.$eval(sel, (el) => el.disabled);
  let agree = true;
  for (const a of algs) {
    await page.select("#f-algorithm", a.name);
    for (const param of ["burst", "buckets", "max_delay"]) {
      if ((await disabled("#f-" + param)) !== (a[param] === null)) {
        agree = false;
        check("editor-" + param + "-for-" + a.name, false, "enabled " + !(await disabled("#f-" + param)));
      }
    }
  }
  check("editor-numbers-as-the-table", agree);
  await page.goto("about:blank");
  await page.goto(BASE + "#/replay", {waitUntil: "load"});
  await page.waitForSelector("#replay-form", WAIT);
  const replayOptions = await page.$$eval("#replay-algorithm option", (os) => os.map((o) => o.value));
  check("replay-options-are-the-table", JSON.stringify(replayOptions) === JSON.stringify(names),
    JSON.stringify(replayOptions));
  check("replay-suggested", (await page.$eval("#replay-algorithm", (el) => el.value)) === pick);
  agree = true;
  for (const a of algs) {
    await page.select("#replay-algorithm", a.name);
    agree = agree && (await disabled("#replay-burst")) === (a.burst === null);
  }
  check("replay-burst-as-the-table", agree);
  check("forms-no-console-error", page.errors.length === 0, page.errors.join(" | "));
  await page.close();
}

async function main() {
  fs.mkdirSync(SHOTS, {recursive: true});
  const browser = await puppeteer.launch({
    executablePath: env("CHROMIUM"),
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
      "--disable-extensions", "--font-render-hinting=none",
      "--host-resolver-rules=MAP evil.example 127.0.0.1"],
    protocolTimeout: 60000,
  });
  try {
    for (const step of [pagesLoad, liveDenials, inspectorExhausted, topKeysAndEscaping, inflight, badHash,
      editor, formsFromTable, prioritiesAdaptive, tokenNeeded, replay, replayToken, crossSite, rebinding]) {
      try {
        await step(browser);
      } catch (e) {
        check(step.name, false, e.stack || String(e));
      }
    }
  } finally {
    await browser.close();
  }
  console.log(passed + " passed, " + failed + " failed");
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
