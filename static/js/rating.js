// Likert video rating: the video with frame stepping and looping, the prompt, the protocol's
// criteria scored 1–5 (N/A only where the criterion allows it) under the scale's anchors, the rubric
// in a panel below the scores (never over the video). Submit
// stays disabled until the video has played through once: the ranges the browser actually played
// must cover the whole video (seeking or dragging the scrubber to the end does not count).
// The criteria, their labels and the rubric come with the item (annotation/selectors.py
// annotator_item_payload: criteria [{key, label, allows_na, rubric}], rubric, rubric_text).
import { coversWhole, h, mediaUrl, startWorkbench, videoPlayer } from "./workbench.js";

/** The item's criteria as [{key, label, nullable, help}]. */
export function criteriaOf(item) {
  return item.criteria.map((c) => ({ key: c.key, label: c.label, nullable: c.allows_na, help: c.rubric }));
}

/** The rubric dialog's body: the project's one rubric text (rubric_text, if any), then the
 * per-criterion wording (rubric: criterion -> text). */
function rubricNode(rubric, criteria, text) {
  const textNode = text ? h("div", { class: "rubric-text", "data-rubric-text": "" }, text.split(/\n{2,}/).map((p) => h("p", {}, p))) : null;
  if (!Object.keys(rubric).length) return textNode || h("p", { class: "muted" }, "This project has no rubric text.");
  const byKey = Object.fromEntries(criteria.map((c) => [c.key, c]));
  // A project's single rubric text comes first; the per-criterion wording follows as a reminder.
  return h("div", { class: "rubric-text" }, textNode, textNode ? h("h3", { class: "rubric-per-criterion" }, "Per criterion") : null,
    Object.entries(rubric).map(([key, value]) => h("section", { "data-rubric": key }, h("h3", {}, (byKey[key] && byKey[key].label) || key), h("p", {}, value))));
}

