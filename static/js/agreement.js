// Progress and agreement of one project: items per status, a row per annotator (count, median
// time, gold accuracy, agreement with the others) and the workflow's agreement figures.
import { api } from "./workbench/api.js";
import { h } from "./workbench/dom.js";
import { pageForm } from "./workbench/media.js";
import { Notices } from "./workbench/notices.js";

const STATUS_ORDER = ["pending", "annotated", "verified", "discarded"];
// A rating form's criteria with their labels, from the page (annotation/selectors.py workflow_form).
const CRITERION_LABELS = Object.fromEntries((pageForm().criteria || []).map((c) => [c.key, c.label]));

const pct = (v) => (v === null || v === undefined ? "—" : `${(v * 100).toFixed(1)} %`);
const num = (v, d = 3) => (v === null || v === undefined ? "—" : typeof v === "number" ? String(Number(v.toFixed(d))) : String(v));
const label = (key) => key.replace(/_/g, " ");

function bar(v) {
  if (v === null || v === undefined) return "";
  return h("span", { class: "bar", style: `width:${Math.max(0, Math.min(1, v)) * 4}em` });
}

function statusCards(el, counts, goldItems) {
  const keys = [...STATUS_ORDER.filter((k) => k in counts), ...Object.keys(counts).filter((k) => !STATUS_ORDER.includes(k))];
  const total = keys.reduce((s, k) => s + (counts[k] || 0), 0);
  el.replaceChildren(
    h("div", { class: "stat", dataset: { status: "total" } }, h("span", { class: "muted" }, "items"), h("b", {}, String(total))),
    ...keys.map((k) => h("div", { class: "stat", dataset: { status: k } }, h("span", { class: "muted" }, k), h("b", {}, String(counts[k] || 0)))),
    // Gold items stay in the queue for good, so they are counted apart from progress.
    ...(goldItems ? [h("div", { class: "stat", dataset: { status: "gold" }, title: "known-answer items mixed into the queue; not part of progress" },
      h("span", { class: "muted" }, "gold"), h("b", {}, String(goldItems)))] : []),
  );
  return total ? ((counts.verified || 0) + (counts.discarded || 0)) / total : 0;
}

function annotatorTable(table, annotators) {
  if (!annotators.length) {
    table.replaceChildren(h("tbody", {}, h("tr", {}, h("td", { class: "muted" }, "No annotations yet."))));
    return;
  }
  // Careless-annotator hint: gold accuracy under 60 %, or agreement 0.25 below the median of all.
  const agreements = annotators.map((a) => a.agreement).filter((v) => v !== null && v !== undefined).sort((x, y) => x - y);
  const median = agreements.length ? agreements[Math.floor((agreements.length - 1) / 2)] : null;
  const careless = (a) => (a.gold_accuracy !== null && a.gold_accuracy !== undefined && a.gold_accuracy < 0.6)
    || (median !== null && a.agreement !== null && a.agreement !== undefined && agreements.length >= 3 && a.agreement < median - 0.25);
  table.replaceChildren(
    h("thead", {}, h("tr", {}, h("th", {}, "Annotator"), h("th", { class: "num" }, "Annotations"), h("th", { class: "num" }, "Median time / task"),
      h("th", { class: "num" }, "Gold items"), h("th", { class: "num" }, "Gold accuracy"), h("th", {}, "Agreement with others"), h("th", { class: "num" }, "Pairs"))),
    h("tbody", {}, annotators.map((a) => h("tr", { class: careless(a) ? "careless" : "", dataset: { annotator: a.annotator } },
      h("td", {}, a.annotator, careless(a) ? h("span", { class: "badge", title: "Low gold accuracy or agreement far below the others" }, " check") : null),
      h("td", { class: "num" }, String(a.annotations ?? "—")),
      h("td", { class: "num" }, a.median_seconds === null || a.median_seconds === undefined ? "—" : `${num(a.median_seconds, 1)} s`),
      h("td", { class: "num" }, String(a.gold_items ?? 0)),
      h("td", { class: "num" }, pct(a.gold_accuracy)),
      h("td", {}, bar(a.agreement), pct(a.agreement)),
      h("td", { class: "num" }, String(a.pairs ?? "—"))))),
  );
}

function keyValueTable(rows) {
  return h("table", { class: "grid", style: "max-width:640px" }, h("tbody", {}, rows.map(([k, v, attrs]) => h("tr", attrs || {}, h("th", {}, k), h("td", { class: "num" }, v)))));
}

