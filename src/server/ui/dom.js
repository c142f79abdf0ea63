// dom.js - building the page. Text is always a text node (never HTML): keys and rule names are
// data, and a key "<script>" must show as those characters.

// h("td", {class: "num"}, "12") -> <td class="num">12</td>. Children: strings and numbers become
// text nodes, nodes are appended, null/false are skipped, arrays are flattened. Attributes whose
// name starts with "on" are listeners; "dataset" is an object of data-* values.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name === "value") el.value = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// Replaces el's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// 1234567 -> "1,234,567"
export function num(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : String(n);
}

// 60000 -> "1m", 1500 -> "1500ms", 3600000 -> "1h"
export function duration(ms) {
  const units = [["d", 86400000], ["h", 3600000], ["m", 60000], ["s", 1000]];
  for (const [u, n] of units) if (ms >= n && ms % n === 0) return ms / n + u;
  return ms + "ms";
}
