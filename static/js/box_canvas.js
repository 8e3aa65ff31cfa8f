// One editable box on a canvas over an image, shared by the annotator's box page (box.js) and the
// reviewer's merged box (review_box.js): the geometry (clip, hit test, drag), the pointer
// handling (draw anew, move, resize by an edge or corner) and the drawing (image, outlines,
// corner handles). Boxes are [x, y, w, h] in image pixels; the canvas shows them at `scale`
// screen pixels per image pixel.

export const HANDLE_PX = 8; // screen pixels around an edge that grab it for resizing
export const MIN_SIZE = 2; // image pixels

export function clipBox([x, y, w, hgt], width, height) {
  let x0 = Math.max(0, Math.min(x, x + w));
  let y0 = Math.max(0, Math.min(y, y + hgt));
  let x1 = Math.min(width, Math.max(x, x + w));
  let y1 = Math.min(height, Math.max(y, y + hgt));
  x0 = Math.round(x0);
  y0 = Math.round(y0);
  x1 = Math.round(x1);
  y1 = Math.round(y1);
  if (x1 - x0 < MIN_SIZE || y1 - y0 < MIN_SIZE) return null;
  return [x0, y0, x1 - x0, y1 - y0];
}

/** What a pointer at (px, py) grabs of `box` (image pixels; `tol` the grab distance in them):
 * {mode: "resize", edges: {l, r, t, b}}, {mode: "move"}, or null. */
export function boxGrab(box, px, py, tol) {
  if (!box) return null;
  const [x, y, w, hh] = box;
  const nearL = Math.abs(px - x) <= tol, nearR = Math.abs(px - (x + w)) <= tol;
  const nearT = Math.abs(py - y) <= tol, nearB = Math.abs(py - (y + hh)) <= tol;
  const insideX = px >= x - tol && px <= x + w + tol, insideY = py >= y - tol && py <= y + hh + tol;
  const edges = { l: nearL && insideY, r: nearR && insideY, t: nearT && insideX, b: nearB && insideX };
  if (edges.l || edges.r || edges.t || edges.b) return { mode: "resize", edges };
  if (px > x && px < x + w && py > y && py < y + hh) return { mode: "move" };
  return null;
}

/** The pointer's cursor over what boxGrab found. */
export function grabCursor(hit) {
  if (!hit) return "crosshair";
  if (hit.mode === "move") return "move";
  const { l, r, t, b } = hit.edges;
  if ((l && t) || (r && b)) return "nwse-resize";
  if ((r && t) || (l && b)) return "nesw-resize";
  return l || r ? "ew-resize" : "ns-resize";
}

/** The box after dragging from `start` to (px, py) with what boxGrab found (orig: the box then). */
export function dragBox(grab, orig, start, px, py, width, height) {
  const [sx, sy] = start;
  let [x, y, w, hh] = orig;
  if (grab.mode === "move") {
    return [Math.round(Math.max(0, Math.min(width - w, x + px - sx))), Math.round(Math.max(0, Math.min(height - hh, y + py - sy))), w, hh];
  }
  let x1 = x + w, y1 = y + hh;
  if (grab.edges.l) x += px - sx;
  if (grab.edges.r) x1 += px - sx;
  if (grab.edges.t) y += py - sy;
  if (grab.edges.b) y1 += py - sy;
  return clipBox([Math.min(x, x1), Math.min(y, y1), Math.abs(x1 - x), Math.abs(y1 - y)], width, height) || orig;
}

const within = (v, max) => Math.max(0, Math.min(max, v));

/**
 * The mouse on `canvas` edits one box: a press on the box moves it, on an edge or corner resizes
 * it, anywhere else draws a new one (clipped to the image as it is drawn).
 * scale(): screen pixels per image pixel now; size(): [width, height] of the image now;
 * get(): the box that can be grabbed (null: none); set(box, mode): the box while the pointer
 * moves, mode "draw" (a new box) or "move" / "resize"; end(): the pointer was let go.
 */
export function editBoxWithPointer(canvas, { scale, size, get, set, end }) {
  const toImage = (e) => {
    const r = canvas.getBoundingClientRect();
    return [(e.clientX - r.left) / scale(), (e.clientY - r.top) / scale()];
  };
  const hitTest = (px, py) => boxGrab(get(), px, py, HANDLE_PX / scale());
  let drag = null;
  canvas.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    canvas.focus();
    canvas.setPointerCapture(e.pointerId);
    const [px, py] = toImage(e);
    const [W, H] = size();
    const hit = hitTest(px, py);
    drag = hit ? { ...hit, start: [px, py], orig: [...get()] } : { mode: "draw", start: [within(px, W), within(py, H)] };
  });
  canvas.addEventListener("pointermove", (e) => {
    const [px, py] = toImage(e);
    if (!drag) {
      canvas.style.cursor = grabCursor(hitTest(px, py));
      return;
    }
    const [W, H] = size();
    if (drag.mode === "draw") {
      const [sx, sy] = drag.start;
      const cx = within(px, W), cy = within(py, H);
      set([Math.min(sx, cx), Math.min(sy, cy), Math.abs(cx - sx), Math.abs(cy - sy)].map(Math.round), "draw");
    } else {
      set(dragBox(drag, drag.orig, drag.start, px, py, W, H), drag.mode);
    }
  });
  const endDrag = () => {
    if (!drag) return;
    drag = null;
    end();
  };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointercancel", endDrag);
}

/** Size the context's canvas to show a width × height image at `scale`, sharp on any screen. */
export function fitCanvas(g, width, height, scale) {
  const canvas = g.canvas;
  const dpr = window.devicePixelRatio || 1;
  canvas.style.width = `${Math.round(width * scale)}px`;
  canvas.style.height = `${Math.round(height * scale)}px`;
  canvas.width = Math.round(width * scale * dpr);
  canvas.height = Math.round(height * scale * dpr);
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
}

/** Clear the canvas to the image (once it has loaded). */
export function paintImage(g, img, width, height, scale) {
  g.clearRect(0, 0, g.canvas.width, g.canvas.height);
  if (img.complete && img.naturalWidth) g.drawImage(img, 0, 0, width * scale, height * scale);
}

/** Outline `box`; returns its screen rectangle [x, y, w, h]. */
export function strokeBox(g, box, scale, color, width, dash = []) {
  const [x, y, w, hh] = box.map((v) => v * scale);
  g.lineWidth = width;
  g.strokeStyle = color;
  g.setLineDash(dash);
  g.strokeRect(x, y, w, hh);
  g.setLineDash([]);
  return [x, y, w, hh];
}

/**
 * The box being edited: a light fill, a solid outline under a dashed one (one of the two stands
 * out on any image) and, unless `handles` is null, its corners in that colour.
 * solid: [colour, line width]; dashed: [colour, line width, dash pattern].
 */
export function drawEditableBox(g, box, scale, { fill, solid, dashed, handles = null }) {
  const [x, y, w, hh] = box.map((v) => v * scale);
  g.fillStyle = fill;
  g.fillRect(x, y, w, hh);
  strokeBox(g, box, scale, ...solid);
  strokeBox(g, box, scale, ...dashed);
  if (!handles) return;
  g.fillStyle = handles;
  for (const [cx, cy] of [[x, y], [x + w, y], [x, y + hh], [x + w, y + hh]]) g.fillRect(cx - 4, cy - 4, 8, 8);
}

/** Lay out now if the image has loaded, else once it has. */
export function whenImageReady(img, layout) {
  if (img.complete && img.naturalWidth) layout();
  else img.addEventListener("load", layout, { once: true });
}