function mount(container, item, draft, ctx) {
  const criteria = criteriaOf(item);
  const scores = { ...(draft.scores || {}) };
  let watched = Boolean(draft.watched);
  let focusIndex = Math.max(0, criteria.findIndex((c) => !(c.key in scores)));
  // The asset's frame rate comes from the server (read at import); 25 only when it is unknown.
  // The form's one video field (the page's form description names it).
  const field = ctx.form.media[0].field;
  const asset = item[field] || {};
  let fps = asset.fps || 25;

  const { video, figure } = videoPlayer(mediaUrl(item, field), null, { loop: Boolean(draft.loop) });
  const loopBox = h("input", { type: "checkbox", checked: video.loop, "data-loop": "" });
  loopBox.addEventListener("change", () => {
    video.loop = loopBox.checked;
  });
  const watchedNote = h("span", { class: "watched", "data-watched": "" });
  const frameInfo = h("span", { class: "mono muted" });
  const updateWatched = () => {
    watchedNote.textContent = watched ? "✓ watched through" : "watch the whole video to unlock Submit";
    watchedNote.classList.toggle("ok", watched);
    container.closest("[data-workbench]")?.toggleAttribute("data-watched", watched);
  };
  const markWatched = () => {
    if (watched) return;
    watched = true;
    updateWatched();
    ctx.notices.clear("blocked");
    ctx.changed();
  };
  // Without a frame rate from the server, measure it: the smallest step between two presented
  // frames while playing is one frame's duration.
  if (!asset.fps && "requestVideoFrameCallback" in HTMLVideoElement.prototype) {
    let last = null;
    let best = Infinity;
    const onFrame = (_now, meta) => {
      if (last !== null && meta.mediaTime > last) {
        best = Math.min(best, meta.mediaTime - last);
        if (best < 1) fps = Math.round(1 / best);
      }
      last = meta.mediaTime;
      if (video.isConnected) video.requestVideoFrameCallback(onFrame);
    };
    video.requestVideoFrameCallback(onFrame);
  }
  // video.played lists what the browser really played (a seek starts a new range), so only
  // playback through every part of the video unlocks Submit, looping or not.
  const checkWatched = () => {
    if (watched) return;
    const tolerance = Math.min(0.5, Math.max(0.1, 2 / fps));
    if (coversWhole(video.played, video.duration, tolerance)) markWatched();
  };
  for (const type of ["timeupdate", "ended", "pause", "seeking"]) video.addEventListener(type, checkWatched);
  video.addEventListener("timeupdate", () => {
    frameInfo.textContent = `${video.currentTime.toFixed(2)} s · frame ${Math.round(video.currentTime * fps)}`;
  });
  const stepFrame = (dir) => {
    video.pause();
    const d = video.duration || 0;
    video.currentTime = Math.max(0, Math.min(d, video.currentTime + dir / fps));
  };
  const togglePlay = () => (video.paused ? video.play().catch(() => undefined) : video.pause());

  // ---- criteria ----
  const rows = criteria.map((c, index) => {
    const values = [1, 2, 3, 4, 5, ...(c.nullable ? ["na"] : [])];
    const inputs = values.map((v) => {
      const current = scores[c.key];
      const checked = c.key in scores && (v === "na" ? current === null : current === v);
      const input = h("input", { type: "radio", name: `score-${c.key}`, value: String(v), checked, "aria-label": `${c.label}: ${v === "na" ? "N/A" : v}` });
      input.addEventListener("change", () => {
        scores[c.key] = v === "na" ? null : v;
        setFocus(index);
        row.classList.add("done");
        ctx.changed();
      });
      input.addEventListener("focus", () => setFocus(index, { move: false }));
      return h("label", { class: `score ${v === "na" ? "na" : ""}` }, input, h("span", {}, v === "na" ? "N/A" : String(v)));
    });
    const row = h("div", { class: `criterion ${c.key in scores ? "done" : ""}`, dataset: { criterion: c.key }, tabindex: "-1" },
      h("div", { class: "criterion-name", title: c.help || null }, c.label, c.nullable ? h("span", { class: "muted small" }, " (N/A allowed)") : null),
      h("div", { class: "scores", role: "radiogroup", "aria-label": c.label }, inputs));
    row.addEventListener("click", () => setFocus(index, { move: false }));
    return row;
  });
  function setFocus(index, { move = true } = {}) {
    focusIndex = Math.max(0, Math.min(criteria.length - 1, index));
    rows.forEach((r, i) => r.classList.toggle("focused", i === focusIndex));
    if (move) {
      const checked = rows[focusIndex].querySelector("input:checked");
      if (document.activeElement && document.activeElement.closest && document.activeElement.closest(".criterion")) {
        (checked || rows[focusIndex]).focus({ preventScroll: true });
      }
      rows[focusIndex].scrollIntoView({ block: "nearest" });
    }
  }
  function setScore(value, { advance = true } = {}) {
    const c = criteria[focusIndex];
    if (value === null && !c.nullable) return;
    const input = rows[focusIndex].querySelector(`input[value="${value === null ? "na" : value}"]`);
    input.checked = true;
    input.dispatchEvent(new Event("change"));
    // Fast entry: after a typed score, move on to the next criterion (the arrows adjust in place),
    // and say so: the focus moves to that row and the line under the scores names it.
    if (advance && focusIndex < criteria.length - 1) {
      setFocus(focusIndex + 1);
      rows[focusIndex].focus({ preventScroll: true });
      movedNote.textContent = `${c.label}: ${value === null ? "N/A" : value} — now scoring ${criteria[focusIndex].label}`;
    } else {
      movedNote.textContent = `${c.label}: ${value === null ? "N/A" : value}`;
    }
  }
  const movedNote = h("p", { class: "muted small moved-note", "data-score-moved": "", "aria-live": "polite" },
    "Typing a score (1–5, 0 for N/A) moves on to the next criterion; ←/→ change it in place.");

  // The rubric opens beside the scores, in the criteria card, so the video stays in view while
  // reading it (a modal dialog would cover the video being rated).
  const panel = h("section", { class: "rubric rubric-panel", "data-rubric-dialog": "", hidden: true, "aria-label": "Rubric" },
    h("button", { type: "button", class: "close", "aria-label": "Close the rubric", onclick: () => closeRubric() }, "×"),
    h("h2", {}, "Rubric"), rubricNode(item.rubric, criteria, item.rubric_text));
  const rubricButton = h("button", { type: "button", onclick: () => openRubric(), "data-rubric-open": "", "aria-expanded": "false" }, "Rubric ", h("kbd", {}, "R"));
  function closeRubric() {
    panel.hidden = true;
    rubricButton.setAttribute("aria-expanded", "false");
  }
  function openRubric() {
    if (!panel.hidden) return closeRubric();
    panel.hidden = false;
    rubricButton.setAttribute("aria-expanded", "true");
    // Scroll only when none of it would be in view (a small window): scrolling takes the video away.
    if (panel.getBoundingClientRect().top > window.innerHeight - 120) panel.scrollIntoView({ block: "nearest" });
  }
  // What the ends of the scale mean, over the score buttons (the rubric says it per criterion).
  const anchors = h("span", { class: "muted small scale-anchors", "data-scale-anchors": "", title: "The rubric says what 1 and 5 mean for each criterion." },
    h("b", {}, "1"), " = bad … ", h("b", {}, "5"), " = excellent");

  container.append(
    h("div", { class: "rating" },
      h("div", { class: "rating-video" },
        figure,
        h("div", { class: "video-tools" },
          h("button", { type: "button", onclick: () => stepFrame(-1), title: "Previous frame (,)" }, "◀ frame ", h("kbd", {}, ",")),
          h("button", { type: "button", onclick: togglePlay, title: "Play / pause (Space)" }, "Play/pause ", h("kbd", {}, "Space")),
          h("button", { type: "button", onclick: () => stepFrame(1), title: "Next frame (.)" }, "frame ▶ ", h("kbd", {}, ".")),
          h("label", { class: "inline-check" }, loopBox, " loop ", h("kbd", {}, "L")),
          frameInfo),
        h("p", { class: "prompt" }, h("span", { class: "muted" }, "Prompt: "), h("q", { "data-prompt": "" }, item.prompt || "")),
        watchedNote),
      h("section", { class: "card criteria" },
        h("div", { class: "criteria-head" }, h("h2", {}, "Scores"), anchors, rubricButton),
        rows, movedNote, panel),
    ),
  );
  updateWatched();
  setFocus(focusIndex, { move: false });

  const s = ctx.shortcuts;
  s.register("space", "Play / pause", togglePlay, { group: "Video" });
  s.register("k", "Play / pause", togglePlay, { group: "Video", hidden: true });
  s.register(",", "Previous frame", () => stepFrame(-1), { group: "Video" });
  s.register(".", "Next frame", () => stepFrame(1), { group: "Video" });
  s.register("l", "Loop on/off", () => {
    loopBox.checked = !loopBox.checked;
    loopBox.dispatchEvent(new Event("change"));
  }, { group: "Video" });
  s.register("arrowdown", "Next criterion", () => setFocus(focusIndex + 1), { group: "Scores" });
  s.register("arrowup", "Previous criterion", () => setFocus(focusIndex - 1), { group: "Scores" });
  s.register("j", "Next criterion", () => setFocus(focusIndex + 1), { group: "Scores", hidden: true });
  s.register("arrowright", "Score +1", () => setScore(Math.min(5, (scores[criteria[focusIndex].key] || 0) + 1), { advance: false }), { group: "Scores" });
  s.register("arrowleft", "Score −1", () => setScore(Math.max(1, (scores[criteria[focusIndex].key] || 2) - 1), { advance: false }), { group: "Scores" });
  for (const n of [1, 2, 3, 4, 5]) s.register(String(n), "Score the focused criterion, then move on to the next", () => setScore(n), { group: "Scores" });
  s.register("0", "N/A (where allowed), then move on to the next", () => setScore(null), { group: "Scores" });
  s.register("r", "Open / close the rubric", openRubric, { group: "Scores" });
  s.register("escape", "Close the rubric", () => (panel.hidden ? false : closeRubric()), { group: "Scores", hidden: true, inInputs: true });

  return {
    draft() {
      return { scores: { ...scores }, watched, loop: video.loop };
    },
    blocked() {
      if (!watched) return "Watch the whole video once before submitting.";
      return "";
    },
    collect() {
      const missing = criteria.find((c) => !(c.key in scores));
      if (missing) return { error: `Score “${missing.label}” (1–5${missing.nullable ? " or N/A" : ""}).`, field: `scores.${missing.key}` };
      return { result: { scores: Object.fromEntries(criteria.map((c) => [c.key, scores[c.key]])) } };
    },
    focusField(name) {
      const key = name.replace(/^scores\./, "");
      const index = criteria.findIndex((c) => c.key === key);
      if (index >= 0) {
        setFocus(index);
        (rows[index].querySelector("input:checked") || rows[index].querySelector("input")).focus();
      }
    },
    destroy() {
      video.pause();
      video.removeAttribute("src");
      video.load();
    },
  };
}

export const ratingWorkflow = { name: "rating", mount };

if (document.querySelector("[data-workbench]")) startWorkbench(ratingWorkflow);
