// editor.js - #/rules : the rules in force, and a form to create, change and delete them and to
// turn shadow mode on and off (GET|PUT|DELETE /v1/rules/{name}; the admin token when the
// server has one). The server validates: its problem reply names the field it refuses
// ("field"), and the message is shown under that field.
import {api, ApiError, taking, suggested} from "./api.js";
import {h, fill, num} from "./dom.js";

// The optional numbers only some algorithms take (which ones: the table of algorithms).
const PARAMS = ["burst", "buckets", "max_delay"];
// The bounds of an adaptive limit; its options (backoff, ...) are the adaptive table's.
const ADAPTIVE_BOUNDS = ["min_limit", "max_limit"];

// The form's fields; the algorithms, and which of them take which number, come from sluiced's
// table of algorithms (GET /v1/algorithms), so that the form names none itself.
function fields(algs, adaptives) {
  const by = (param) => taking(algs, param).join(" / ");
  const reads = (opt) => adaptives.filter((x) => x.options.includes(opt)).map((x) => x.name).join(" / ");
  return [
    {name: "name", label: "Name", hint: "letters, digits, _ . : - (up to 64)"},
    {name: "algorithm", label: "Algorithm", options: algs.map((a) => a.name)},
    {name: "limit", label: "Limit", hint: "requests (units) per window", number: true},
    {name: "window", label: "Window", hint: "250ms, 1s, 1m, 1h30m, or milliseconds"},
    {name: "burst", label: "Burst", hint: by("burst") + "; empty: the limit", number: true},
    {name: "buckets", label: "Buckets", hint: by("buckets") + "; must divide the window", number: true},
    {name: "max_delay", label: "Max delay", hint: by("max_delay") + ": admit after a wait of up to this"},
    {name: "max_debt", label: "Max debt", hint: "units a key may owe past its limit after a settle; empty: the capacity; 0: none", number: true},
    {name: "priorities", label: "Priorities", hint: "lowest first: low, high, critical (strict mode)"},
    {name: "reserve", label: "Reserve", hint: "what each priority but the lowest keeps: critical: 20%, high: 3"},
    {name: "priority", label: "Priority template", hint: "for /v1/auth: {header:x-priority}"},
    {name: "adaptive", label: "Adaptive limit", options: [""].concat(adaptives.map((x) => x.name)),
      hint: by("adaptive") + ": " + adaptives.map((x) => x.name + ", " + x.summary).join("; ")},
    {name: "min_limit", label: "Min limit", hint: "adaptive: the lowest the limit goes", number: true},
    {name: "max_limit", label: "Max limit", hint: "adaptive: the highest the limit goes", number: true},
    {name: "backoff", label: "Backoff", hint: reads("backoff") + ": percent of the limit kept on a drop", number: true},
    {name: "latency_timeout", label: "Latency timeout", hint: reads("latency_timeout") + ": a release slower than this is a drop"},
    {name: "probe", label: "Probe", hint: reads("probe") + ": windows between two measures of the least latency", number: true},
    {name: "key", label: "Key template", hint: "for /v1/auth: {ip}, {header:x-api-key}, …"},
    {name: "shadow", label: "Shadow", checkbox: true, hint: "decide and count, but always allow"},
    {name: "on_store_error", label: "On store error", options: ["allow", "deny"]},
    {name: "cold_start", label: "Cold start", options: ["open", "closed"]},
  ];
}

// "12" -> 12; anything else stays text, for the server to refuse with its own words.
const numberOrText = (v) => (/^(0|[1-9][0-9]{0,15})$/.test(v) ? Number(v) : v);

