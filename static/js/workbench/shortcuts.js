// Keyboard shortcuts: one registry per page, per-task scopes, and the "?" help list.
import { h } from "./dom.js";

const TEXT_INPUT_TYPES = new Set(["text", "search", "email", "url", "password", "number", "tel", ""]);

export function isTyping(target) {
  if (!target || !(target instanceof Element)) return false;
  if (target.isContentEditable) return true;
  if (target.tagName === "TEXTAREA" || target.tagName === "SELECT") return true;
  if (target.tagName === "INPUT") return TEXT_INPUT_TYPES.has((target.getAttribute("type") || "").toLowerCase());
  return false;
}

/**
 * Whether a "?" typed here is text the person means (a free-text box). A number box, a select, a
 * radio or a checkbox never takes a "?", so there "?" opens the key help; in a text box it types,
 * and F1 opens the help instead.
 */
export function isFreeText(target) {
  if (!target || !(target instanceof Element)) return false;
  if (target.isContentEditable || target.tagName === "TEXTAREA") return true;
  return target.tagName === "INPUT" && (target.getAttribute("type") || "").toLowerCase() !== "number" && isTyping(target);
}

function normalizeCombo(combo) {
  const parts = combo.toLowerCase().split("+").map((s) => s.trim());
  const key = parts.pop() || "+";
  const mods = new Set(parts.map((m) => (m === "cmd" || m === "meta" ? "ctrl" : m)));
  return { key: key === "space" ? " " : key, ctrl: mods.has("ctrl"), alt: mods.has("alt"), shift: mods.has("shift") };
}

function eventKey(e) {
  // With Alt held, some layouts turn letters into symbols; e.code keeps the physical key.
  if (e.altKey && /^Key[A-Z]$/.test(e.code)) return e.code.slice(3).toLowerCase();
  if (e.altKey && /^Digit[0-9]$/.test(e.code)) return e.code.slice(5);
  return e.key.length === 1 ? e.key.toLowerCase() : e.key.toLowerCase();
}

function prettyCombo(combo) {
  return combo
    .split("+")
    .map((p) => ({ f1: "F1", arrowup: "↑", arrowdown: "↓", arrowleft: "←", arrowright: "→", space: "Space", enter: "Enter", escape: "Esc" }[p.toLowerCase()] || (p.length === 1 ? p.toUpperCase() : p[0].toUpperCase() + p.slice(1))))
    .join("+");
}

/**
 * One registry per page. `scope()` gives a child whose shortcuts disappear with `clear()`, so a
 * workflow module can register per-task keys and drop them when the next task arrives.
 */
export class Shortcuts {
  constructor(target = document) {
    this.entries = [];
    this.enabled = true;
    target.addEventListener("keydown", (e) => this.dispatch(e));
  }

  register(combo, label, handler, { inInputs = false, group = "", hidden = false, owner = null } = {}) {
    const entry = { combo, label, handler, inInputs, group, hidden, owner, ...normalizeCombo(combo) };
    this.entries.push(entry);
    return entry;
  }

  scope() {
    const owner = {};
    const registry = this;
    return {
      register: (combo, label, handler, opts = {}) => registry.register(combo, label, handler, { ...opts, owner }),
      clear: () => {
        registry.entries = registry.entries.filter((e) => e.owner !== owner);
      },
    };
  }

  dispatch(e) {
    if (!this.enabled || e.defaultPrevented || e.isComposing) return;
    const key = eventKey(e);
    const typing = isTyping(e.target);
    // Plain Enter and Space keep their native meaning on buttons, links and disclosure widgets,
    // and Space ticks a focused checkbox; with a modifier (Ctrl+Enter) the shortcut wins.
    const plain = !(e.ctrlKey || e.metaKey || e.altKey);
    if (plain && (key === "enter" || key === " ") && e.target instanceof Element && e.target.closest("button, a[href], summary")) return;
    if (plain && key === " " && e.target instanceof HTMLInputElement && e.target.type === "checkbox") return;
    const printableSymbol = key.length === 1 && !/[a-z]/.test(key);
    // Later registrations (the current task's keys) win over page-wide ones.
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const s = this.entries[i];
      if (s.key !== key) continue;
      if (s.ctrl !== (e.ctrlKey || e.metaKey) || s.alt !== e.altKey) continue;
      if (!printableSymbol && s.shift !== e.shiftKey) continue;
      if (typing && !s.inInputs) continue;
      if (typing && s.inInputs === "except-free-text" && isFreeText(e.target)) continue;
      if (s.handler(e) === false) continue; // handler declined: let the browser have the key
      e.preventDefault();
      e.stopPropagation();
      return;
    }
  }

  /** The visible list, grouped, for the "?" help panel. */
  renderHelp(container) {
    container.replaceChildren();
    const groups = new Map();
    const seen = new Set();
    for (const s of this.entries) {
      if (s.hidden) continue;
      const id = `${s.group}|${s.label}`;
      if (seen.has(id)) {
        const row = groups.get(s.group).find((r) => r.label === s.label);
        row.combos.push(s.combo);
        continue;
      }
      seen.add(id);
      if (!groups.has(s.group)) groups.set(s.group, []);
      groups.get(s.group).push({ label: s.label, combos: [s.combo] });
    }
    for (const [group, rows] of groups) {
      if (group) container.append(h("h3", {}, group));
      container.append(
        h("dl", { class: "keys" }, rows.map((r) => [h("dt", {}, r.combos.map((c) => h("kbd", {}, prettyCombo(c)))), h("dd", {}, r.label)])),
      );
    }
  }
}
