// The task lease: renewing it while the annotator works, the lease clock, a lost task, and
// claiming and preloading the next task so it appears at once after a submit.
// A layer of Workbench (task_loop.js: withLease(Base) adds these methods), kept here so the task
// loop reads on its own.
//
// A lease is renewed only while someone is at the page: each renewal needs activity (keys,
// pointer, typing, scrolling, a video playing through) since the server last extended the lease.
// A page left alone stops renewing, so its task (and the preloaded next one) go back to the
// queue one lease after the person left, and one forgotten tab cannot starve everyone else.
// When the person comes back the page says the lease lapsed while they were away and offers to
// go on; their answer is kept in this browser and comes back whenever the item does.
import { ApiError, api, serverClockOffset } from "./api.js";
import { sleep } from "./dom.js";
import { mediaOf, preloadMedia } from "./media.js";

/** How long a claim waits for a preload still in flight before claiming on its own. */
const PRELOAD_WAIT_MS = 15000;

const ACTIVITY_EVENTS = ["keydown", "pointerdown", "pointermove", "input", "wheel", "scroll", "touchstart"];
// A lease this close to its end when the person comes back counts as lapsed: a renewal sent now
// could arrive after it ended.
const LAPSE_MARGIN_MS = 5000;

function formatClock(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

function formatAway(ms) {
  const minutes = Math.round(ms / 60000);
  return minutes < 2 ? "a minute" : `${minutes} minutes`;
}

/** When the lease the server describes ends, on this browser's clock. */
export function leaseEndsAt(data) {
  return data && data.lease_expires ? Date.parse(data.lease_expires) + serverClockOffset() : null;
}

export const withLease = (Base) => class extends Base {
  /**
   * Claim the task after this one and download its media while the annotator works, so the next
   * task appears at once after a submit. The server lets a page have its task plus one more; the
   * current task is excluded so the server hands out a different one.
   */
  async preloadNext() {
    const current = this.task;
    if (!current || this.preloaded || this.preloading) return;
    // Kept while in flight: a claim made meanwhile waits for it (takePreloaded), see there.
    const doneBefore = this.doneCount; // the server counts its progress before any submit sent after this
    const inFlight = (async () => {
      try {
        const data = await api("POST", `/api/projects/${this.slug}/tasks/next/`, { body: { exclude: [current.id] }, retries: 1 });
        if (data && data.task !== current.id && (!this.task || data.task !== this.task.id)) {
          data.renewedAt = Date.now();
          data.endsAt = leaseEndsAt(data);
          data.doneAtFetch = doneBefore; // its progress predates the submits made until it is shown
          this.preloaded = data;
          preloadMedia(mediaOf(data.item, this.form.media), { timeoutMs: 60000 });
        }
      } catch {
        /* preloading is an optimisation; the next claim after submit still works */
      } finally {
        if (this.preloading === inFlight) this.preloading = false; // (runs after an await: inFlight is set)
      }
    })();
    this.preloading = inFlight;
    await inFlight;
  }

  async takePreloaded() {
    // A preload still in flight is waited for, never raced: the server claims with SKIP LOCKED, so
    // a second claim arriving while the preload's transaction holds the last free item skips it
    // and answers "nothing left" although that item is on its way to this very page. (Bounded: a
    // preload that hangs must not hang the page; the plain claim then goes ahead.)
    if (this.preloading) {
      const inFlight = this.preloading;
      await Promise.race([inFlight, sleep(PRELOAD_WAIT_MS)]);
      // Still hanging: forget it (a late answer may still fill `preloaded`; load() never offers the
      // task shown twice), so later tasks preload again and later claims do not wait for it.
      if (this.preloading === inFlight) this.preloading = false;
    }
    const next = this.preloaded;
    this.preloaded = null;
    if (!next || (this.lastData && next.task === this.lastData.task)) return null;
    const left = next.endsAt ? next.endsAt - Date.now() : 0;
    if (left > 60000) {
      // The lease is still good for a while: show the task at once; the lease timer renews it.
      setTimeout(() => this.renew(), 0);
      return next;
    }
    try {
      // The lease may have run out while the previous task took long: confirm it first.
      const renewed = await api("POST", `/api/tasks/${next.task}/renew/`, { retries: 1 });
      if (renewed && renewed.lease_expires) {
        next.lease_expires = renewed.lease_expires;
        next.renewedAt = Date.now();
        next.endsAt = leaseEndsAt(renewed);
      }
      return next;
    } catch {
      return null;
    }
  }

  /** Note what a person does on the page; a page that was left alone wakes up on the first sign. */
  watchActivity() {
    this.lastActivity = Date.now();
    this.playedTo = new WeakMap(); // video -> the position its last timeupdate reported
    this.repeating = new WeakSet(); // looping videos gone round since the person last did anything
    const active = () => this.noteActivity();
    for (const type of ACTIVITY_EVENTS) document.addEventListener(type, active, { capture: true, passive: true });
    // Media events do not bubble; a capturing listener on the document still sees them.
    document.addEventListener("play", active, { capture: true });
    document.addEventListener("timeupdate", (e) => this.notePlayback(e.target), { capture: true, passive: true });
  }

  noteActivity() {
    this.repeating = new WeakSet();
    this.wake();
  }

  wake() {
    const idleSince = this.lastActivity;
    this.lastActivity = Date.now();
    if (this.renewalPaused) {
      this.renewalPaused = false;
      this.backFromIdle(idleSince);
    }
  }

  /**
   * A video playing counts as someone watching it, once through: the repeats of a looping video
   * left alone do not, until the person does something again.
   */
  notePlayback(video) {
    if (!(video instanceof HTMLMediaElement) || video.paused) return;
    const last = this.playedTo.get(video) ?? 0;
    this.playedTo.set(video, video.currentTime);
    if (video.loop && video.currentTime < last && last > video.duration - 1) this.repeating.add(video);
    if (!this.repeating.has(video)) this.wake();
  }

  startLeaseTimer() {
    clearInterval(this.renewTimer);
    const remaining = this.task.leaseExpires ? this.task.leaseExpires - Date.now() : 300000;
    // Renew at a third of the lease so one failed renewal still leaves time for the next.
    const every = Math.min(120000, Math.max(5000, remaining / 3));
    this.renewTimer = setInterval(() => this.renew(), every);
  }

  /** The server extended `task`'s lease with this answer (a claim, renewal or autosave). */
  leaseExtended(task, data, sentAt) {
    task.leaseExpires = leaseEndsAt(data);
    task.renewedAt = Math.max(task.renewedAt || 0, sentAt);
    if (this.lapsed === task) {
      // Typing after a lapse saved the draft, which made the task active again: go on as before.
      this.lapsed = null;
      this.notices.clear("lease");
      this.startLeaseTimer();
    }
  }

  async renew() {
    const task = this.task;
    if (!task || this.lapsed === task) return;
    if (this.lastActivity <= task.renewedAt) {
      // Nobody has been at the page since the lease was last extended: let it run down.
      this.renewalPaused = true;
      return;
    }
    const sentAt = Date.now();
    task.renewedAt = sentAt; // what the person did until now is answered by this renewal
    try {
      const data = await api("POST", `/api/tasks/${task.id}/renew/`, { retries: 2 });
      if (this.task === task && data && data.lease_expires) this.leaseExtended(task, data, sentAt);
    } catch (err) {
      if (this.task !== task || this.finished.has(task.id)) return;
      if (err instanceof ApiError && [403, 404, 409, 410].includes(err.status)) this.onLeaseLost(err);
    }
  }

  /** The person is back after renewals paused: renew at once, or say that the lease lapsed. */
  backFromIdle(idleSince) {
    const task = this.task;
    if (!task || this.lapsed === task || this.finished.has(task.id)) return;
    if (task.leaseExpires && task.leaseExpires - Date.now() < LAPSE_MARGIN_MS) this.onLeaseLapsed(task, idleSince);
    else this.renew();
  }

  onLeaseLapsed(task, idleSince) {
    this.lapsed = task;
    clearInterval(this.renewTimer);
    const away = Date.now() - idleSince;
    // Marked unsaved, so the answer comes back if the item is offered again as a new task.
    if (this.dirty || task.version > 0) this.storeLocal({ unsaved: true });
    this.setStatus("Lease lapsed", "error");
    this.notices.show(
      `Your lease on this task lapsed while you were away (about ${formatAway(away)} without activity), so the item went back to the queue. Your answer is kept in this browser.`,
      { kind: "warning", sticky: true, id: "lease", actions: [["Continue", () => this.continueAfterLapse(task)]] },
    );
  }

  /** Take the lapsed task again if nobody took it meanwhile; otherwise claim the next one. */
  async continueAfterLapse(task) {
    if (this.task !== task) return;
    const sentAt = Date.now();
    try {
      const data = await api("POST", `/api/tasks/${task.id}/renew/`, { retries: 2 });
      if (this.task !== task) return;
      this.lapsed = null;
      this.leaseExtended(task, data, sentAt);
      this.startLeaseTimer();
      this.updateLeaseClock();
      this.setStatus(this.dirty ? "Unsaved changes" : "Saved", this.dirty ? "pending" : "ok");
      this.notices.show("The task is yours again.", { kind: "ok", id: "lease" });
    } catch (err) {
      if (this.task !== task) return;
      if (err instanceof ApiError) {
        // Someone else has the item now (or it is settled): go on with the next task; this
        // item's answer stays in the browser for when it is offered again.
        this.lapsed = null;
        await this.claim();
      } else {
        this.notices.show(`Could not take the task again: ${err.message}`, {
          kind: "error", sticky: true, id: "lease", actions: [["Try again", () => this.continueAfterLapse(task)]],
        });
      }
    }
  }

  updateLeaseClock() {
    if (!this.leaseEl) return;
    if (!this.task || !this.task.leaseExpires) {
      this.leaseEl.textContent = "";
      return;
    }
    const left = this.task.leaseExpires - Date.now();
    this.leaseEl.textContent = left > 0 ? `lease ${formatClock(left)}` : "lease expired";
    this.leaseEl.classList.toggle("warning", left < 60000);
  }

  onLeaseLost(err) {
    clearInterval(this.renewTimer);
    this.storeLocal();
    this.notices.show(
      `Your task ended (${err.message}). Your answer is kept in this browser; take the task again to continue, or move on.`,
      { kind: "error", sticky: true, id: "lease", actions: [["Get a task", () => this.claim()]] },
    );
  }
};
