// Shared behaviour of every annotator and reviewer page: the JSON API with CSRF, draft autosave
// (versioned, with a local copy so nothing is lost offline), idempotent submit with retries, the
// task lease, keyboard shortcuts and preloading of the next task's media.
// Plain ES module, no build step. The workflow modules (quintuplet.js, box.js, qa.js, rating.js)
// only render an item and turn the form into a result; everything about not losing work is here.

// ---------------------------------------------------------------------------------------------
// Small DOM helpers
// ---------------------------------------------------------------------------------------------

/** Create an element: h("div", {class: "x", onclick: fn}, child, "text", ...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "text") el.textContent = value;
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function uuid() {
  if (globalThis.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
  // Non-secure origins (plain http on a LAN name) have no randomUUID; build a v4 UUID by hand.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// ---------------------------------------------------------------------------------------------
// JSON API
// ---------------------------------------------------------------------------------------------

export function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  if (meta && meta.content) return meta.content;
  const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

export class ApiError extends Error {
  constructor(status, body, message) {
    super(message || describeError(body) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export class NetworkError extends Error {}

/** Flatten a DRF error body into readable "field: message" lines. */
export function describeError(body, prefix = "") {
  if (body === null || body === undefined) return "";
  // Our API's 400s: {"detail": "Please fix: a, b.", "errors": {field: message}}: the fields say it all.
  if (!prefix && typeof body === "object" && body.errors && typeof body.errors === "object" && !Array.isArray(body.errors)) {
    return describeError(body.errors);
  }
  if (typeof body === "string") return prefix ? `${prefix}: ${body}` : body;
  if (Array.isArray(body)) {
    return body.map((x) => describeError(x, prefix)).filter(Boolean).join("; ");
  }
  if (typeof body === "object") {
    const parts = [];
    for (const [key, value] of Object.entries(body)) {
      if (key === "detail" || key === "non_field_errors" || key === "message" || key === "error") {
        parts.push(describeError(value, prefix));
      } else if (key === "code" || key === "status") {
        continue;
      } else {
        parts.push(describeError(value, prefix ? `${prefix}.${key}` : key));
      }
    }
    return parts.filter(Boolean).join("; ");
  }
  return String(body);
}

/** First field path named in an error body ("result.state_a" -> "state_a"), if any. */
export function errorField(body) {
  if (!body || typeof body !== "object") return null;
  if (typeof body.field === "string") return body.field.replace(/^result\./, "");
  if (body.errors && typeof body.errors === "object") return errorField(body.errors);
  for (const [key, value] of Object.entries(body)) {
    if (["detail", "non_field_errors", "message", "code", "status", "error"].includes(key)) continue;
    if (key === "result" && value && typeof value === "object" && !Array.isArray(value)) {
      return errorField(value) || "result";
    }
    return key;
  }
  return null;
}

const RETRY_DELAYS_MS = [400, 1200, 3000, 6000];

/**
 * Call the JSON API. Network failures and 502/503/504 are retried `retries` times with the same
 * request (and so the same Idempotency-Key), which is what makes a retried submit safe.
 */
export async function api(method, url, { body, headers = {}, retries = 0, keepalive = false } = {}) {
  const init = {
    method,
    credentials: "same-origin",
    keepalive,
    headers: { Accept: "application/json", ...headers },
  };
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  for (let attempt = 0; ; attempt++) {
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      if (attempt < retries) {
        await sleep(RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length - 1)]);
        continue;
      }
      throw new NetworkError("The server cannot be reached. Your work is kept in this browser.");
    }
    if ([502, 503, 504].includes(response.status) && attempt < retries) {
      await sleep(RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length - 1)]);
      continue;
    }
    if (response.status === 204) return null;
    const text = await response.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = { detail: text.slice(0, 300) };
      }
    }
    if (!response.ok) throw new ApiError(response.status, data);
    data = data ?? {};
    Object.defineProperty(data, "_status", { value: response.status, enumerable: false });
    return data;
  }
}

