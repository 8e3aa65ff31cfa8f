// Drafts: the local copy in localStorage (nothing is lost offline or when the tab closes) and
// the versioned server autosave, with the choice offered when another tab saved first.
// A layer of Workbench (task_loop.js: withDrafts(Base) adds these methods), kept here so the task
// loop reads on its own.
import { ApiError, api } from "./api.js";

const AUTOSAVE_DELAY_MS = 700;

export const withDrafts = (Base) => class extends Base {
  // Kept per annotator and item, not per task: when a lost task is claimed again the item comes
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

  // `unsaved`: the copy must win over the server's when the item comes back (a lapsed lease).
  storeLocal({ unsaved = this.dirty } = {}) {
    if (!this.task || !this.view || this.loggingOut) return;
    try {
      localStorage.setItem(this.localKey(), JSON.stringify({ draft: this.currentDraft(), baseVersion: this.task.version, dirty: unsaved, at: Date.now() }));
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
    const sentAt = Date.now();
    // A retry after a lost response resends this very body and version (api() reuses the
    // request), so the server recognises the replay of a save it already made and accepts it.
    this.saving = api("PUT", `/api/tasks/${task.id}/draft/`, { body: { draft, version: task.version }, retries: 2 });
    try {
      const data = await this.saving;
      if (this.task !== task) return;
      task.version = data.version;
      if (data.lease_expires) this.leaseExtended(task, data, sentAt);
      this.storeLocal();
      if (!this.dirty) this.setStatus("Saved", "ok");
    } catch (err) {
      if (this.task !== task || this.finished.has(task.id)) return;
      this.dirty = true;
      this.storeLocal();
      // 409 means either a newer draft from another tab, or a task that is gone (expired and
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
    if (!this.task || !this.view || !this.dirty || this.conflict || this.loggingOut) return;
    this.tickClock();
    this.storeLocal();
    // keepalive: survives the page going away; the local copy covers a failure.
    api("PUT", `/api/tasks/${this.task.id}/draft/`, { body: { draft: this.currentDraft(), version: this.task.version }, keepalive: true })
      .then((data) => {
        if (this.task) {
          this.task.version = data.version;
          this.dirty = false;
          this.storeLocal();
          this.setStatus("Saved", "ok");
        }
      })
      .catch(() => undefined);
  }

  /** Before a logout: save the draft while the session lasts; keep nothing in this browser after. */
  async beforeLogout() {
    this.loggingOut = true;
    if (this.dirty && this.task && this.view && !this.conflict) await this.saveDraft();
  }

  onDraftConflict(err) {
    this.conflict = true;
    this.setStatus("Conflict", "error");
    const serverVersion = err.body && err.body.version;
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
      fresh = { ...this.lastData, draft: serverDraft, version: serverVersion, lease_expires: new Date(task.leaseExpires || Date.now()).toISOString(),
                endsAt: task.leaseExpires, renewedAt: task.renewedAt };
    } else if (choice === "theirs" || serverVersion === undefined || serverVersion === null) {
      // Asking for the next task returns this user's active task, with the stored draft.
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
    task.version = serverVersion ?? (fresh && fresh.task === task.id ? fresh.version : task.version);
    this.dirty = true;
    await this.saveDraft();
  }
};