function ruleForm(onSaved, algs, adaptives) {
  const FIELDS = fields(algs, adaptives);
  const inputs = {};
  const errors = {};
  const rows = [];
  let original = null; // the rule's JSON being changed, or null for a new rule
  let replacing = null; // the name of a rule in force that the next Save of a new rule replaces
  let authError = false; // the message shown is the server refusing the admin token (or none)
  for (const f of FIELDS) {
    let input;
    if (f.options) {
      input = h("select", {id: "f-" + f.name, name: f.name},
        f.options.map((o) => h("option", {value: o}, o || "none")));
    } else if (f.checkbox) {
      input = h("input", {id: "f-" + f.name, name: f.name, type: "checkbox"});
    } else {
      input = h("input", {id: "f-" + f.name, name: f.name, type: "text", spellcheck: "false",
        autocomplete: "off"});
    }
    inputs[f.name] = input;
    errors[f.name] = h("div", {class: "field-error", id: "err-" + f.name,
      dataset: {field: f.name}, role: "alert"});
    rows.push(h("label", {for: "f-" + f.name}, f.label),
      h("div", {}, input, f.hint ? h("div", {class: "hint"}, f.hint) : null, errors[f.name]));
  }
  const formError = h("p", {class: "error", id: "form-error", role: "alert"});
  const confirmMsg = h("p", {class: "warn", id: "form-confirm", role: "alert"});
  const done = h("span", {class: "ok", id: "form-done"});
  const title = h("h2", {id: "form-title"}, "New rule");
  const submit = h("button", {type: "submit", class: "primary", id: "save-rule"}, "Save");
  const cancel = h("button", {type: "button", id: "new-rule", onclick: () => load(null)}, "New rule");

  // A new rule's name that is in use asks for a second Save, which replaces that rule.
  function disarm() {
    replacing = null;
    confirmMsg.textContent = "";
    submit.textContent = "Save";
  }
  inputs.name.addEventListener("input", disarm);

  function applicable() {
    const alg = inputs.algorithm.value;
    for (const field of PARAMS) inputs[field].disabled = !taking(algs, field).includes(alg);
    // an adaptive limit: only where the table says the limit may adapt; its fields once chosen
    inputs.adaptive.disabled = !taking(algs, "adaptive").includes(alg);
    const chosen = inputs.adaptive.disabled ? null :
      adaptives.find((x) => x.name === inputs.adaptive.value) || null;
    for (const field of ADAPTIVE_BOUNDS) inputs[field].disabled = chosen === null;
    for (const x of adaptives) {
      for (const opt of x.options) {
        if (inputs[opt]) inputs[opt].disabled = chosen === null || !chosen.options.includes(opt);
      }
    }
  }
  inputs.algorithm.addEventListener("change", applicable);
  inputs.adaptive.addEventListener("change", applicable);

  function clearErrors() {
    for (const [name, el] of Object.entries(errors)) {
      el.textContent = "";
      inputs[name].classList.remove("invalid");
      inputs[name].removeAttribute("aria-invalid");
    }
    formError.textContent = "";
    authError = false;
    done.textContent = "";
  }

  function load(rule) {
    original = rule;
    clearErrors();
    disarm();
    title.textContent = rule ? "Change rule " : "New rule";
    if (rule) title.appendChild(h("code", {}, rule.name));
    for (const f of FIELDS) {
      const v = rule ? rule[f.name] : undefined;
      if (f.checkbox) inputs[f.name].checked = v === true;
      else if (f.options) inputs[f.name].value = v !== undefined ? String(v) : f.options[0];
      else inputs[f.name].value = v !== undefined ? String(v) : "";
    }
    if (!rule) inputs.algorithm.value = suggested(algs);
    inputs.name.readOnly = rule !== null;
    applicable();
  }

  // The JSON to PUT: the rule's other fields (descriptors) kept, the form's written over them.
  function body() {
    const out = original ? Object.assign({}, original) : {};
    for (const f of FIELDS) {
      const input = inputs[f.name];
      delete out[f.name];
      if (f.name === "name") continue;
      if (f.checkbox) out[f.name] = input.checked;
      else if (input.disabled) continue;
      else if (input.value.trim() !== "") {
        out[f.name] = f.number ? numberOrText(input.value.trim()) : input.value.trim();
      }
    }
    return out;
  }

  async function save(e) {
    e.preventDefault();
    clearErrors();
    const name = inputs.name.value.trim();
    if (name === "") {
      errors.name.textContent = "a rule needs a name";
      inputs.name.classList.add("invalid");
      return;
    }
    const confirmed = replacing === name;
    disarm();
    try {
      if (original === null && !confirmed && (await exists(name))) {
        replacing = name;
        confirmMsg.textContent = "A rule named \u201c" + name + "\u201d is in force: Save again " +
          "to replace it, or choose another name.";
        submit.textContent = "Replace";
        return;
      }
      const saved = await api.putRule(name, body());
      load(saved);
      done.textContent = "Saved; in force now.";
      onSaved();
    } catch (err) {
      showError(err);
    }
  }

  // Whether a rule of this name is in force (GET /v1/rules/NAME: 404 when not).
  async function exists(name) {
    try {
      await api.rule(name);
      return true;
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return false;
      throw err;
    }
  }

  function showError(err) {
    const field = err instanceof ApiError ? err.field : null;
    if (field && errors[field]) {
      // "invalid rule: line 1, column 9: limit: must be ..." -> "must be ..." under Limit
      const at = err.message.lastIndexOf(field + ": ");
      errors[field].textContent = at >= 0 ? err.message.slice(at + field.length + 2) : err.message;
      inputs[field].classList.add("invalid");
      inputs[field].setAttribute("aria-invalid", "true");
      inputs[field].focus();
    } else {
      formError.textContent = err.message;
      authError = err instanceof ApiError && err.status === 401;
    }
  }

  // The admin token changed: a message about the one before no longer holds.
  function tokenChanged() {
    if (authError) clearErrors();
  }

  const form = h("form", {class: "fields", id: "rule-form", onsubmit: save, novalidate: true},
    rows, h("span", {}), h("div", {class: "actions"}, submit, cancel, done));
  load(null);
  return {el: h("section", {class: "card editor"}, title, formError, confirmMsg, form), load,
    showError, tokenChanged};
}

