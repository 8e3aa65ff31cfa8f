// A two-tab (or two-window) double submit: the server keeps the first answer and answers 409 with
// it. Shown as words and a side-by-side table (this tab's answer, the stored one), never as a dump.
import { h } from "./dom.js";

/** {"scores.subject": "4", "flags": "ambiguous, wrong ground truth", ...} from a result object. */
export function flattenAnswer(value, prefix = "", out = {}) {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, inner] of Object.entries(value)) {
      if (key.startsWith("_")) continue; // bookkeeping (time on task), not part of the answer
      flattenAnswer(inner, prefix ? `${prefix}.${key}` : key, out);
    }
    if (!Object.keys(value).length && prefix) out[prefix] = "—";
    return out;
  }
  const text = (v) => (v === null || v === undefined || v === "" ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v));
  out[prefix || "answer"] = Array.isArray(value) ? (value.length ? value.map(text).join(", ") : "—") : text(value);
  return out;
}

function fieldLabel(path) {
  return path.split(".").map((p) => p.replace(/_/g, " ")).join(" · ");
}

/** The table under the conflict notice: one row per field, differing rows marked. */
export function conflictDetail(yours, stored) {
  const mine = flattenAnswer(yours || {});
  const kept = flattenAnswer(stored || {});
  const fields = [...new Set([...Object.keys(kept), ...Object.keys(mine)])];
  return h("table", { class: "conflict", "data-conflict": "" },
    h("thead", {}, h("tr", {}, h("th", {}, "Field"), h("th", {}, "Your answer here (not saved)"), h("th", {}, "Stored answer (kept)"))),
    h("tbody", {}, fields.map((f) => {
      const a = mine[f] ?? "—";
      const b = kept[f] ?? "—";
      return h("tr", { class: a === b ? "" : "differs", dataset: { field: f } },
        h("th", { scope: "row" }, fieldLabel(f)), h("td", { "data-yours": "" }, a), h("td", { "data-stored": "" }, b));
    })));
}
