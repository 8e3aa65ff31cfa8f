// Messages above the workspace: info, warnings and errors, with optional action buttons.
import { h } from "./dom.js";

export class Notices {
  constructor(el) {
    this.el = el;
  }

  show(text, { kind = "info", actions = [], sticky = false, id = null, detail = null } = {}) {
    if (id) this.clear(id);
    // A passing confirmation ("Submitted.") floats over the page (.toast, static/css/workbench.css)
    // so the workspace below never moves; problems and anything to act on stay in the flow.
    const toast = !sticky && !actions.length && !detail && (kind === "ok" || kind === "info");
    const li = h("li", { class: `notice ${kind}${toast ? " toast" : ""}`, role: kind === "error" ? "alert" : "status", dataset: { id: id || "" } }, h("span", {}, text, detail));
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

  /** Drop every error and warning: after a successful submit they are about a task now done. */
  clearProblems() {
    for (const li of this.el.querySelectorAll("li.notice.error, li.notice.warning")) li.remove();
  }
}
