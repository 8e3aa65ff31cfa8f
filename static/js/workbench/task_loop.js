// The task loop of every annotator page: claim a task, show it through the workflow module,
// and after a submit or skip claim the next. Drafts, the lease and submitting are layers over the
// loop (drafts.js, lease.js, submit.js): Workbench = withSubmit(withLease(withDrafts(TaskLoop))).
import { onLogout } from "../session.js";
import { api, queueDoneReason } from "./api.js";
import { h } from "./dom.js";
import { withDrafts } from "./drafts.js";
import { leaseEndsAt, withLease } from "./lease.js";
import { mediaOf, pageForm, preloadMedia } from "./media.js";
import { Notices } from "./notices.js";
import { Shortcuts } from "./shortcuts.js";
import { withSubmit } from "./submit.js";

/**
 * Runs one annotator's session: claim, show, autosave, renew, submit, claim the next.
 *
 * workflow = {name, mount(container, item, draft, ctx) -> view}; ctx.form is the page's form
 *   description (media fields [{field, kind, label}], a rating form's criteria)
 * view = {collect() -> {result} | {error, field}, draft() -> object, focusField?(name),
 *         blocked?() -> reason string or "", destroy?()}
 */
class TaskLoop {
  constructor({ root, slug, workflow }) {
    this.root = root;
    this.slug = slug;
    this.workflow = workflow;
    // The form's protocol facts (media fields, criteria) the page carries; passed to mount as ctx.form.
    this.form = pageForm();
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
      // "?" works wherever it cannot be meant as text (also in number boxes); F1 works everywhere.
      this.shortcuts.register("?", "Show keyboard shortcuts (in a text box: F1)", open, { group: "Page", inInputs: "except-free-text" });
      this.shortcuts.register("f1", "Show keyboard shortcuts (in a text box: F1)", open, { group: "Page", inInputs: true });
      root.querySelector("[data-help-open]")?.addEventListener("click", open);
    }
    this.watchActivity();
    // Logging out saves the draft to the server first; then session.js clears this browser's copy.
    onLogout(() => this.beforeLogout());
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
    // A preload not started yet (its short timer after load) would now claim beside this claim.
    clearTimeout(this.preloadTimer);
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
    await preloadMedia(mediaOf(data.item, this.form.media), { timeoutMs: 3000 });
    this.load(data);
  }

  showDone() {
    this.unload();
    // A crowd-study participant whose tasks ran out goes to the study's finish page (the code).
    if (this.root.dataset.finishUrl) {
      window.location.assign(this.root.dataset.finishUrl);
      return;
    }
    const reason = queueDoneReason();
    this.workspace.replaceChildren(
      h("section", { class: "card done", "data-queue-empty": "" },
        h("h2", {}, "Nothing left for you in this project"),
        h("p", { "data-queue-reason": reason ? "" : null },
          reason || "Every item has its annotations, or the remaining ones are in someone else's task. Check again later."),
        h("button", { type: "button", class: "primary", onclick: () => this.claim() }, "Check again")),
    );
    this.taskEl.textContent = "none left";
    this.taskEl.title = "";
    this.submitBtn.disabled = true;
    this.skipBtn.disabled = true;
    this.setStatus("");
    this.updateLeaseClock(); // no task, no lease: clear the clock now, not at its next tick
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
    // A preload that raced with a plain claim may have claimed this very task: never offer it again.
    if (this.preloaded && this.preloaded.task === data.task) this.preloaded = null;
    this.task = {
      id: data.task,
      item: data.item,
      version: data.version,
      leaseExpires: data.endsAt ?? leaseEndsAt(data),
      renewedAt: data.renewedAt ?? Date.now(), // when the server last extended the lease (this clock)
    };
    this.root.dataset.task = String(data.task);
    this.showProgress(data.progress, this.doneCount - (data.doneAtFetch ?? this.doneCount));
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
      form: this.form,
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

  /**
   * Where the annotator stands: "3 of 20 left" (the task shown counts as left) from the claim's
   * `progress` ({done, left}: annotation/selectors.py annotator_progress); never a database id.
   * A preloaded task's figures were counted before the `since` submits made here after it came:
   * each of those moved one item from left to done.
   */
  showProgress(progress, since = 0) {
    if (!progress || !Number.isInteger(progress.left) || !Number.isInteger(progress.done)) {
      this.taskEl.textContent = "";
      this.taskEl.title = "";
      return;
    }
    const done = progress.done + since;
    const left = Math.max(1, progress.left - since);
    // `capped`: more items are open than the server counts; the figure is a floor.
    this.taskEl.textContent = progress.capped ? `${left}+ left` : `${left} of ${done + left} left`;
    this.taskEl.title = `You have done ${done} here; ${left} to go, this one included.`;
  }

  refreshSubmit() {
    if (!this.view || !this.task) return;
    const reason = this.view.blocked ? this.view.blocked() : "";
    this.submitBtn.disabled = Boolean(reason) || this.submitting;
    this.submitBtn.title = reason || "Submit (Ctrl+Enter)";
  }
}

export class Workbench extends withSubmit(withLease(withDrafts(TaskLoop))) {}

/** Wire a page's root element to a workflow module. */
export function startWorkbench(workflow) {
  const root = document.querySelector("[data-workbench]");
  const bench = new Workbench({ root, slug: root.dataset.project, workflow });
  window.statelabWorkbench = bench; // for debugging and the browser tests
  bench.start();
  return bench;
}
