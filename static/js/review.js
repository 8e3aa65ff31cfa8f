// Review: the queue of annotated items, and one item with every annotation side by side,
// disagreements highlighted; the reviewer accepts one annotation, edits a merged answer, or
// discards the item. Everything goes through the JSON API; what is particular to the protocol
// (media fields, quintuplet fields, rating criteria, a QA item's answer shape) comes in the item's
// `form` (annotation/selectors.py item_review_detail).
import { ApiError, api, describeError } from "./workbench/api.js";
import { h } from "./workbench/dom.js";
import { mediaList, mediaUrl, videoPlayer, zoomableImage } from "./workbench/media.js";
import { Notices } from "./workbench/notices.js";
import { Shortcuts } from "./workbench/shortcuts.js";
import { disagreementPanel, queueOrder } from "./review_disagreement.js";
import { boxAdjudicator } from "./review_box.js";
import { choiceEditor, choiceItemText, choiceMedia, choiceRows } from "./review_choices.js";

const COLORS = ["#ffd400", "#00c2ff", "#ff5ca8", "#7cff6b", "#ff8c1a", "#b388ff"];

function fmt(value) {
  if (value === null || value === undefined) return h("span", { class: "muted" }, "—");
  if (Array.isArray(value)) {
    if (value.every((v) => typeof v !== "object")) {
      return value.length && value.every((v) => typeof v === "string" && v.length > 12)
        ? h("ol", { class: "compact" }, value.map((v) => h("li", {}, v)))
        : value.join(", ") || h("span", { class: "muted" }, "(empty)");
    }
    return JSON.stringify(value);
  }
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

// ---------------------------------------------------------------------------------------------
// Queue
// ---------------------------------------------------------------------------------------------

async function reviewQueue(slug) {
  const data = await api("GET", `/api/projects/${slug}/review/`, { retries: 2 });
  return { items: data.items, counts: data.counts };
}

function renderCounts(el, counts) {
  if (!el) return;
  el.replaceChildren(...Object.entries(counts).map(([status, n]) => h("div", { class: "stat", dataset: { status } }, h("span", { class: "muted" }, status), h("b", {}, String(n)))));
}

async function startList(root) {
  const slug = root.dataset.project;
  const notices = new Notices(root.querySelector("[data-notices]"));
  const tbody = root.querySelector("[data-review-table] tbody");
  const shortcuts = new Shortcuts();
  let rows = [];
  let selected = 0;
  const select = (i) => {
    if (!rows.length) return;
    selected = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach((r, j) => r.classList.toggle("selected", j === selected));
    rows[selected].scrollIntoView({ block: "nearest" });
  };
  const open = () => rows[selected] && (window.location.href = rows[selected].dataset.href);
  shortcuts.register("j", "Next item", () => select(selected + 1));
  shortcuts.register("arrowdown", "Next item", () => select(selected + 1));
  shortcuts.register("k", "Previous item", () => select(selected - 1));
  shortcuts.register("arrowup", "Previous item", () => select(selected - 1));
  shortcuts.register("enter", "Open the item", open);
  shortcuts.register("o", "Open the item", open);
  try {
    const { items, counts } = await reviewQueue(slug);
    renderCounts(root.querySelector("[data-counts]"), counts);
    if (!items.length) {
      tbody.replaceChildren(h("tr", {}, h("td", { colspan: "6", class: "muted", "data-empty": "" }, "Nothing waiting for review.")));
      return;
    }
    rows = items.map((it) => {
      const href = `/projects/${slug}/review/${it.id}/`;
      const disputed = it.disagreement.length > 0;
      // The fields as the annotation form names them (the API sends its labels beside the keys).
      const labels = it.disagreement_labels;
      const tr = h("tr", { class: disputed || it.reopened ? "disputed" : "", dataset: { item: String(it.id), href, disputed: String(disputed) } },
        h("td", {}, h("a", { href }, `#${it.id}`)),
        h("td", {}, it.external_id || ""),
        h("td", { class: "num" }, String(it.annotation_count)),
        h("td", {}, it.is_gold ? h("span", { class: "badge" }, "gold") : ""),
        h("td", { class: "muted" }, it.updated_at ? new Date(it.updated_at).toLocaleString() : ""),
        h("td", {},
          it.reopened ? h("span", { class: "badge warn", "data-reopened": "" }, it.reopened) : "",
          it.reopened && disputed ? " " : "",
          h("span", { "data-disagreement": "" }, disputed ? h("span", { class: "badge warn" }, "adjudicate: ", labels.join(", ")) : "")));
      tr.addEventListener("click", (e) => {
        if (e.target.tagName !== "A") window.location.href = href;
      });
      return tr;
    });
    tbody.replaceChildren(...rows);
    select(0);
  } catch (err) {
    notices.show(`Could not load the review queue: ${err.message}`, { kind: "error", sticky: true });
  }
}

// ---------------------------------------------------------------------------------------------
// One item
// ---------------------------------------------------------------------------------------------

/** Field rows of the comparison table: [key, label, getter(result)], labelled as the annotation
 * form labels them (the API's field_labels; the key where it has none). */
function fieldRows(workflow, data) {
  const labels = data.field_labels;
  const form = data.form;
  const label = (key, fallback) => labels[key] || fallback;
  if (form.review) return choiceRows(form.review, data.item.payload || {});
  if (workflow === "quintuplet") return form.fields.map((f) => [f, label(f, f.replace("_", " ")), (r) => r[f]]);
  if (workflow === "box") {
    return [
      ["bbox", `${label("bbox", "box")} [x, y, w, h]`, (r) => r.bbox ?? null],
      ["state", label("state", "state"), (r) => r.state ?? null],
      ["outcome", label("outcome", "outcome"), (r) => r.outcome ?? null],
    ];
  }
  if (workflow === "qa") return [["answer", label("answer", "answer"), (r) => r.answer], ["flags", label("flags", "flags"), (r) => r.flags]];
  return form.criteria.map(({ key, label: text }) => [`scores.${key}`, label(`scores.${key}`, text), (r) => (r.scores || {})[key]]);
}

function truthOf(workflow, payload, form) {
  if (form.review) return null; // answers of a protocol's own form: the item holds none
  if (workflow === "quintuplet") return Object.fromEntries(form.fields.map((f) => [f, payload[f]]));
  if (workflow === "box") {
    // The import format stores "nothing to label" / "cannot determine" in bbox itself.
    const outcome = typeof payload.bbox === "string" ? payload.bbox : payload.outcome;
    return { bbox: Array.isArray(payload.bbox) ? payload.bbox : null, state: payload.state, outcome };
  }
  if (workflow === "qa") return { answer: payload.answer, flags: null };
  return null; // ratings have no truth
}

function boxPreview(url, boxes) {
  const img = h("img", { src: url, alt: "item image" });
  const wrap = h("div", { class: "box-preview" }, img);
  const place = () => {
    const sx = img.clientWidth / img.naturalWidth, sy = img.clientHeight / img.naturalHeight;
    wrap.querySelectorAll(".rect").forEach((r) => r.remove());
    boxes.forEach(({ bbox, color, label }) => {
      if (!bbox) return;
      const [x, y, w, hh] = bbox;
      wrap.append(h("div", { class: "rect", title: label, style: `left:${x * sx}px;top:${y * sy}px;width:${w * sx}px;height:${hh * sy}px;border-color:${color}` }));
    });
  };
  img.addEventListener("load", place);
  window.addEventListener("resize", place);
  return wrap;
}

/** The item's media as the form description lists them ({field, kind, label}): the box
 * workflow's image with every annotator's box; else images and videos side by side, a lone video
 * looping. */
function renderMedia(workflow, item, annotations, boxAdj, form) {
  const media = item.media;
  if (boxAdj) return boxAdj.el;
  if (form.review) return choiceMedia(item, form.review); // a protocol's own form describes its review
  if (workflow === "box") {
    const url = mediaUrl(media, form.media[0].field);
    const boxes = annotations.map((a, i) => ({ bbox: a.result.bbox, color: COLORS[i % COLORS.length], label: a.annotator }));
    if (item.payload && item.payload.bbox) boxes.push({ bbox: item.payload.bbox, color: "#ffffff", label: "current truth" });
    return h("div", { class: "review-media" }, boxPreview(url, boxes),
      h("p", { class: "small" }, annotations.map((a, i) => h("span", { style: `margin-right:1rem` }, h("span", { class: "bar", style: `background:${COLORS[i % COLORS.length]};width:1.2em` }), a.annotator))));
  }
  const videos = form.media.filter((m) => m.kind === "video");
  if (videos.length === 1) {
    return h("div", { class: "review-media", style: "max-width:760px" }, videoPlayer(mediaUrl(media, videos[0].field), null, { loop: true, muted: true }).figure);
  }
  if (videos.length) {
    return h("div", { class: "review-media pair" }, videos.map((m) => videoPlayer(mediaUrl(media, m.field), m.label, { muted: true }).figure));
  }
  const lists = form.media.filter((m) => m.kind === "images");
  if (lists.length) {
    const urls = lists.flatMap((m) => mediaList(media, m.field));
    return h("div", { class: `review-media pair n${urls.length}` }, urls.map((u, i) => zoomableImage(u, `Image ${i + 1}`, String(i + 1))));
  }
  if (!form.media.length) return null;
  return h("div", { class: "review-media pair" }, form.media.map((m) => zoomableImage(mediaUrl(media, m.field), `Image ${m.label}`, m.label)));
}

function itemText(workflow, payload, form) {
  if (form.review) return choiceItemText(payload, form.review);
  if (workflow === "qa") {
    // The item's other plain fields (its format and metadata), whatever the protocol names them.
    const shown = new Set(["question", "options", "answer", ...form.media.map((m) => m.field)]);
    const meta = Object.entries(payload).filter(([k, v]) => !shown.has(k) && v !== null && typeof v !== "object");
    return h("section", { class: "card" }, h("h2", { class: "question" }, payload.question || ""),
      h("ol", { type: "A" }, (payload.options || []).map((o) => h("li", {}, o))),
      h("p", { class: "muted small" }, meta.map(([k, v]) => `${k}: ${v}`).join(" · ")));
  }
  if (workflow === "rating") return h("p", { class: "prompt" }, h("span", { class: "muted" }, "Prompt: "), h("q", {}, payload.prompt || ""), payload.generator ? h("span", { class: "muted" }, ` · ${payload.generator}`) : null);
  if (workflow === "box") return h("p", {}, "Object: ", h("b", {}, payload.object || "?"));
  return null;
}

/** Inputs for a merged answer, prefilled from `base`; returns {el, read() -> result}. */
function editor(workflow, item, base, boxAdj, form) {
  const rows = [];
  const read = [];
  const row = (label, input, sub = false) => rows.push(h("label", { class: sub ? "sub" : "" }, label), input);
  if (boxAdj) return { el: h("div", { class: "editor" }, boxAdj.controls), read: () => boxAdj.read() };
  if (form.review) return choiceEditor(form.review, item.payload || {}, base);
  if (workflow === "quintuplet") {
    for (const f of ["state_a", "state_b", "change"]) {
      const input = h("input", { type: "text", name: f, value: base[f] || "" });
      row(f.replace("_", " "), input);
      read.push((r) => (r[f] = input.value.trim()));
    }
    const ds = [0, 1, 2].map((i) => {
      const input = h("input", { type: "text", name: `change_distractors.${i}`, value: (base.change_distractors || [])[i] || "" });
      row(`wrong change ${i + 1}`, input, true);
      return input;
    });
    read.push((r) => (r.change_distractors = ds.map((x) => x.value.trim())));
    for (const [f, opts] of [["category", ["positional", "functional", "other"]], ["difference", ["slight", "significant"]]]) {
      const sel = h("select", { name: f }, opts.map((o) => h("option", { value: o, selected: base[f] === o }, o)));
      row(f, sel);
      read.push((r) => (r[f] = sel.value));
    }
  } else if (workflow === "box") {
    const kind = h("select", { name: "outcome" }, [["box", "a box"], ["nothing_to_label", "nothing to label"], ["cannot_determine", "cannot determine"]].map(([v, t]) => h("option", { value: v, selected: (base.outcome || "box") === v }, t)));
    row("answer", kind);
    const nums = [0, 1, 2, 3].map((i) => h("input", { type: "number", step: "any", name: `bbox.${i}`, value: base.bbox ? base.bbox[i] : "" }));
    row("box [x, y, w, h]", h("div", { style: "display:grid;grid-template-columns:repeat(4,1fr);gap:.3rem" }, nums));
    const labels = item.candidates || [];
    const state = h("input", { type: "text", name: "state", list: "state-candidates", value: base.state || "" });
    row("state", h("div", {}, state, h("datalist", { id: "state-candidates" }, labels.map((l) => h("option", { value: l })))));
    read.push((r) => {
      if (kind.value !== "box") r.outcome = kind.value;
      else {
        r.bbox = nums.map((n) => Number(n.value));
        r.state = state.value.trim();
      }
    });
  } else if (workflow === "qa") {
    const p = item.payload || {};
    const { format, multiple } = form;
    const answerValue = Array.isArray(base.answer) ? base.answer.join(", ") : base.answer ?? "";
    const answer = h("input", { type: "text", name: "answer", value: answerValue, placeholder: format === "count" ? "a whole number" : format === "set" ? "objects, comma-separated" : multiple ? "letters, e.g. A, C" : "one letter" });
    row("answer", answer);
    const question = h("textarea", { name: "question", rows: "2" }, p.question || "");
    row("question", question);
    const options = h("textarea", { name: "options", rows: String(Math.max(2, (p.options || []).length)) }, (p.options || []).join("\n"));
    if (format === "choice") row("options (one per line)", options);
    read.push((r) => {
      const raw = answer.value.trim();
      if (format === "count") r.answer = /^\d+$/.test(raw) ? Number(raw) : raw;
      else if (format === "set") r.answer = raw.split(",").map((s) => s.trim()).filter(Boolean);
      else {
        const letters = raw.split(/[\s,;]+/).filter(Boolean).map((s) => s.toUpperCase());
        r.answer = multiple ? letters : letters[0] || "";
      }
      if (question.value.trim() !== (p.question || "").trim()) r.question = question.value.trim();
      const opts = options.value.split("\n").map((s) => s.trim()).filter(Boolean);
      if (format === "choice" && JSON.stringify(opts) !== JSON.stringify(p.options || [])) r.options = opts;
    });
  } else {
    const scores = base.scores || {};
    const sels = form.criteria.map(({ key: c, allows_na: nullable }) => {
      const values = [1, 2, 3, 4, 5, ...(nullable ? ["na"] : [])];
      const current = c in scores ? (scores[c] === null ? "na" : String(scores[c])) : "";
      const sel = h("select", { name: `scores.${c}` }, h("option", { value: "" }, "—"), values.map((v) => h("option", { value: String(v), selected: current === String(v) }, v === "na" ? "N/A" : String(v))));
      row(c.replace("_", " "), sel);
      return [c, sel];
    });
    read.push((r) => {
      r.scores = {};
      for (const [c, sel] of sels) if (sel.value !== "") r.scores[c] = sel.value === "na" ? null : Number(sel.value);
    });
  }
  return {
    el: h("div", { class: "editor" }, rows),
    read() {
      const r = {};
      read.forEach((fn) => fn(r));
      return r;
    },
  };
}

/** One decision of the item's history (the API's `reviews`): who decided what and when; for an
 * edit, whose answer it started from; a decision a participant's rejection voided reads as voided,
 * with the reason, since it no longer stands. */
function historyLine(r) {
  const what = `${r.decision} by ${r.reviewer || "auto"} on ${new Date(r.created_at).toLocaleString()}`;
  const source = r.started_from;
  const from = source
    ? h("span", { "data-started-from": String(source.annotation) },
      `, edited from ${source.annotator ? `${source.annotator}'s` : `annotation #${source.annotation}'s`} answer`,
      source.excluded ? " (since left the analysis)" : "")
    : "";
  const comment = r.comment ? ` — “${r.comment}”` : "";
  if (r.voided) {
    return h("div", { class: "voided", dataset: { review: r.decision, voided: "" } },
      h("b", {}, "Voided: "), h("s", {}, what), from, comment, r.voided.reason ? ` — ${r.voided.reason}` : "");
  }
  return h("div", { dataset: { review: r.decision } }, what, from, comment);
}

async function startDetail(root) {
  const slug = root.dataset.project;
  const itemId = Number(root.dataset.item);
  const body = root.querySelector("[data-review-body]");
  const notices = new Notices(root.querySelector("[data-notices]"));
  const shortcuts = new Shortcuts();
  const help = root.querySelector("[data-help]");
  const openHelp = () => {
    shortcuts.renderHelp(root.querySelector("[data-help-body]"));
    help.showModal();
  };
  root.querySelector("[data-help-open]").addEventListener("click", openHelp);
  shortcuts.register("?", "Show keyboard shortcuts", openHelp);

  let data;
  try {
    data = await api("GET", `/api/items/${itemId}/review/`, { retries: 2 });
  } catch (err) {
    body.replaceChildren(h("p", { class: "error" }, `Could not load the item: ${err.message}`));
    return;
  }
  const item = data.item;
  const workflow = item.workflow;
  const form = data.form;
  const annotations = data.annotations;
  const disagreements = data.disagreements;
  // Labels the item came with from its import (an item no one annotated): one source beside the
  // annotations, acceptable as they are; never counted as an annotation.
  const imported = data.imported;
  const entries = imported ? [{ id: "imported", annotator: imported.source, result: imported.result, imported: true }, ...annotations] : annotations;
  root.querySelector("[data-title]").textContent = `Item ${item.external_id || item.id}`;
  root.querySelector("[data-item-status]").textContent = `${item.status}${item.is_gold ? " · gold" : ""} · ${annotations.length} annotation${annotations.length === 1 ? "" : "s"}${imported ? " · labels from the import" : ""}`;

  const decided = item.status === "verified" || item.status === "discarded";
  const boxImage = workflow === "box" ? item.media[form.media[0].field] : null;
  const boxAdj = boxImage
    ? boxAdjudicator({ image: boxImage, annotations, colors: annotations.map((_, i) => COLORS[i % COLORS.length]),
      candidates: item.candidates || [], payload: item.payload || {}, readOnly: decided })
    : null;
  let selected = 0;
  const truthValues = truthOf(workflow, item.payload, form);
  // The "current item" column only when the item already carries answers (imported truth, gold).
  const truth = !imported && truthValues && Object.values(truthValues).some((v) => v !== null && v !== undefined) ? truthValues : null;
  const rows = fieldRows(workflow, data);
  const headCells = entries.map((a, i) => h("th", { dataset: { annotation: String(a.id) }, class: "annotation-head" },
    h("label", { class: "radio" }, h("input", { type: "radio", name: "pick", value: String(a.id), checked: i === 0, onchange: () => select(i) }), ` ${a.annotator || "?"}`, h("kbd", {}, String(i + 1))),
    h("div", { class: "muted small" }, a.imported ? "imported labels" : `${Math.round((a.time_spent_ms || 0) / 1000)} s`)));
  const tableRows = rows.map(([key, label, get]) => {
    const entry = disagreements[key];
    const disagree = entry ? entry.agree === false : new Set(annotations.map((a) => JSON.stringify(get(a.result) ?? null))).size > 1;
    return h("tr", { class: disagree ? "disagree" : "", dataset: { field: key } },
      h("th", { class: "field" }, label, entry && entry.min_iou !== undefined && entry.min_iou !== null ? h("div", { class: "muted small" }, `min IoU ${entry.min_iou}`) : null),
      truth ? h("td", { class: "truth" }, fmt(get(truth))) : null,
      entries.map((a) => h("td", { class: "value", dataset: { annotation: String(a.id) } }, fmt(get(a.result)))));
  });
  const table = h("table", { class: "compare", "data-compare": "" },
    h("thead", {}, h("tr", {}, h("th", { class: "field" }, "Field"), truth ? h("th", {}, "Current item") : null, headCells)),
    h("tbody", {}, tableRows));
  const disagreeCount = tableRows.filter((r) => r.classList.contains("disagree")).length;

  const comment = h("textarea", { name: "comment", rows: "2", placeholder: "Comment (optional; say why when discarding)" });
  const editorSlot = h("div", { class: "card", hidden: true, "data-editor": "" });
  let ed = null;
  // The annotation whose answer was loaded into the editor (what an edit says it started from);
  // null when it started from the current item, from scratch or from the annotators' mean box.
  let startedFrom = null;
  const buttons = {
    accept: h("button", { type: "button", class: "primary", "data-accept": "", disabled: decided || !entries.length, onclick: () => accept() }, "Accept selected ", h("kbd", {}, "A")),
    edit: h("button", { type: "button", "data-edit": "", disabled: decided, onclick: () => openEditor() }, "Edit a merged answer ", h("kbd", {}, "E")),
    discard: h("button", { type: "button", "data-discard": "", disabled: decided, onclick: () => discard() }, "Discard item ", h("kbd", {}, "D")),
    next: h("button", { type: "button", "data-next": "", onclick: () => goNext() }, "Next item ", h("kbd", {}, "N")),
  };

  body.replaceChildren(
    renderMedia(workflow, item, annotations, boxAdj, form) || "",
    itemText(workflow, item.payload, form) || "",
    data.reopened ? h("p", { class: "warning", "data-reopened": "" }, `This item was verified (${data.reopened.decision}) and is back in review — ${data.reopened.reason}: the decision rested on an annotation that left the analysis, and the remaining annotations do not support it on their own.`) : "",
    data.disagreement ? disagreementPanel(data.disagreement, annotations, COLORS, workflow) : "",
    !annotations.length && imported
      ? h("p", { class: "muted", "data-imported-note": "" }, `No annotations: the labels came ${imported.source}. Accept them as they are, or edit them.`)
      : h("p", { class: disagreeCount ? "warning" : "ok" }, disagreeCount ? `${disagreeCount} field${disagreeCount === 1 ? "" : "s"} with disagreement (highlighted).` : "All annotators agree."),
    entries.length ? table : h("p", { class: "muted" }, "No annotations."),
    (data.reviews || []).length ? h("div", { class: "decided", "data-reviews": "" }, data.reviews.map(historyLine)) : "",
    h("div", { class: "review-actions" }, buttons.accept, buttons.edit, buttons.discard, h("span", { class: "spacer" }), buttons.next),
    comment,
    editorSlot,
  );

  function select(i) {
    if (!entries.length) return;
    selected = Math.max(0, Math.min(entries.length - 1, i));
    const id = String(entries[selected].id);
    table.querySelectorAll("[data-annotation]").forEach((c) => c.classList.toggle("selected", c.dataset.annotation === id));
    const radio = table.querySelector(`input[name=pick][value="${id}"]`);
    if (radio) radio.checked = true;
  }
  select(0);

  function openEditor(focus = true) {
    if (decided) return;
    const base = entries.length ? entries[selected].result : truth || {};
    ed = editor(workflow, item, { ...(truthValues || {}), ...base }, boxAdj, form);
    editorSlot.hidden = false;
    // The box editor keeps its merged box (and what it started from) when its controls reopen.
    if (!boxAdj) startedFrom = entries.length && !entries[selected].imported ? entries[selected] : null;
    const sourceText = () => (startedFrom ? `Starts from ${startedFrom.annotator || "?"}'s answer.`
      : boxAdj ? "Starts from the annotators' mean box and most given state." : "Starts from the current answer.");
    const sourceLabel = h("span", { "data-starts-from": startedFrom ? String(startedFrom.id) : "" }, sourceText());
    const useSelected = () => {
      startedFrom = entries[selected].imported ? null : entries[selected];
      boxAdj.useResult(entries[selected].result);
      sourceLabel.textContent = sourceText();
      sourceLabel.dataset.startsFrom = startedFrom ? String(startedFrom.id) : "";
    };
    const startsFrom = h("p", { class: "muted small" }, sourceLabel, " ",
      boxAdj && entries.length ? h("button", { type: "button", "data-use-selected": "", onclick: useSelected }, "Start from the selected annotation") : "");
    editorSlot.replaceChildren(h("h2", {}, "Merged answer"), startsFrom, ed.el,
      h("div", { class: "review-actions" }, h("button", { type: "button", class: "primary", "data-save-edit": "", onclick: () => saveEdit() }, "Save merged answer ", h("kbd", {}, "Ctrl+Enter")),
        h("button", { type: "button", onclick: () => { editorSlot.hidden = true; ed = null; } }, "Cancel")));
    if (focus) editorSlot.querySelector("input, select, textarea")?.focus();
  }

  async function decide(payload) {
    Object.values(buttons).forEach((b) => (b.disabled = true));
    try {
      await api("POST", `/api/items/${itemId}/review/`, { body: { ...payload, comment: comment.value.trim() }, retries: 2 });
      notices.show(`Saved: ${payload.decision}. Opening the next item…`, { kind: "ok" });
      root.dataset.decided = payload.decision;
      setTimeout(goNext, 600);
    } catch (err) {
      buttons.next.disabled = false;
      if (!(err instanceof ApiError && err.status === 409)) {
        buttons.accept.disabled = !entries.length;
        buttons.edit.disabled = false;
        buttons.discard.disabled = false;
      }
      const msg = err instanceof ApiError && err.status === 409 ? `Someone else decided first: ${err.message}` : `Not saved: ${describeError(err.body) || err.message}`;
      notices.show(msg, { kind: "error", sticky: true, id: "decide" });
    }
  }
  const accept = () => !decided && entries.length &&
    decide(entries[selected].imported ? { decision: "accept", imported: true } : { decision: "accept", annotation: entries[selected].id });
  // The annotation the edit started from, not the one selected now (the reviewer may have looked
  // at another since): the server records it as the edit's source.
  const saveEdit = () => ed && decide({ decision: "edit", result: ed.read(), annotation: startedFrom ? startedFrom.id : undefined });
  const discard = () => {
    if (decided) return;
    if (!window.confirm("Discard this item? It will not enter any release.")) return;
    decide({ decision: "discard" });
  };
  async function goNext() {
    try {
      const { items } = await reviewQueue(slug);
      // Onward from this item in the queue's order (disagreements first, then oldest first; then
      // from the start), so reviewers working side by side do not all land on the same item.
      const here = queueOrder({ id: itemId, disputed: Boolean(data.disagreement || data.reopened) });
      const next = items.find((it) => queueOrder(it) > here) || items.find((it) => it.id !== itemId);
      window.location.href = next ? `/projects/${slug}/review/${next.id}/` : `/projects/${slug}/review/`;
    } catch {
      window.location.href = `/projects/${slug}/review/`;
    }
  }

  entries.slice(0, 9).forEach((_, i) => shortcuts.register(String(i + 1), `Select annotation ${i + 1}`, () => select(i), { group: "Review" }));
  shortcuts.register("arrowright", "Select the next annotation", () => select(selected + 1), { group: "Review" });
  shortcuts.register("arrowleft", "Select the previous annotation", () => select(selected - 1), { group: "Review" });
  shortcuts.register("a", "Accept the selected annotation", accept, { group: "Review" });
  shortcuts.register("e", "Edit a merged answer", openEditor, { group: "Review" });
  shortcuts.register("d", "Discard the item", discard, { group: "Review" });
  shortcuts.register("n", "Next item", goNext, { group: "Review" });
  shortcuts.register("ctrl+enter", "Save the merged answer", () => saveEdit(), { group: "Review", inInputs: true });
  if (boxAdj) {
    shortcuts.register("+", "Zoom in on the image", () => boxAdj.zoom(1), { group: "Box" });
    shortcuts.register("-", "Zoom out", () => boxAdj.zoom(-1), { group: "Box" });
    if (!decided) openEditor(false); // the merged box is on the image: its controls are open from the start
  }
}

const listRoot = document.querySelector("[data-review-list]");
if (listRoot) startList(listRoot);
const detailRoot = document.querySelector("[data-review-detail]");
if (detailRoot) startDetail(detailRoot);
