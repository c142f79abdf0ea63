// app.js - the console: a hash router over the pages, and the admin token field.
import {token, setToken} from "./api.js";
import * as overview from "./overview.js";
import * as rule from "./rule.js";
import * as editor from "./editor.js";
import * as replay from "./replay.js";

const main = document.getElementById("main");
let unmount = () => {};

// The rule a hash names ("/rule/NAME", NAME percent-encoded), or null for another page or a
// NAME that is not valid percent-encoding (the overview is shown then).
function ruleOf(hash) {
  const m = hash.match(/^\/rule\/(.+)$/);
  if (!m) return null;
  try {
    return decodeURIComponent(m[1]);
  } catch (e) {
    return null;
  }
}

function route() {
  unmount();
  unmount = () => {};
  const hash = location.hash.replace(/^#/, "") || "/";
  let nav = "overview";
  const name = ruleOf(hash);
  if (name !== null) {
    unmount = rule.mount(main, name);
  } else if (hash === "/rules") {
    nav = "rules";
    unmount = editor.mount(main);
  } else if (hash === "/replay") {
    nav = "replay";
    unmount = replay.mount(main);
  } else {
    unmount = overview.mount(main);
  }
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.classList.toggle("active", a.dataset.nav === nav && name === null);
  }
  document.title = "sluice · " + (name !== null ? name : nav);
}

// A change of the token is told to the page in view as a "sluice:token" event on window; the
// page is not built again (what was typed in it stays), it asks again for what the token
// changes.
function tokenField() {
  const input = document.getElementById("token");
  const state = document.getElementById("token-state");
  const changed = () => {
    state.textContent = token() ? "set for this tab" : "";
    window.dispatchEvent(new Event("sluice:token"));
  };
  document.getElementById("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    input.value = "";
    changed();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    setToken("");
    input.value = "";
    changed();
  });
  state.textContent = token() ? "set for this tab" : "";
}

tokenField();
window.addEventListener("hashchange", route);
route();
