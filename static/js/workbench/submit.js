// Submitting and skipping a task: one idempotency key per task, retries, and what each refusal
// means for the answer typed.
// A layer of Workbench (task_loop.js: withSubmit(Base) adds these methods), kept here so the task
// loop reads on its own.
import { ApiError, api, describeError, errorField } from "./api.js";
import { conflictDetail } from "./conflict.js";
import { uuid } from "./dom.js";

export const withSubmit = (Base) => class extends Base {
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

  /** The form's answer, ready to send; or null after saying what is missing (and focusing it). */
  collectAnswer() {
    const reason = this.view.blocked ? this.view.blocked() : "";
    if (reason) {
      this.notices.show(reason, { kind: "warning", id: "blocked" });
      return null;
    }
    const collected = this.view.collect();
    if (collected.error) {
      this.notices.show(collected.error, { kind: "error", id: "invalid" });
      if (collected.field && this.view.focusField) this.view.focusField(collected.field);
      return null;
    }
    return collected;
  }

  /** The server refused the answer as invalid (400): say why (`status`: "Not submitted", "Not
   * saved") and focus the field it names. */
  showInvalid(err, status) {
    this.setStatus(status, "error");
    this.notices.show(`${status} — ${err.message}`, { kind: "error", id: "invalid", sticky: true });
    const field = errorField(err.body);
    if (field && this.view.focusField) this.view.focusField(field);
  }

  async submit() {
    if (!this.task || !this.view || this.submitting) return;
    const collected = this.collectAnswer();
    if (!collected) return;
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
      this.notices.clearProblems(); // an earlier refusal is about an answer that is now in
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
        this.showInvalid(err, "Not submitted");
      } else if (err instanceof ApiError && err.status === 409 && err.body && err.body.annotation && err.body.annotation.task === task.id) {
        // Submitted before with a different answer (another tab, an earlier submit): the server
        // keeps the first answer, so this task is done; nothing here is worth keeping.
        this.afterSubmit(task);
        this.setStatus("Already submitted", "error");
        this.notices.clearProblems();
        this.notices.show(
          "Not submitted: you had already submitted this task with a different answer (from another tab or window). "
            + "The first answer is the one kept; the one on this page was not saved. Both are below.",
          { kind: "error", sticky: true, id: "stale", actions: [["Next task", () => this.claim()]],
            detail: conflictDetail(collected.result, err.body.annotation.result) },
        );
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
};
