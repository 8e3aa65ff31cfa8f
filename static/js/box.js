// Box + state (ChangeIt-Frames): exactly one box on the image, drawn, moved and resized with the
// mouse or the keyboard, kept in image pixels and clipped to the image; or an outcome saying
// there is nothing to label / it cannot be determined. The state label is confirmed or corrected.
import { h, mediaUrl, startWorkbench } from "./workbench.js";

const HANDLE_PX = 8; // screen pixels around an edge that grab it for resizing
const MIN_SIZE = 2; // image pixels

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
 * {mode: "resize", edges: {l, r, t, b}}, {mode: "move"}, or null. Shared with review_box.js. */
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

function candidatesOf(item) {
  const raw = item.candidates || item.labels || item.state_labels || item.candidate_states || [];
  return raw.map((c) => (typeof c === "string" ? c : c.label || c.text || String(c)));
}

function mount(container, item, draft, ctx) {
  const url = mediaUrl(item, "image");
  const labels = candidatesOf(item);
  const proposed = item.proposed_state || item.state || "";
  let box = Array.isArray(draft.bbox) ? [...draft.bbox] : null;
  let outcome = draft.outcome || null;
  let state = draft.state || (labels.includes(proposed) ? proposed : "");
  let W = item.width || item.image_width || (item.image && item.image.width) || 0;
  let H = item.height || item.image_height || (item.image && item.image.height) || 0;

  const img = new Image();
  img.src = url;
  const canvas = h("canvas", { class: "box-canvas", tabindex: "0", "aria-label": "Image: drag to draw a box; arrow keys move it, Shift+arrows resize it" });
  const g = canvas.getContext("2d");
  const coords = h("output", { class: "box-coords mono", "data-bbox": "" });
  const outcomeButtons = {
    nothing_to_label: h("button", { type: "button", "data-outcome": "nothing_to_label", onclick: () => setOutcome("nothing_to_label") }, "Nothing to label ", h("kbd", {}, "N")),
    cannot_determine: h("button", { type: "button", "data-outcome": "cannot_determine", onclick: () => setOutcome("cannot_determine") }, "Cannot determine ", h("kbd", {}, "C")),
  };
  const radios = labels.map((label, i) => {
    const radio = h("input", { type: "radio", name: "state", value: label, checked: label === state });
    radio.addEventListener("change", () => {
      state = label;
      ctx.changed();
    });
    const key = i < 9 ? String(i + 1) : i === 9 ? "0" : "";
    return h("label", { class: `radio candidate ${label === proposed ? "proposed" : ""}` }, radio, " ", label, " ",
      label === proposed ? h("span", { class: "badge" }, "listed") : null, key ? h("kbd", {}, key) : null);
  });

  container.append(
    h("div", { class: "box-page" },
      h("div", { class: "box-stage" }, canvas),
      h("aside", { class: "card box-side" },
        h("h2", {}, item.object ? `Box the ${item.object}` : "Box the object"),
        proposed ? h("p", {}, "Listed state: ", h("b", {}, proposed), ". Confirm it or pick the right one.") : null,
        h("p", { class: "muted small" }, "Box (image pixels): ", coords),
        h("div", { class: "outcomes" }, outcomeButtons.nothing_to_label, outcomeButtons.cannot_determine,
          h("button", { type: "button", onclick: () => clearAll() }, "Clear ", h("kbd", {}, "Del"))),
        h("fieldset", { class: "radios candidates", id: "box-state" }, h("legend", {}, "State label"), radios),
      ),
    ),
  );

  // ---- geometry: screen <-> image pixels ----
  let scale = 1;
  function layout() {
    if (!W || !H) {
      W = img.naturalWidth;
      H = img.naturalHeight;
    }
    const stage = canvas.parentElement;
    const maxW = Math.max(200, stage.clientWidth || 800);
    const maxH = Math.max(200, window.innerHeight * 0.72);
    scale = Math.min(maxW / W, maxH / H, 4);
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = `${Math.round(W * scale)}px`;
    canvas.style.height = `${Math.round(H * scale)}px`;
    canvas.width = Math.round(W * scale * dpr);
    canvas.height = Math.round(H * scale * dpr);
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    draw();
  }
  const toImage = (e) => {
    const r = canvas.getBoundingClientRect();
    return [(e.clientX - r.left) / scale, (e.clientY - r.top) / scale];
  };

  function draw() {
    g.clearRect(0, 0, canvas.width, canvas.height);
    if (img.complete && img.naturalWidth) g.drawImage(img, 0, 0, W * scale, H * scale);
    if (box) {
      const [x, y, w, hh] = box.map((v) => v * scale);
      g.fillStyle = "rgba(36, 87, 197, 0.12)";
      g.fillRect(x, y, w, hh);
      g.lineWidth = 2;
      g.strokeStyle = "#ffd400";
      g.strokeRect(x, y, w, hh);
      g.setLineDash([4, 4]);
      g.strokeStyle = "#1d232b";
      g.strokeRect(x, y, w, hh);
      g.setLineDash([]);
      g.fillStyle = "#ffd400";
      for (const [cx, cy] of [[x, y], [x + w, y], [x, y + hh], [x + w, y + hh]]) g.fillRect(cx - 4, cy - 4, 8, 8);
    }
    if (outcome) {
      g.fillStyle = "rgba(0,0,0,0.45)";
      g.fillRect(0, 0, W * scale, H * scale);
      g.fillStyle = "#fff";
      g.font = "bold 20px system-ui, sans-serif";
      g.fillText(outcome === "nothing_to_label" ? "Nothing to label" : "Cannot determine", 16, 32);
    }
    coords.textContent = box ? `[${box.join(", ")}]` : outcome ? outcome : "none";
    coords.dataset.bbox = box ? JSON.stringify(box) : "";
    for (const [name, btn] of Object.entries(outcomeButtons)) btn.classList.toggle("active", outcome === name);
    ctx.refreshSubmit();
  }

  function setBox(next, { changed = true } = {}) {
    box = next ? clipBox(next, W, H) : null;
    if (box) outcome = null;
    draw();
    if (changed) ctx.changed();
  }
  function setOutcome(name) {
    outcome = outcome === name ? null : name;
    if (outcome) box = null;
    draw();
    ctx.changed();
  }
  function clearAll() {
    box = null;
    outcome = null;
    draw();
    ctx.changed();
  }

  // ---- mouse: draw, move, resize ----
  let drag = null;
  const hitTest = (px, py) => boxGrab(box, px, py, HANDLE_PX / scale);
  const cursorFor = grabCursor;
  canvas.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    canvas.focus();
    canvas.setPointerCapture(e.pointerId);
    const [px, py] = toImage(e);
    const hit = hitTest(px, py);
    if (hit) drag = { ...hit, start: [px, py], orig: [...box] };
    else drag = { mode: "draw", start: [Math.max(0, Math.min(W, px)), Math.max(0, Math.min(H, py))] };
  });
  canvas.addEventListener("pointermove", (e) => {
    const [px, py] = toImage(e);
    if (!drag) {
      canvas.style.cursor = cursorFor(hitTest(px, py));
      return;
    }
    const [sx, sy] = drag.start;
    if (drag.mode === "draw") {
      const cx = Math.max(0, Math.min(W, px)), cy = Math.max(0, Math.min(H, py));
      box = [Math.min(sx, cx), Math.min(sy, cy), Math.abs(cx - sx), Math.abs(cy - sy)].map(Math.round);
      outcome = null;
      draw();
    } else {
      box = dragBox(drag, drag.orig, drag.start, px, py, W, H);
      draw();
    }
  });
  const endDrag = () => {
    if (!drag) return;
    drag = null;
    setBox(box);
  };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointercancel", endDrag);

  // ---- keyboard ----
  const step = (e) => (e.ctrlKey || e.metaKey ? 10 : 1) * Math.max(1, Math.round(Math.max(W, H) / 400));
  const nudge = (dx, dy, dw, dh) => (e) => {
    if (!box) {
      if (!W) return;
      // No box yet: the first arrow press creates one in the middle to adjust from there.
      setBox([Math.round(W / 4), Math.round(H / 4), Math.round(W / 2), Math.round(H / 2)]);
      return;
    }
    const s = step(e);
    const [x, y, w, hh] = box;
    if (dw || dh) {
      setBox([x, y, Math.max(MIN_SIZE, w + dw * s), Math.max(MIN_SIZE, hh + dh * s)]);
    } else {
      setBox([Math.max(0, Math.min(W - w, x + dx * s)), Math.max(0, Math.min(H - hh, y + dy * s)), w, hh]);
    }
  };
  const keys = [
    ["arrowleft", "Move the box left", nudge(-1, 0, 0, 0)],
    ["arrowright", "Move the box right", nudge(1, 0, 0, 0)],
    ["arrowup", "Move the box up", nudge(0, -1, 0, 0)],
    ["arrowdown", "Move the box down", nudge(0, 1, 0, 0)],
    ["shift+arrowleft", "Make the box narrower", nudge(0, 0, -1, 0)],
    ["shift+arrowright", "Make the box wider", nudge(0, 0, 1, 0)],
    ["shift+arrowup", "Make the box shorter", nudge(0, 0, 0, -1)],
    ["shift+arrowdown", "Make the box taller", nudge(0, 0, 0, 1)],
  ];
  for (const [combo, label, fn] of keys) {
    ctx.shortcuts.register(combo, label, fn, { group: "Box" });
    ctx.shortcuts.register(`ctrl+${combo}`, `${label} (10× step)`, fn, { group: "Box", hidden: true });
  }
  ctx.shortcuts.register("delete", "Remove the box / answer", clearAll, { group: "Box" });
  ctx.shortcuts.register("backspace", "Remove the box / answer", clearAll, { group: "Box" });
  ctx.shortcuts.register("n", "Nothing to label", () => setOutcome("nothing_to_label"), { group: "Box" });
  ctx.shortcuts.register("c", "Cannot determine", () => setOutcome("cannot_determine"), { group: "Box" });
  ctx.shortcuts.register("enter", "Submit", () => ctx.submit(), { group: "Box" });
  labels.slice(0, 10).forEach((label, i) => {
    const key = i < 9 ? String(i + 1) : "0";
    ctx.shortcuts.register(key, `State: ${label}`, () => {
      const radio = radios[i].querySelector("input");
      radio.checked = true;
      radio.dispatchEvent(new Event("change"));
    }, { group: "State label" });
  });

  const onResize = () => layout();
  window.addEventListener("resize", onResize);
  if (img.complete && img.naturalWidth) layout();
  else img.addEventListener("load", layout, { once: true });
  requestAnimationFrame(() => canvas.focus());

  return {
    draft() {
      return { bbox: box, outcome, state };
    },
    blocked() {
      return "";
    },
    collect() {
      if (outcome) return { result: { outcome } };
      if (!box) return { error: "Draw a box around the object, or answer N (nothing to label) / C (cannot determine).", field: "bbox" };
      if (!state) return { error: "Pick the state label.", field: "state" };
      return { result: { bbox: [...box], state } };
    },
    focusField(name) {
      if (name === "state") (radios[0] && radios[0].querySelector("input")).focus();
      else canvas.focus();
    },
    destroy() {
      window.removeEventListener("resize", onResize);
    },
  };
}

export const boxWorkflow = { name: "box", mount };

if (document.querySelector("[data-workbench]")) startWorkbench(boxWorkflow);
