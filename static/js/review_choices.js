// Review of a protocol's own form whose answers are choices (e.g. pairwise votes): the form
// description the server sends (`form.review`, from the protocol's workflow module `form`,
// annotation/protocols.py "A workflow of its own") says which media to show, which item fields to
// print, and which fields of a stored answer are choices. Nothing here names a protocol.
//
//   form.review = {
//     media: [{field, kind: "video" | "image", label}],   the item's media, shown where present
//     text: [{field, label}],                             item fields printed above the table
//     fields: [{key, label, path: [...], required, choices: [{value, label}]}],  one row and one
//                                                         select each; `path` into the answer
//     notes: [{key, label, path, values: {value: text}}], read-only rows (e.g. the sides shown)
//   }
// A label may name item fields as {field}: the page fills them from the item (a reviewer may see
// them all, the annotators' pages never get this description's values).
import { h } from "./workbench/dom.js";
import { mediaUrl, videoPlayer, zoomableImage } from "./workbench/media.js";

/** `text` with each {field} replaced by the item's value of it. */
export function fill(text, payload) {
  return String(text).replace(/\{(\w+)\}/g, (whole, name) => (payload && payload[name] != null ? String(payload[name]) : whole));
}

function at(result, path) {
  let value = result;
  for (const part of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = value[part];
  }
  return value;
}

function put(result, path, value) {
  let node = result;
  path.slice(0, -1).forEach((part) => (node = node[part] ??= {}));
  node[path[path.length - 1]] = value;
}

function choiceText(field, value, payload) {
  if (value === undefined || value === null) return null;
  const choice = field.choices.find((c) => c.value === value);
  return choice ? fill(choice.label, payload) : String(value);
}

/** The item's media the description lists that the item has: videos side by side, or images. */
export function choiceMedia(item, spec) {
  const present = spec.media.filter((m) => mediaUrl(item.media, m.field));
  if (!present.length) return null;
  return h("div", { class: "review-media pair", "data-review-media": "" }, present.map((m) => {
    const label = fill(m.label, item.payload);
    const url = mediaUrl(item.media, m.field);
    const figure = m.kind === "video" ? videoPlayer(url, label, { muted: true }).figure : zoomableImage(url, label, label);
    figure.dataset.field = m.field;
    return figure;
  }));
}

/** The item's text fields, labelled. */
export function choiceItemText(payload, spec) {
  return h("dl", { class: "card review-fields", "data-review-text": "" }, spec.text.flatMap(({ field, label }) => [
    h("dt", {}, label), h("dd", { dataset: { field } }, payload[field] == null ? "—" : String(payload[field])),
  ]));
}

/** Comparison-table rows [key, label, getter(result) -> text]: the choice fields, then the notes. */
export function choiceRows(spec, payload) {
  return [
    ...spec.fields.map((f) => [f.key, f.label, (r) => choiceText(f, at(r, f.path), payload)]),
    ...(spec.notes || []).map((n) => [n.key, n.label, (r) => {
      const v = at(r, n.path);
      return v === undefined || v === null ? null : n.values[v] ?? String(v);
    }]),
  ];
}

/** The merged answer's inputs, one select per choice field prefilled from `base`: {el, read()}. */
export function choiceEditor(spec, payload, base) {
  const rows = [];
  const sels = spec.fields.map((f) => {
    const current = at(base, f.path);
    const sel = h("select", { name: f.key, dataset: { choice: f.key } },
      f.required ? "" : h("option", { value: "" }, "— no vote"),
      f.choices.map((c) => h("option", { value: c.value, selected: current === c.value }, fill(c.label, payload))));
    rows.push(h("label", {}, f.label), sel);
    return [f, sel];
  });
  return {
    el: h("div", { class: "editor" }, rows),
    read() {
      const r = {};
      for (const [f, sel] of sels) if (sel.value !== "") put(r, f.path, sel.value);
      return r;
    },
  };
}
