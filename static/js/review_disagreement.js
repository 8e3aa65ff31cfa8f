// The disagreement an item was marked for (annotation/disagreement.py): which fields or criteria,
// why (a spread, a low box overlap, different answers), and each annotator's value, in the
// annotator's colour; and the review queue's order (disagreements first, then oldest first).
import { OSC_CRITERIA } from "./oscbench.js";
import { h } from "./workbench/dom.js";

const CRITERION_LABELS = Object.fromEntries(OSC_CRITERIA);

/** The field as the annotation form names it: the label the API sends with each disputed field
 * (annotation/disagreement.py FIELD_LABELS, the rating form's criteria), else the key. */
function fieldLabel(entry) {
  if (entry.label) return entry.label;
  if (entry.field.startsWith("scores.")) return CRITERION_LABELS[entry.field.slice(7)] || entry.field.slice(7);
  return entry.field;
}

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
    h("th", {}, fieldLabel(entry), h("div", { class: "muted small" }, why(entry))),
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
