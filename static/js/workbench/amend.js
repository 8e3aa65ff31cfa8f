// Amend mode of an annotate page (/projects/<slug>/my-work/<annotation>/): the annotator's own
// earlier answer in the workflow's usual form; saving sends it to /api/annotations/<id>/amend/.
// The item has no active task (it was submitted), so there is no queue, lease, draft autosave, skip or
// next task here: nothing changes on the server until the annotator saves. The server refuses
// (409) once a reviewer has settled the item, and the page says so.
import { ApiError, api } from "./api.js";
import { mediaOf, preloadMedia } from "./media.js";
import { Workbench } from "./task_loop.js";

/** The workflow form's draft for a stored result (the forms read drafts, not results). */
export function draftFromResult(workflow, result) {
  const draft = { ...result };
  if (workflow === "quintuplet") {
    (result.change_distractors || []).forEach((text, i) => { draft[`distractor_${i}`] = text; });
    delete draft.change_distractors;
  }
  if (workflow === "rating") draft.watched = true; // the video was watched through when first rated
  return draft;
}

export class AmendBench extends Workbench {
  constructor(options) {
    super(options);
    this.annotationId = Number(options.root.dataset.amend);
    this.closed = false;
  }

  async start() {
    this.setStatus("Loading…");
    let data;
    try {
      data = await api("GET", `/api/annotations/${this.annotationId}/`, { retries: 2 });
    } catch (err) {
      this.setStatus("Not loaded", "error");
      this.notices.show(`Could not load your answer: ${err.message}`, { kind: "error", sticky: true, id: "claim" });
      return;
    }
    await preloadMedia(mediaOf(data.item, this.form.media), { timeoutMs: 3000 });
    this.load({ task: `amend-${data.id}`, item: data.item, draft: draftFromResult(this.workflow.name, data.result), version: 0, endsAt: 0 });
    const when = new Date(data.submitted_at).toLocaleString();
    this.taskEl.textContent = `Your answer of ${when} · item #${data.item.id}` + (data.revisions.length ? ` · amended ${data.revisions.length}×` : "");
    if (!data.amendable) this.close("This item was reviewed already, so your answer can no longer be changed.");
  }

  close(message) {
    this.closed = true;
    this.refreshSubmit();
    this.setStatus("Closed", "error");
    this.notices.show(message, { kind: "error", sticky: true, id: "stale", actions: [["Back to the project", () => this.leave()]] });
  }

  leave() {
    window.location.assign(`/projects/${this.slug}/#my-work`);
  }

  refreshSubmit() {
    super.refreshSubmit();
    if (this.closed) this.submitBtn.disabled = true;
  }

  async submit() {
    if (!this.task || !this.view || this.submitting || this.closed) return;
    const collected = this.collectAnswer();
    if (!collected) return;
    this.submitting = true;
    this.refreshSubmit();
    this.setStatus("Saving…", "pending");
    try {
      // Safe to retry: the same answer again changes nothing.
      const data = await api("POST", `/api/annotations/${this.annotationId}/amend/`, {
        body: { result: collected.result, time_spent_ms: this.timeSpentMs() }, retries: 3 });
      this.activeMs = 0; // that time is counted now
      this.dirty = false;
      this.notices.clearProblems();
      this.setStatus(data.changed ? "Amended" : "No change", "ok");
      this.root.dataset.amended = data.changed ? "1" : "0";
      this.notices.show(
        data.changed ? "Amended: this answer now counts; the earlier one is kept in the history."
          : "Nothing changed: this is the answer already saved.",
        { kind: "ok", id: "submitted", sticky: true, actions: [["Back to the project", () => this.leave()]] });
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) {
        this.showInvalid(err, "Not saved");
      } else if (err instanceof ApiError && err.status === 409) {
        this.close(`Not saved: ${err.message}`);
      } else {
        this.setStatus("Not saved", "error");
        this.notices.show(`Not saved: ${err.message} Press Save again.`, { kind: "error", id: "neterr", sticky: true });
      }
    } finally {
      this.submitting = false;
      this.refreshSubmit();
    }
  }

  // Nothing of the task loop applies to an answer already submitted.
  async claim() { this.leave(); }
  async skip() {}
  readLocal() { return null; }
  storeLocal() {}
  scheduleSave() {}
  async saveDraft() {}
  flushDraft() {}
  async beforeLogout() {}
  startLeaseTimer() {}
  updateLeaseClock() { if (this.leaseEl) this.leaseEl.textContent = ""; }
  async renew() {}
  async preloadNext() {}
  backFromIdle() {}
}
