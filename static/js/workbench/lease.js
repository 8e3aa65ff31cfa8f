// The task lease: renewing the hold while the annotator works, the hold clock, a lost hold, and
// holding and preloading the next task so it appears at once after a submit.
// Methods of Workbench (task_loop.js), kept here so the task loop reads on its own.
import { ApiError, api } from "./api.js";
import { mediaOf, preloadMedia } from "./media.js";

const IDLE_LIMIT_MS = 15 * 60 * 1000; // stop renewing the lease after 15 idle minutes

function formatClock(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

export const leaseMethods = {
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
  },

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
  },

  startLeaseTimer() {
    clearInterval(this.renewTimer);
    const remaining = this.task.leaseExpires ? this.task.leaseExpires - Date.now() : 300000;
    // Renew at a third of the lease so one failed renewal still leaves time for the next.
    const every = Math.min(120000, Math.max(5000, remaining / 3));
    this.renewTimer = setInterval(() => this.renew(), every);
  },

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
  },

  updateLeaseClock() {
    if (!this.leaseEl) return;
    if (!this.task || !this.task.leaseExpires) {
      this.leaseEl.textContent = "";
      return;
    }
    const left = this.task.leaseExpires - Date.now();
    this.leaseEl.textContent = left > 0 ? `held ${formatClock(left)}` : "hold expired";
    this.leaseEl.classList.toggle("warning", left < 60000);
  },

  onLeaseLost(err) {
    clearInterval(this.renewTimer);
    this.storeLocal();
    this.notices.show(
      `Your hold on this task ended (${err.message}). Your answer is kept in this browser; take the task again to continue, or move on.`,
      { kind: "error", sticky: true, id: "lease", actions: [["Get a task", () => this.claim()]] },
    );
  },
};