/** Follow DRF pagination ({results, next}) or accept a bare list. */
export async function apiList(url) {
  const out = [];
  let next = url;
  while (next) {
    const data = await api("GET", next, { retries: 2 });
    if (Array.isArray(data)) return out.concat(data);
    const rows = data.results || data.items || [];
    out.push(...rows);
    next = data.next || null;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Keyboard shortcuts
// ---------------------------------------------------------------------------------------------

const TEXT_INPUT_TYPES = new Set(["text", "search", "email", "url", "password", "number", "tel", ""]);

export function isTyping(target) {
  if (!target || !(target instanceof Element)) return false;
  if (target.isContentEditable) return true;
  if (target.tagName === "TEXTAREA" || target.tagName === "SELECT") return true;
  if (target.tagName === "INPUT") return TEXT_INPUT_TYPES.has((target.getAttribute("type") || "").toLowerCase());
  return false;
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
    .map((p) => ({ arrowup: "↑", arrowdown: "↓", arrowleft: "←", arrowright: "→", space: "Space", enter: "Enter", escape: "Esc" }[p.toLowerCase()] || (p.length === 1 ? p.toUpperCase() : p[0].toUpperCase() + p.slice(1))))
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

// ---------------------------------------------------------------------------------------------
// Media preloading
// ---------------------------------------------------------------------------------------------

const preloaded = new Map(); // url -> element kept alive so the browser keeps the bytes around

/** Start downloading media; resolves when images are decoded (or after `timeoutMs`). */
export function preloadMedia(media, { timeoutMs = 4000 } = {}) {
  const waits = [];
  for (const { url, kind } of media) {
    if (!url || preloaded.has(url)) continue;
    if (kind === "video") {
      const v = document.createElement("video");
      v.preload = "auto";
      v.muted = true;
      v.src = url;
      preloaded.set(url, v);
      waits.push(new Promise((resolve) => {
        v.addEventListener("loadeddata", resolve, { once: true });
        v.addEventListener("error", resolve, { once: true });
      }));
    } else {
      const img = new Image();
      img.decoding = "async";
      img.src = url;
      preloaded.set(url, img);
      waits.push(img.decode().catch(() => undefined));
    }
  }
  if (preloaded.size > 64) {
    for (const key of [...preloaded.keys()].slice(0, preloaded.size - 64)) preloaded.delete(key);
  }
  return Promise.race([Promise.all(waits), sleep(timeoutMs)]);
}

// ---------------------------------------------------------------------------------------------
// Status line and messages
// ---------------------------------------------------------------------------------------------

export class Notices {
  constructor(el) {
    this.el = el;
  }

  show(text, { kind = "info", actions = [], sticky = false, id = null } = {}) {
    if (id) this.clear(id);
    const li = h("li", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status", dataset: { id: id || "" } }, h("span", {}, text));
    for (const [label, fn] of actions) {
      li.append(h("button", { type: "button", onclick: () => { li.remove(); fn(); } }, label));
    }
    li.append(h("button", { type: "button", class: "close", "aria-label": "Dismiss", onclick: () => li.remove() }, "×"));
    this.el.append(li);
    if (!sticky) setTimeout(() => li.remove(), kind === "error" ? 12000 : 5000);
    return li;
  }

  clear(id) {
    for (const li of this.el.querySelectorAll(`li[data-id="${id}"]`)) li.remove();
  }
}

function formatClock(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

// ---------------------------------------------------------------------------------------------
// The task loop
// ---------------------------------------------------------------------------------------------

const AUTOSAVE_DELAY_MS = 700;
const IDLE_LIMIT_MS = 15 * 60 * 1000; // stop renewing the lease after 15 idle minutes

/** Media of an item as [{url, kind}], whatever field names the payload uses. */
export function mediaOf(item) {
  const out = [];
  const visit = (value, kindHint) => {
    if (!value) return;
    if (typeof value === "string") {
      if (/^(\/|https?:)/.test(value)) out.push({ url: value, kind: kindHint || guessKind(value) });
    } else if (Array.isArray(value)) {
      value.forEach((v) => visit(v, kindHint));
    } else if (typeof value === "object") {
      if (typeof value.url === "string") out.push({ url: value.url, kind: value.kind || kindHint || guessKind(value.url) });
      else Object.values(value).forEach((v) => visit(v, kindHint));
    }
  };
  visit(item.media);
  for (const key of ["image", "image_a", "image_b", "images", "video", "video_before", "video_after"]) {
    if (item[key] !== undefined) visit(item[key], key.startsWith("video") ? "video" : "image");
  }
  const seen = new Set();
  return out.filter((m) => (seen.has(m.url) ? false : (seen.add(m.url), true)));
}

export function guessKind(url) {
  return /\.(mp4|webm|mov|mkv|ogv|m4v)(\?|$)/i.test(url) ? "video" : "image";
}

/** URL of a media field whatever the backend's shape: "url", {url}, or item.media[name]. */
export function mediaUrl(item, name) {
  const pick = (v) => (v && typeof v === "object" && !Array.isArray(v) ? v.url : v);
  if (item.media && item.media[name] !== undefined) return pick(item.media[name]);
  if (item.media_urls && item.media_urls[name] !== undefined) return pick(item.media_urls[name]);
  if (item[`${name}_url`] !== undefined) return pick(item[`${name}_url`]);
  return pick(item[name]);
}

export function mediaList(item, name) {
  const value = (item.media && item.media[name]) ?? (item.media_urls && item.media_urls[name]) ?? item[`${name}_urls`] ?? item[name] ?? [];
  return (Array.isArray(value) ? value : [value]).map((v) => (v && typeof v === "object" ? v.url : v)).filter(Boolean);
}

/**
 * Runs one annotator's session: claim, show, autosave, renew, submit, claim the next.
 *
 * workflow = {name, mount(container, item, draft, ctx) -> view}
 * view = {collect() -> {result} | {error, field}, draft() -> object, focusField?(name),
 *         blocked?() -> reason string or "", destroy?()}
 */
export class Workbench {
  constructor({ root, slug, workflow }) {
    this.root = root;
    this.slug = slug;
    this.workflow = workflow;
    this.shortcuts = new Shortcuts();
    this.notices = new Notices(root.querySelector("[data-notices]"));
    this.workspace = root.querySelector("[data-workspace]");
    this.statusEl = root.querySelector("[data-save-status]");
    this.leaseEl = root.querySelector("[data-lease]");
    this.taskEl = root.querySelector("[data-task-label]");
    this.submitBtn = root.querySelector("[data-submit]");
    this.skipBtn = root.querySelector("[data-skip]");
    this.countEl = root.querySelector("[data-done-count]");
    this.task = null;
    this.view = null;
    this.preloaded = null;
    this.preloading = false;
    this.finished = new Set(); // tasks submitted or skipped here: late answers about them are moot
    this.doneCount = 0;
    this.lastActivity = Date.now();
    this.saveTimer = null;
    this.saving = null;
    this.dirty = false;
    this.conflict = false;
    this.submitting = false;

    this.submitBtn.addEventListener("click", () => this.submit());
    this.skipBtn.addEventListener("click", () => this.skip());
    this.shortcuts.register("ctrl+enter", "Submit", () => this.submit(), { inInputs: true, group: "Task" });
    this.shortcuts.register("shift+s", "Skip this item", () => this.skip(), { group: "Task" });
    this.shortcuts.register("ctrl+s", "Save the draft now", () => this.saveDraft(), { inInputs: true, group: "Task" });
    const help = root.querySelector("[data-help]");
    const helpBody = root.querySelector("[data-help-body]");
    if (help) {
      const open = () => {
        this.shortcuts.renderHelp(helpBody);
        help.showModal();
      };
      this.shortcuts.register("?", "Show keyboard shortcuts", open, { group: "Page" });
      root.querySelector("[data-help-open]")?.addEventListener("click", open);
    }
    for (const type of ["keydown", "pointerdown", "input"]) {
      document.addEventListener(type, () => (this.lastActivity = Date.now()), { capture: true, passive: true });
    }
    // Flush the draft when the tab is hidden or closed; keepalive lets the request outlive the page.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "hidden") this.flushDraft();
    });
    window.addEventListener("pagehide", () => this.flushDraft());
    window.addEventListener("beforeunload", (e) => {
      if (this.dirty && this.task) {
        this.storeLocal();
      }
    });
    window.addEventListener("online", () => {
      if (this.dirty) this.saveDraft();
    });
    this.activeMs = 0;
    this.activeSince = null;
    document.addEventListener("visibilitychange", () => this.tickClock());
    setInterval(() => this.updateLeaseClock(), 1000);
  }

  // ---- time on task: counted only while the page is visible ----
  tickClock() {
    const now = performance.now();
    if (this.activeSince !== null) this.activeMs += now - this.activeSince;
    this.activeSince = document.visibilityState === "visible" && this.task ? now : null;
  }

  timeSpentMs() {
    this.tickClock();
    return Math.round(this.activeMs);
  }

  setStatus(text, kind = "") {
    this.statusEl.textContent = text;
    this.statusEl.className = `save-status ${kind}`;
  }

  // ---- claiming ----
  async start() {
    await this.claim();
  }

  async claim() {
    this.setStatus("Loading…");
    const ready = await this.takePreloaded();
    if (ready) {
      this.load(ready);
      return;
    }
    let data;
    try {
      data = await api("POST", `/api/projects/${this.slug}/tasks/next/`, { retries: 3 });
    } catch (err) {
      this.setStatus("Not loaded", "error");
      this.notices.show(`Could not get a task: ${err.message}`, { kind: "error", sticky: true, id: "claim", actions: [["Try again", () => this.claim()]] });
      return;
    }
    this.notices.clear("claim");
    if (!data) {
      this.showDone();
      return;
    }
    await preloadMedia(mediaOf(data.item), { timeoutMs: 3000 });
    this.load(data);
  }

  /**
   * Hold the task after this one and download its media while the annotator works, so the next
   * task appears at once after a submit. The server lets a page hold its task plus one more; the
   * current task is excluded so the server hands out a different one.
   */
  async preloadNext() {
    const current = this.task;
    if (!current || this.preloaded || this.preloading) return;
    this.preloading = true;
    try {
      const data = await api("POST", `/api/projects/${this.slug}/tasks/next/`, { body: { exclude: [current.id] }, retries: 1 });
      if (data && data.task !== current.id && (!this.task || data.task !== this.task.id)) {
        this.preloaded = data;
        preloadMedia(mediaOf(data.item), { timeoutMs: 60000 });
      }
    } catch {
      /* preloading is an optimisation; the next claim after submit still works */
    } finally {
      this.preloading = false;
    }
  }

  async takePreloaded() {
    const next = this.preloaded;
    this.preloaded = null;
    if (!next || (this.lastData && next.task === this.lastData.task)) return null;
    const left = next.lease_expires ? Date.parse(next.lease_expires) - Date.now() : 0;
    if (left > 60000) {
      // The hold is still good for a while: show the task at once; the lease timer renews it.
      setTimeout(() => this.renew(), 0);
      return next;
    }
    try {
      // The hold may have run out while the previous task took long: confirm it first.
      const renewed = await api("POST", `/api/tasks/${next.task}/renew/`, { retries: 1 });
      if (renewed && renewed.lease_expires) next.lease_expires = renewed.lease_expires;
      return next;
    } catch {
      return null;
    }
  }

  showDone() {
    this.unload();
    this.workspace.replaceChildren(
      h("section", { class: "card done", "data-queue-empty": "" },
        h("h2", {}, "Nothing left for you in this project"),
        h("p", {}, "Every item has its annotations, or the remaining ones are held by someone else. Check again later."),
        h("button", { type: "button", class: "primary", onclick: () => this.claim() }, "Check again")),
    );
    this.taskEl.textContent = "—";
    this.submitBtn.disabled = true;
    this.skipBtn.disabled = true;
    this.setStatus("");
  }

  unload() {
    clearInterval(this.renewTimer);
    clearTimeout(this.saveTimer);
    if (this.view && this.view.destroy) this.view.destroy();
    if (this.scope) this.scope.clear();
    this.view = null;
    this.task = null;
    this.dirty = false;
    this.conflict = false;
  }

  load(data) {
    this.unload();
    this.lastData = data;
    // A preload that raced with a plain claim may hold this very task: never offer it again.
    if (this.preloaded && this.preloaded.task === data.task) this.preloaded = null;
    this.task = {
      id: data.task,
      item: data.item,
      version: data.draft_version ?? data.version ?? 0,
      leaseExpires: data.lease_expires ? Date.parse(data.lease_expires) : null,
    };
    this.root.dataset.task = String(data.task);
    this.taskEl.textContent = `Task ${data.task}` + (data.item.external_id ? ` · item ${data.item.external_id}` : "");
    let draft = data.draft || {};
    const local = this.readLocal();
    if (local && local.dirty && local.baseVersion >= this.task.version) {
      // Changes typed here that never reached the server (offline, tab closed): keep them.
      draft = local.draft;
      this.dirty = true;
    }
    this.activeMs = (draft && draft._time_ms) || 0;
    this.activeSince = null;
    this.tickClock();
    this.scope = this.shortcuts.scope();
    const ctx = {
      changed: () => this.changed(),
      shortcuts: this.scope,
      submit: () => this.submit(),
      notices: this.notices,
      refreshSubmit: () => this.refreshSubmit(),
    };
    this.workspace.replaceChildren();
    this.view = this.workflow.mount(this.workspace, data.item, draft, ctx);
    this.submitBtn.disabled = false;
    this.skipBtn.disabled = false;
    this.refreshSubmit();
    this.setStatus(this.dirty ? "Unsaved changes" : "Saved", this.dirty ? "pending" : "ok");
    if (this.dirty) this.scheduleSave();
    this.startLeaseTimer();
    this.updateLeaseClock();
    // Submit-to-next-task time is visible in the browser's performance timeline.
    performance.mark("statelab:task-shown");
    clearTimeout(this.preloadTimer);
    // A short pause lets the current task's own requests (video bytes, first draft) go first.
    this.preloadTimer = setTimeout(() => this.preloadNext(), 200);
  }

  refreshSubmit() {
    if (!this.view || !this.task) return;
    const reason = this.view.blocked ? this.view.blocked() : "";
    this.submitBtn.disabled = Boolean(reason) || this.submitting;
    this.submitBtn.title = reason || "Submit (Ctrl+Enter)";
  }

  // ---- drafts ----
  // Kept per annotator and item, not per task: when a lost hold is taken again the item comes
  // back as a new task, and the answer typed for it must come back too.
  localKey(task = this.task) {
    return `statelab:draft:${this.root.dataset.user || ""}:${task.item.id}`;
  }

  readLocal() {
    try {
      return JSON.parse(localStorage.getItem(this.localKey()) || "null");
    } catch {
      return null;
    }
  }

  storeLocal() {
    if (!this.task || !this.view) return;
    try {
      localStorage.setItem(this.localKey(), JSON.stringify({ draft: this.currentDraft(), baseVersion: this.task.version, dirty: this.dirty, at: Date.now() }));
    } catch {
      /* storage full or disabled: the server copy still exists */
    }
  }

  currentDraft() {
    return { ...this.view.draft(), _time_ms: Math.round(this.activeMs) };
  }

  changed() {
    this.dirty = true;
    this.refreshSubmit();
    this.storeLocal();
    this.setStatus("Unsaved changes", "pending");
    this.scheduleSave();
  }

  scheduleSave() {
    clearTimeout(this.saveTimer);
    this.saveTimer = setTimeout(() => this.saveDraft(), AUTOSAVE_DELAY_MS);
  }

  async saveDraft() {
    if (!this.task || !this.view || this.conflict) return;
    clearTimeout(this.saveTimer);
    if (this.saving) {
      // One save at a time keeps versions in order; save again after the running one.
      await this.saving.catch(() => undefined);
      if (!this.dirty) return;
    }
    const task = this.task;
    this.tickClock();
    const draft = this.currentDraft();
    this.dirty = false;
    this.setStatus("Saving…", "pending");
    // A retry after a lost response resends this very body and version (api() reuses the
    // request), so the server recognises the replay of a save it already made and accepts it.
    this.saving = api("PUT", `/api/tasks/${task.id}/draft/`, { body: { draft, version: task.version }, retries: 2 });
    try {
      const data = await this.saving;
      if (this.task !== task) return;
      task.version = data.version ?? data.draft_version ?? task.version + 1;
      if (data.lease_expires) task.leaseExpires = Date.parse(data.lease_expires);
      this.storeLocal();
      if (!this.dirty) this.setStatus("Saved", "ok");
    } catch (err) {
      if (this.task !== task || this.finished.has(task.id)) return;
      this.dirty = true;
      this.storeLocal();
      // 409 means either a newer draft from another tab, or a hold that is gone (expired and
      // taken, submitted or skipped elsewhere); the server's message says which.
      if (err instanceof ApiError && err.status === 409 && /version|another tab/i.test(err.message)) this.onDraftConflict(err);
      else if (err instanceof ApiError && err.status === 409) this.onLeaseLost(err);
      else if (err instanceof ApiError && [403, 404, 410].includes(err.status)) this.onLeaseLost(err);
      else {
        this.setStatus("Not saved — kept in this browser", "error");
        this.saveTimer = setTimeout(() => this.saveDraft(), 5000);
      }
    } finally {
      this.saving = null;
    }
  }

  flushDraft() {
    if (!this.task || !this.view || !this.dirty || this.conflict) return;
    this.tickClock();
    this.storeLocal();
    // keepalive: survives the page going away; the local copy covers a failure.
    api("PUT", `/api/tasks/${this.task.id}/draft/`, { body: { draft: this.currentDraft(), version: this.task.version }, keepalive: true })
      .then((data) => {
        if (this.task) {
          this.task.version = data.version ?? data.draft_version ?? this.task.version + 1;
          this.dirty = false;
          this.storeLocal();
          this.setStatus("Saved", "ok");
        }
      })
      .catch(() => undefined);
  }

  onDraftConflict(err) {
    this.conflict = true;
    this.setStatus("Conflict", "error");
    const serverVersion = err.body && (err.body.version ?? err.body.draft_version);
    this.notices.show(
      "This task was saved from another tab or window since you loaded it. Your answer is kept here. Keep yours (overwrites the other copy) or load the other copy?",
      {
        kind: "error",
        sticky: true,
        id: "conflict",
        actions: [
          ["Keep mine", () => this.resolveConflict("mine", serverVersion)],
          ["Load the other copy", () => this.resolveConflict("theirs", serverVersion, err.body && err.body.draft)],
        ],
      },
    );
  }

  async resolveConflict(choice, serverVersion, serverDraft) {
    const task = this.task;
    if (!task) return;
    let fresh = null;
    if (choice === "theirs" && serverDraft && typeof serverDraft === "object" && serverVersion !== undefined && serverVersion !== null) {
      // The 409 carried the stored draft: no second request needed.
      fresh = { ...this.lastData, draft: serverDraft, version: serverVersion, lease_expires: new Date(task.leaseExpires || Date.now()).toISOString() };
    } else if (choice === "theirs" || serverVersion === undefined || serverVersion === null) {
      // Asking for the next task returns the task this user already holds, with the stored draft.
      fresh = await api("POST", `/api/projects/${this.slug}/tasks/next/`, { retries: 2 }).catch(() => null);
    }
    this.conflict = false;
    if (choice === "theirs") {
      if (fresh && fresh.task === task.id) {
        localStorage.removeItem(this.localKey());
        this.load(fresh);
      } else {
        window.location.reload();
      }
      return;
    }
    task.version = serverVersion ?? (fresh && fresh.task === task.id ? fresh.draft_version ?? fresh.version : task.version);
    this.dirty = true;
    await this.saveDraft();
  }

  // ---- lease ----
  startLeaseTimer() {
    clearInterval(this.renewTimer);
    const remaining = this.task.leaseExpires ? this.task.leaseExpires - Date.now() : 300000;
    // Renew at a third of the lease so one failed renewal still leaves time for the next.
    const every = Math.min(120000, Math.max(5000, remaining / 3));
    this.renewTimer = setInterval(() => this.renew(), every);
  }

  async renew() {
    const task = this.task;
    if (!task) return;
    const video = this.workspace.querySelector("video");
    const watching = video && !video.paused;
    if (Date.now() - this.lastActivity > IDLE_LIMIT_MS && !watching) return; // abandoned: let it expire
    try {
      const data = await api("POST", `/api/tasks/${task.id}/renew/`, { retries: 2 });
      if (this.task === task && data && data.lease_expires) task.leaseExpires = Date.parse(data.lease_expires);
    } catch (err) {
      if (this.task !== task || this.finished.has(task.id)) return;
      if (err instanceof ApiError && [403, 404, 409, 410].includes(err.status)) this.onLeaseLost(err);
    }
  }

  updateLeaseClock() {
    if (!this.leaseEl) return;
    if (!this.task || !this.task.leaseExpires) {
      this.leaseEl.textContent = "";
      return;
    }
    const left = this.task.leaseExpires - Date.now();
    this.leaseEl.textContent = left > 0 ? `held ${formatClock(left)}` : "hold expired";
    this.leaseEl.classList.toggle("warning", left < 60000);
  }

  onLeaseLost(err) {
    clearInterval(this.renewTimer);
    this.storeLocal();
    this.notices.show(
      `Your hold on this task ended (${err.message}). Your answer is kept in this browser; take the task again to continue, or move on.`,
      { kind: "error", sticky: true, id: "lease", actions: [["Get a task", () => this.claim()]] },
    );
  }

  // ---- submit / skip ----
  idempotencyKey() {
    // One key per task, kept across reloads: a retry, a double click or a second tab all send
    // the same key and the server answers with the annotation it already made.
    const k = `statelab:idem:${this.task.id}`;
    let key = localStorage.getItem(k);
    if (!key) {
      key = uuid();
      localStorage.setItem(k, key);
    }
    return key;
  }

  async submit() {
    if (!this.task || !this.view || this.submitting) return;
    const reason = this.view.blocked ? this.view.blocked() : "";
    if (reason) {
      this.notices.show(reason, { kind: "warning", id: "blocked" });
      return;
    }
    const collected = this.view.collect();
    if (collected.error) {
      this.notices.show(collected.error, { kind: "error", id: "invalid" });
      if (collected.field && this.view.focusField) this.view.focusField(collected.field);
      return;
    }
    const task = this.task;
    this.submitting = true;
    performance.mark("statelab:submit");
    this.refreshSubmit();
    this.setStatus("Submitting…", "pending");
    clearTimeout(this.saveTimer);
    const key = this.idempotencyKey();
    try {
      const data = await api("POST", `/api/tasks/${task.id}/submit/`, {
        body: { result: collected.result, time_spent_ms: this.timeSpentMs() },
        headers: { "Idempotency-Key": key },
        retries: 4,
      });
      this.afterSubmit(task);
      const warnings = (data && data.warnings) || {};
      for (const [field, text] of Array.isArray(warnings) ? warnings.map((w, i) => [i, w]) : Object.entries(warnings)) {
        this.notices.show(`Submitted with a note on ${typeof field === "number" ? "the answer" : field.replace(/_/g, " ")}: ${typeof text === "string" ? text : describeError(text)}`, { kind: "warning" });
      }
      this.doneCount += 1;
      if (this.countEl) this.countEl.textContent = String(this.doneCount);
      this.notices.show("Submitted.", { kind: "ok", id: "submitted" });
      this.submitting = false;
      await this.claim();
    } catch (err) {
      this.submitting = false;
      if (this.task !== task) return;
      this.refreshSubmit();
      if (err instanceof ApiError && err.status === 400) {
        this.setStatus("Not submitted", "error");
        this.notices.show(`Not submitted — ${err.message}`, { kind: "error", id: "invalid", sticky: true });
        const field = errorField(err.body);
        if (field && this.view.focusField) this.view.focusField(field);
      } else if (err instanceof ApiError && err.status === 409 && err.body && err.body.annotation && err.body.annotation.task === task.id) {
        // Submitted before with a different answer (another tab, an earlier submit): the server
        // keeps the first answer, so this task is done; nothing here is worth keeping.
        this.afterSubmit(task);
        this.setStatus("Already submitted", "error");
        this.notices.show(`Not submitted: ${err.message}`, { kind: "error", sticky: true, id: "stale", actions: [["Next task", () => this.claim()]] });
      } else if (err instanceof ApiError && err.status === 409) {
        this.setStatus("Not submitted", "error");
        this.storeLocal();
        this.notices.show(
          `Not submitted: ${err.message} Your answer is kept in this browser.`,
          { kind: "error", sticky: true, id: "stale", actions: [["Next task", () => this.claim()]] },
        );
      } else {
        this.setStatus("Not submitted — kept in this browser", "error");
        this.notices.show(`Not submitted: ${err.message} Press Submit again; it will not be counted twice.`, { kind: "error", id: "neterr", sticky: true });
      }
    }
  }

  afterSubmit(task) {
    this.finished.add(task.id);
    try {
      localStorage.removeItem(this.localKey(task));
      localStorage.removeItem(`statelab:idem:${task.id}`);
    } catch {
      /* ignore */
    }
  }

  async skip() {
    if (!this.task || this.submitting) return;
    const task = this.task;
    this.skipBtn.disabled = true;
    try {
      await api("POST", `/api/tasks/${task.id}/skip/`, { retries: 3 });
      this.afterSubmit(task);
      this.notices.show("Skipped.", { kind: "info", id: "submitted" });
      await this.claim();
    } catch (err) {
      this.skipBtn.disabled = false;
      this.notices.show(`Could not skip: ${err.message}`, { kind: "error", id: "skip" });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Shared widgets
// ---------------------------------------------------------------------------------------------

/** An image that zooms under the pointer on hover; a click locks a stronger zoom. */
export function zoomableImage(url, alt, label) {
  const img = h("img", { src: url, alt, draggable: "false" });
  const frame = h("div", { class: "zoomable", tabindex: "0", title: "Hover to zoom, click to lock a stronger zoom" }, img);
  let locked = false;
  const place = (e) => {
    const r = frame.getBoundingClientRect();
    const x = ((e.clientX - r.left) / r.width) * 100;
    const y = ((e.clientY - r.top) / r.height) * 100;
    img.style.transformOrigin = `${x}% ${y}%`;
  };
  frame.addEventListener("mousemove", place);
  frame.addEventListener("mouseenter", (e) => {
    place(e);
    frame.classList.add("zoom");
  });
  frame.addEventListener("mouseleave", () => {
    if (!locked) frame.classList.remove("zoom");
  });
  frame.addEventListener("click", (e) => {
    locked = !locked;
    place(e);
    frame.classList.toggle("zoom-locked", locked);
    frame.classList.add("zoom");
  });
  return h("figure", { class: "media-figure" }, frame, label ? h("figcaption", {}, label) : null);
}

export function videoPlayer(url, label, { loop = false, muted = false } = {}) {
  const video = h("video", { src: url, controls: true, preload: "auto", playsinline: true });
  video.loop = loop;
  video.muted = muted;
  return { video, figure: h("figure", { class: "media-figure video" }, video, label ? h("figcaption", {}, label) : null) };
}

/** Wire a page's root element to a workflow module. */
export function startWorkbench(workflow) {
  const root = document.querySelector("[data-workbench]");
  const bench = new Workbench({ root, slug: root.dataset.project, workflow });
  window.statelabWorkbench = bench; // for debugging and the browser tests
  bench.start();
  return bench;
}
