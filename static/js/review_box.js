// Box review: the item's image large, with zoom; each annotator's box in its own colour; the
// merged box drawn on top, moved by dragging it and resized by its edges and corners (or drawn
// anew on empty ground); the state picked from the item's candidate labels (a select: the server
// refuses any other). read() gives the merged answer the review API takes.
import { boxGrab, clipBox, dragBox, grabCursor } from "./box.js";
import { h } from "./workbench/dom.js";

const HANDLE_PX = 8; // screen pixels around an edge that grab it
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
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${Math.round(W * scale)}px`;
    canvas.style.height = `${Math.round(H * scale)}px`;
    canvas.width = Math.round(W * scale * dpr);
    canvas.height = Math.round(H * scale * dpr);
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    zoomLabel.textContent = `${Math.round(zoom * 100)} %`;
    draw();
  }

  function setZoom(direction) {
    const i = ZOOMS.indexOf(zoom);
    zoom = ZOOMS[Math.max(0, Math.min(ZOOMS.length - 1, i + direction))];
    layout();
  }

  function strokeBox(bbox, color, width, dashed) {
    const [x, y, w, hh] = bbox.map((v) => v * scale);
    g.lineWidth = width;
    g.strokeStyle = color;
    g.setLineDash(dashed ? [6, 4] : []);
    g.strokeRect(x, y, w, hh);
    g.setLineDash([]);
    return [x, y, w, hh];
  }

  function draw() {
    g.clearRect(0, 0, canvas.width, canvas.height);
    if (img.complete && img.naturalWidth) g.drawImage(img, 0, 0, W * scale, H * scale);
    annotations.forEach((a, i) => {
      if (!Array.isArray(a.result.bbox)) return;
      const [x, y] = strokeBox(a.result.bbox, colors[i], 2, false);
      g.fillStyle = colors[i];
      g.font = "bold 12px system-ui, sans-serif";
      g.fillText(a.annotator || "?", x + 3, Math.max(12, y - 4));
    });
    const showMerged = merged && kind === "box";
    if (showMerged) {
      const [x, y, w, hh] = merged.map((v) => v * scale);
      g.fillStyle = "rgba(255, 255, 255, 0.12)";
      g.fillRect(x, y, w, hh);
      strokeBox(merged, "#1d232b", 5, false);
      strokeBox(merged, MERGED, 2, true);
      if (!readOnly) {
        g.fillStyle = MERGED;
        for (const [cx, cy] of [[x, y], [x + w, y], [x, y + hh], [x + w, y + hh]]) g.fillRect(cx - 4, cy - 4, 8, 8);
      }
    }
    coords.textContent = showMerged ? `[${merged.join(", ")}]` : kind === "box" ? "none: draw one on the image" : kind;
    coords.dataset.bbox = showMerged ? JSON.stringify(merged) : "";
  }

  // ---- dragging the merged box ----
  const toImage = (e) => {
    const r = canvas.getBoundingClientRect();
    return [(e.clientX - r.left) / scale, (e.clientY - r.top) / scale];
  };
  const hitTest = (px, py) => (kind === "box" ? boxGrab(merged, px, py, HANDLE_PX / scale) : null);
  let drag = null;
  if (!readOnly) {
    canvas.addEventListener("pointerdown", (e) => {
      if (e.button !== 0) return;
      canvas.focus();
      canvas.setPointerCapture(e.pointerId);
      const [px, py] = toImage(e);
      const hit = hitTest(px, py);
      drag = hit ? { ...hit, start: [px, py], orig: [...merged] } : { mode: "draw", start: [px, py] };
    });
    canvas.addEventListener("pointermove", (e) => {
      const [px, py] = toImage(e);
      if (!drag) {
        canvas.style.cursor = grabCursor(hitTest(px, py));
        return;
      }
      const [sx, sy] = drag.start;
      if (drag.mode === "draw") {
        const cx = Math.max(0, Math.min(W, px)), cy = Math.max(0, Math.min(H, py));
        const x0 = Math.max(0, Math.min(W, sx)), y0 = Math.max(0, Math.min(H, sy));
        merged = [Math.min(x0, cx), Math.min(y0, cy), Math.abs(cx - x0), Math.abs(cy - y0)].map(Math.round);
        kind = kindSelect.value = "box";
      } else {
        merged = dragBox(drag, drag.orig, drag.start, px, py, W, H);
      }
      draw();
    });
    const endDrag = () => {
      if (!drag) return;
      drag = null;
      merged = merged ? clipBox(merged, W, H) : null;
      draw();
    };
    canvas.addEventListener("pointerup", endDrag);
    canvas.addEventListener("pointercancel", endDrag);
  }

  window.addEventListener("resize", layout);
  if (img.complete && img.naturalWidth) layout();
  else img.addEventListener("load", layout, { once: true });
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
