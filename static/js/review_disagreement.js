// The disagreement an item was marked for (annotation/disagreement.py): which fields or criteria,
// why (a spread, a low box overlap, different answers), and each annotator's value, in the
// annotator's colour (each field with the annotation form's label, as the API sends it:
// annotation/selectors.py item_review_detail); and the review queue's order (disagreements
// first, then oldest first).
import { h } from "./workbench/dom.js";

function why(entry) {
  if (entry.kind === "spread") return `scores spread by ${entry.spread} points`;
  if (entry.kind === "na") return "N/A for some raters, a score for others";
  if (entry.kind === "iou") return `boxes overlap little (lowest IoU ${entry.min_iou})`;
  if (entry.kind === "outcome") return "a box against no box, or different outcomes";
  if (entry.kind === "state") return "different state labels";
  if (entry.kind === "answer") return "different answers";
  return "different values";
}

function show(value) {
  if (value === null || value === undefined) return "N/A";
  if (Array.isArray(value)) return value.length ? `[${value.join(", ")}]` : "(none)";
  return String(value);
}

/** The panel: one row per disputed field, one cell per annotator. */
export function disagreementPanel(disagreement, annotations, colors, workflow) {
  const byId = new Map(annotations.map((a, i) => [a.id, { name: a.annotator || "?", color: colors[i % colors.length] }]));
  const rows = (disagreement.fields || []).map((entry) => h("tr", { dataset: { field: entry.field, kind: entry.kind } },
    h("th", {}, entry.label, h("div", { class: "muted small" }, why(entry))),
    h("td", {}, h("ul", { class: "values" }, entry.values.map((v) => {
      const who = byId.get(v.annotation) || { name: `#${v.annotation}`, color: "#888" };
      return h("li", { dataset: { annotation: String(v.annotation) } },
        h("span", { class: "swatch", style: { borderColor: who.color } }), h("b", {}, who.name), ": ",
        h("span", { "data-value": "" }, show(v.value)));
    })))));
  return h("section", { class: "card disagreement", "data-disagreement": "" },
    h("h2", {}, "Disagreement to adjudicate"),
    h("p", { class: "muted small" }, "The annotators differ beyond the project's thresholds on these fields. ",
      workflow === "rating"
        ? "Accepting keeps the raters' mean; edit the ratings to adjudicate: the edited scores then stand for the raters' in the Human scores (the raters' own agreement still uses their ratings)."
        : "Accept the right annotation, or edit a merged answer: the settled value is what releases and analysis use."),
    h("table", { class: "grid" }, h("tbody", {}, rows)));
}

/** A number that sorts items as the review queue does (disputed or sent back to review first). */
export function queueOrder(it) {
  const disputed = it.disputed ?? ((it.disagreement || []).length > 0 || Boolean(it.reopened));
  return (disputed ? 0 : 2 ** 40) + Number(it.id);
}