function workflowFigures(el, titleEl, w) {
  const kind = w.kind;
  if (kind === "box") {
    titleEl.textContent = "Box agreement (IoU)";
    el.replaceChildren(keyValueTable([
      ["Items with ≥ 2 annotations", String(w.items ?? "—")],
      ["Annotator pairs that both drew a box", String(w.pairs_with_boxes ?? "—")],
      ["Mean IoU", num(w.mean_iou)],
      [`Consistent items (every pair IoU ≥ ${w.consistent_at ?? 0.5}, same state)`, pct(w.consistent_share), { "data-figure": "consistent_share" }],
    ]));
  } else if (kind === "qa") {
    titleEl.textContent = "Blind QA agreement";
    el.replaceChildren(keyValueTable([
      [`Blind-answer accuracy against the final truth (${w.truth || "verified items"})`, pct(w.accuracy), { "data-figure": "accuracy" }],
      ["Answers scored", String(w.answers_scored ?? "—")],
      ["Pairwise agreement between annotators", pct(w.pairwise_agreement), { "data-figure": "pairwise_agreement" }],
      ["Pairs", String(w.pairs ?? "—")],
      ["Answers given with a model suggestion on the form (not blind, left out)", String(w.answers_with_suggestion_left_out ?? 0), { "data-figure": "with_suggestion" }],
    ]));
  } else if (kind === "quintuplet") {
    titleEl.textContent = "Quintuplet field agreement (after normalization)";
    const fields = w.fields || {};
    el.replaceChildren(
      h("p", { class: "muted small" }, `Share of annotator pairs whose values match, over ${w.pairs ?? 0} pairs.`),
      keyValueTable(Object.entries(fields).map(([f, v]) => [label(f), h("span", {}, bar(v), pct(v)), { "data-field": f }])),
    );
  } else if (kind === "rating") {
    titleEl.textContent = "Rating agreement: Krippendorff's α (ordinal, 1–5)";
    const criteria = w.criteria || {};
    el.replaceChildren(h("table", { class: "grid", style: "max-width:640px" },
      h("thead", {}, h("tr", {}, h("th", {}, "Criterion"), h("th", { class: "num" }, "α"), h("th", { class: "num" }, "Items"))),
      h("tbody", {}, Object.entries(criteria).map(([c, v]) => h("tr", { dataset: { criterion: c } }, h("td", {}, CRITERION_LABELS[c] || label(c)), h("td", { class: "num" }, num(v.alpha)), h("td", { class: "num" }, String(v.n_items ?? "—")))))));
  } else {
    titleEl.textContent = "Agreement";
    el.replaceChildren(h("pre", {}, JSON.stringify(w, null, 2)));
  }
}

// Imported aggregated ratings (means of several raters) are no one rater: left out of the figures, counted here.
function aggregatedNote(root, left) {
  let note = root.querySelector("[data-aggregated]");
  if (!note) {
    note = h("p", { class: "muted small", "data-aggregated": "" });
    root.querySelector("[data-annotators]").after(note);
  }
  note.textContent = left ? `${left} aggregated rating${left === 1 ? "" : "s"} (imported means of several raters) not counted in these figures` : "";
  note.hidden = !left;
}

async function load(root) {
  const slug = root.dataset.project;
  const notices = new Notices(root.querySelector("[data-notices]"));
  try {
    const data = await api("GET", `/api/projects/${slug}/agreement/`, { retries: 2 });
    const done = statusCards(root.querySelector("[data-status]"), data.status_counts || {}, data.gold_items || 0);
    root.querySelector("[data-progress]").style.width = `${(done * 100).toFixed(1)}%`;
    annotatorTable(root.querySelector("[data-annotators]"), data.annotators || []);
    aggregatedNote(root, data.aggregated_ratings_left_out || 0);
    workflowFigures(root.querySelector("[data-workflow-figures]"), root.querySelector("[data-workflow-title]"), data.workflow || {});
    root.dataset.loaded = "1";
  } catch (err) {
    notices.show(`Could not load the figures: ${err.message}`, { kind: "error", sticky: true });
  }
}

const root = document.querySelector("[data-agreement]");
if (root) {
  load(root);
  root.querySelector("[data-refresh]").addEventListener("click", () => load(root));
}