function confirmButton(label, action) {
  let armed = false;
  let timer = null;
  const b = h("button", {type: "button", class: "danger", onclick: async () => {
    if (!armed) {
      armed = true;
      b.textContent = "Really " + label.toLowerCase() + "?";
      timer = setTimeout(() => {
        armed = false;
        b.textContent = label;
      }, 5000);
      return;
    }
    clearTimeout(timer);
    await action();
  }}, label);
  return b;
}

export function mount(root) {
  const list = h("tbody", {});
  const listStatus = h("p", {class: "muted", id: "rules-status"});
  const listError = h("p", {class: "error", id: "rules-error", role: "alert"});
  const formSlot = h("div", {});
  let form = null; // the rule form, once the algorithms are known
  let mounted = true;
  fill(root, h("h1", {}, "Rules"), listError,
    h("section", {class: "card"}, listStatus,
      h("table", {id: "rules-table"}, h("thead", {}, h("tr", {}, h("th", {}, "name"),
        h("th", {}, "algorithm"), h("th", {class: "num"}, "limit"), h("th", {}, "window"),
        h("th", {}, "shadow"), h("th", {}, ""))), list)),
    formSlot);

  async function act(fn) {
    listError.textContent = "";
    try {
      await fn();
    } catch (err) {
      listError.textContent = err.message;
    }
    await refresh();
  }

  async function refresh() {
    let reply;
    try {
      reply = await api.rules();
    } catch (err) {
      listStatus.textContent = "";
      listError.textContent = "Could not list the rules: " + err.message;
      fill(list);
      return;
    }
    listStatus.textContent = reply.rules.length + " rules (store version " + reply.version + ")";
    fill(list);
    for (const r of reply.rules) {
      list.appendChild(h("tr", {dataset: {rule: r.name}},
        h("td", {}, h("a", {href: "#/rule/" + encodeURIComponent(r.name)}, r.name)),
        h("td", {}, r.unlimited ? "unlimited" : r.algorithm),
        h("td", {class: "num"}, r.limit !== undefined ? num(r.limit) : ""),
        h("td", {}, r.window !== undefined ? String(r.window) : ""),
        h("td", {}, r.shadow ? "on" : "off"),
        h("td", {}, h("div", {class: "actions"},
          h("button", {type: "button", class: "edit", onclick: () => form && form.load(r)}, "Edit"),
          h("button", {type: "button", class: "shadow-toggle",
            onclick: () => act(() => api.putRule(r.name, Object.assign({}, r, {shadow: !r.shadow})))},
          r.shadow ? "Enforce" : "Shadow"),
          confirmButton("Delete", () => act(() => api.deleteRule(r.name)))))));
    }
  }
  // A new token changes no rule: the list is asked again (a refusal shown there may be gone),
  // and what was typed in the form stays.
  function onToken() {
    listError.textContent = "";
    if (form) form.tokenChanged();
    refresh();
  }
  window.addEventListener("sluice:token", onToken);
  // The form first, then the list: a rule in the list can be edited as soon as it is shown.
  Promise.all([api.algorithms(), api.adaptive()]).then(([algs, adaptives]) => {
    if (!mounted) return;
    form = ruleForm(refresh, algs, adaptives);
    fill(formSlot, form.el);
    refresh();
  }, (err) => {
    if (!mounted) return;
    listError.textContent = "Could not read the algorithms (no form): " + err.message;
    refresh();
  });
  return () => {
    mounted = false;
    window.removeEventListener("sluice:token", onToken);
  };
}
