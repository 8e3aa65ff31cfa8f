// Box review: the item's image large, with zoom; each annotator's box in its own colour; the
// merged box drawn on top, moved by dragging it and resized by its edges and corners (or drawn
// anew on empty ground); the state picked from the item's candidate labels (a select: the server
// refuses any other). read() gives the merged answer the review API takes.
import { clipBox, drawEditableBox, editBoxWithPointer, fitCanvas, paintImage, strokeBox, whenImageReady } from "./box_canvas.js";
import { h } from "./workbench/dom.js";

const MERGED = "#ffffff";
const ZOOMS = [1, 1.5, 2, 3, 4, 6];

function meanBox(boxes) {
  if (!boxes.length) return null;
  return [0, 1, 2, 3].map((i) => Math.round(boxes.reduce((s, b) => s + b[i], 0) / boxes.length));
}

function mostCommon(values) {
  const counts = new Map();
  values.forEach((v) => counts.set(v, (counts.get(v) || 0) + 1));
  let best = null;
  for (const [v, n] of counts) if (best === null || n > counts.get(best)) best = v;
  return best;
}

/**
 * image: {url, width, height}; annotations: [{id, annotator, result}]; colors: one per annotation;
 * candidates: the state labels; payload: the item's (a decided item shows its settled box);
 * readOnly: nothing can be moved.
 */
export function boxAdjudicator({ image, annotations, colors, candidates, payload = {}, readOnly = false }) {
  const boxes = annotations.map((a) => a.result.bbox).filter(Array.isArray);
  const settled = Array.isArray(payload.bbox) ? payload.bbox : null;
  let merged = readOnly ? settled : meanBox(boxes) || settled;
  const states = annotations.map((a) => a.result.state).filter((s) => candidates.includes(s));
  let state = readOnly ? payload.state : mostCommon(states) || (candidates.includes(payload.state) ? payload.state : "");
  const outcomes = annotations.map((a) => a.result.outcome).filter(Boolean);
  let kind = merged ? "box" : typeof payload.bbox === "string" ? payload.bbox : outcomes[0] || "box";
  let W = image.width || 0;
  let H = image.height || 0;
  let zoom = 1;
  let scale = 1;

  const img = new Image();
  img.src = image.url;
  const canvas = h("canvas", { class: "review-box-canvas", tabindex: "0", "data-merged-canvas": "",
    "aria-label": "The image with every annotator's box; drag the white merged box to move it, its edges to resize it" });
  const g = canvas.getContext("2d");
  const stage = h("div", { class: "review-box-stage" }, canvas);
  const zoomOut = h("button", { type: "button", "data-zoom-out": "", title: "Zoom out (-)", onclick: () => setZoom(-1) }, "−");
  const zoomIn = h("button", { type: "button", "data-zoom-in": "", title: "Zoom in (+)", onclick: () => setZoom(1) }, "+");
  const zoomLabel = h("output", { class: "mono", "data-zoom": "" }, "100 %");
  const legend = h("div", { class: "review-box-legend small" },
    annotations.map((a, i) => h("span", { class: "legend-entry", dataset: { annotation: String(a.id) } },
      h("span", { class: "swatch", style: { borderColor: colors[i] } }), a.annotator || "?",
      a.result.bbox ? "" : h("span", { class: "muted" }, ` (${a.result.outcome || "no box"})`))),
    h("span", { class: "legend-entry" }, h("span", { class: "swatch merged" }), readOnly ? "settled box" : "merged box (drag it)"));
  const el = h("section", { class: "review-box", "data-box-review": "" },
    h("div", { class: "review-box-tools" }, h("span", { class: "muted small" }, "Zoom"), zoomOut, zoomLabel, zoomIn, legend),
    stage);

  // ---- the merged answer's controls (placed by the page in its editor) ----
  const kindSelect = h("select", { name: "outcome", disabled: readOnly },
    [["box", "a box"], ["nothing_to_label", "nothing to label"], ["cannot_determine", "cannot determine"]]
      .map(([v, t]) => h("option", { value: v, selected: kind === v }, t)));
  const stateSelect = h("select", { name: "state", "data-merged-state": "", disabled: readOnly },
    h("option", { value: "", selected: !state }, "— pick the state —"),
    candidates.map((label) => h("option", { value: label, selected: label === state }, label)));
  const coords = h("output", { class: "mono", "data-merged-bbox": "" });
  kindSelect.addEventListener("change", () => {
    kind = kindSelect.value;
    draw();
  });
  stateSelect.addEventListener("change", () => (state = stateSelect.value));
  const controls = [
    h("label", {}, "answer"), kindSelect,
    h("label", {}, "merged box"), h("div", {}, coords, h("span", { class: "muted small" }, " image pixels [x, y, w, h]; drag it on the image")),
    h("label", { for: "merged-state" }, "state"), stateSelect,
  ];
  stateSelect.id = "merged-state";

  function layout() {
    if (!W || !H) {
      W = img.naturalWidth;
      H = img.naturalHeight;
    }
    if (!W || !H) return;
    const fit = Math.min(Math.max(320, stage.clientWidth - 4) / W, Math.max(320, window.innerHeight * 0.75) / H, 8);
    scale = fit * zoom;
    fitCanvas(g, W, H, scale);
    zoomLabel.textContent = `${Math.round(zoom * 100)} %`;
    draw();
  }

  function setZoom(direction) {
    const i = ZOOMS.indexOf(zoom);
    zoom = ZOOMS[Math.max(0, Math.min(ZOOMS.length - 1, i + direction))];
    layout();
  }

  function draw() {
    paintImage(g, img, W, H, scale);
    annotations.forEach((a, i) => {
      if (!Array.isArray(a.result.bbox)) return;
      const [x, y] = strokeBox(g, a.result.bbox, scale, colors[i], 2);
      g.fillStyle = colors[i];
      g.font = "bold 12px system-ui, sans-serif";
      g.fillText(a.annotator || "?", x + 3, Math.max(12, y - 4));
    });
    const showMerged = merged && kind === "box";
    if (showMerged) {
      drawEditableBox(g, merged, scale, { fill: "rgba(255, 255, 255, 0.12)", solid: ["#1d232b", 5], dashed: [MERGED, 2, [6, 4]],
        handles: readOnly ? null : MERGED });
    }
    coords.textContent = showMerged ? `[${merged.join(", ")}]` : kind === "box" ? "none: draw one on the image" : kind;
    coords.dataset.bbox = showMerged ? JSON.stringify(merged) : "";
  }

  // ---- dragging the merged box ----
  if (!readOnly) {
    editBoxWithPointer(canvas, {
      scale: () => scale,
      size: () => [W, H],
      get: () => (kind === "box" ? merged : null),
      set(next, mode) {
        merged = next;
        if (mode === "draw") kind = kindSelect.value = "box";
        draw();
      },
      end() {
        merged = merged ? clipBox(merged, W, H) : null;
        draw();
      },
    });
  }

  window.addEventListener("resize", layout);
  whenImageReady(img, layout);
  requestAnimationFrame(layout);

  return {
    el,
    controls,
    zoom: setZoom,
    /** Start the merged answer from one annotation's. */
    useResult(result) {
      if (readOnly) return;
      if (Array.isArray(result.bbox)) {
        merged = [...result.bbox];
        kind = "box";
      } else if (result.outcome) kind = result.outcome;
      if (candidates.includes(result.state)) state = result.state;
      kindSelect.value = kind;
      stateSelect.value = state || "";
      draw();
    },
    read() {
      if (kind !== "box") return { outcome: kind };
      return { bbox: merged ? [...merged] : null, state: stateSelect.value };
    },
  };
}
