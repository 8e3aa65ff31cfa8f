// Box + state: exactly one box on the image, drawn, moved and resized with the mouse or the
// keyboard, kept in image pixels and clipped to the image; or an outcome saying there is nothing
// to label / it cannot be determined. The state label is confirmed or corrected: the item brings
// its candidate labels (`candidates`, neutral order) and the listed one (`proposed_state`).
import { MIN_SIZE, clipBox, drawEditableBox, editBoxWithPointer, fitCanvas, paintImage, whenImageReady } from "./box_canvas.js";
import { h, mediaUrl, startWorkbench } from "./workbench.js";

function mount(container, item, draft, ctx) {
  // The form's one image field (the page's form description names it).
  const field = ctx.form.media[0].field;
  const url = mediaUrl(item, field);
  const labels = item.candidates;
  const proposed = item.proposed_state || "";
  let box = Array.isArray(draft.bbox) ? [...draft.bbox] : null;
  let outcome = draft.outcome || null;
  let state = draft.state || (labels.includes(proposed) ? proposed : "");
  let W = (item[field] && item[field].width) || 0;
  let H = (item[field] && item[field].height) || 0;

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
    fitCanvas(g, W, H, scale);
    draw();
  }

  function draw() {
    paintImage(g, img, W, H, scale);
    if (box) {
      drawEditableBox(g, box, scale, { fill: "rgba(36, 87, 197, 0.12)", solid: ["#ffd400", 2], dashed: ["#1d232b", 2, [4, 4]], handles: "#ffd400" });
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
  editBoxWithPointer(canvas, {
    scale: () => scale,
    size: () => [W, H],
    get: () => box,
    set(next, mode) {
      box = next;
      if (mode === "draw") outcome = null;
      draw();
    },
    end: () => setBox(box),
  });

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
  whenImageReady(img, layout);
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
