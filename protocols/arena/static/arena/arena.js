// Pairwise comparison: two outputs of one prompt side by side (two videos or two images), a vote
// between them per criterion: ← the left is better, → the right is better, T a tie, B both bad.
// The item comes with its outputs already placed (annotation/selectors.py annotator_item_payload,
// from the protocol's own form module): `left` and `right` (assets), `kind` ("video" | "image") and
// `shown` ("ab" | "ba"), sent back with the votes so the server stores them about a and b. Nothing
// here knows which model made which output. The criteria come with the page's form description
// ({key, label, required}, the first the vote on the whole).
// Videos play together (one play/pause for both) and the votes unlock once both played through
// (the ranges the browser really played cover each video; seeking does not count); images unlock
// them once both are shown. A vote on videos also reports the seconds of each the browser played
// (`played`: {left, right}); the server checks them, and the time since the task was shown,
// against its own clock (protocols/arena/viewing.py).
import { coversWhole, h, mediaUrl, startWorkbench } from "../js/workbench.js";

const SCREEN_VOTES = [
  { vote: "left", key: "arrowleft", label: "← Left is better", short: "left" },
  { vote: "tie", key: "t", label: "Tie", short: "tie" },
  { vote: "both_bad", key: "b", label: "Both bad", short: "both bad" },
  { vote: "right", key: "arrowright", label: "Right is better →", short: "right" },
];

/** A stored answer (a, b terms: an amendment's starting point) in screen terms for `shown`. */
export function screenVotes(draft, shown, criteria) {
  if (draft.votes && draft.shown === shown) return { ...draft.votes };
  if (!("winner" in draft)) return {};
  const toScreen = (v) => (v === shown[0] ? "left" : v === shown[1] ? "right" : v);
  const out = { [criteria[0].key]: toScreen(draft.winner) };
  for (const [key, vote] of Object.entries(draft.criteria || {})) out[key] = toScreen(vote);
  return out;
}

function mount(container, item, draft, ctx) {
  const criteria = ctx.form.criteria;
  const shown = item.shown;
  const votes = screenVotes(draft, shown, criteria);
  const watched = { left: Boolean(draft.watched?.left), right: Boolean(draft.watched?.right) };
  // Seconds played of each video: what a saved draft had (a reload starts the videos afresh) or
  // what the browser played since, whichever is more.
  const playedBefore = { left: Number(draft.played?.left) || 0, right: Number(draft.played?.right) || 0 };
  let focusIndex = Math.max(0, criteria.findIndex((c) => !(c.key in votes)));
  const isVideo = item.kind === "video";

  const sides = ["left", "right"].map((side) => {
    const url = mediaUrl(item, side);
    const el = isVideo
      ? h("video", { src: url, preload: "auto", playsinline: true, muted: true, "data-side-video": side })
      : h("img", { src: url, alt: `${side} output`, "data-side-image": side });
    if (isVideo) el.muted = true;
    const mark = h("span", { class: "watched", "data-side-watched": side });
    const pane = h("figure", { class: `media-figure arena-side ${item.kind}`, dataset: { side } }, el,
      h("figcaption", {}, side === "left" ? "Left " : "Right ", h("kbd", {}, side === "left" ? "←" : "→"), " ", mark));
    return { side, el, mark, pane };
  });

  const bothSeen = () => watched.left && watched.right;
  const playedSeconds = () => {
    const out = {};
    for (const s of sides) {
      let sum = 0;
      if (isVideo) for (let i = 0; i < s.el.played.length; i++) sum += s.el.played.end(i) - s.el.played.start(i);
      out[s.side] = Math.round(Math.max(playedBefore[s.side], sum) * 100) / 100;
    }
    return out;
  };
  const updateWatched = () => {
    for (const s of sides) {
      s.mark.textContent = watched[s.side] ? "✓ " + (isVideo ? "watched" : "shown") : isVideo ? "not watched through yet" : "loading";
      s.mark.classList.toggle("ok", watched[s.side]);
    }
    container.closest("[data-workbench]")?.toggleAttribute("data-watched", bothSeen());
    for (const button of container.querySelectorAll("[data-vote]")) button.disabled = !bothSeen();
    gate.textContent = bothSeen() ? "" : isVideo ? "Play both videos through to vote (Space plays both)." : "Both images must be shown to vote.";
  };
  const markSeen = (side) => {
    if (watched[side]) return;
    watched[side] = true;
    updateWatched();
    if (bothSeen()) ctx.notices.clear("blocked");
    ctx.changed();
  };

  // ---- playing both videos as one ----
  const videos = sides.filter(() => isVideo).map((s) => s.el);
  const playing = () => videos.some((v) => !v.paused && !v.ended);
  const togglePlay = () => {
    if (!isVideo) return;
    if (playing()) {
      for (const v of videos) v.pause();
      return;
    }
    // An ended video starts again from the beginning; the other one with it, so they stay together.
    if (videos.some((v) => v.ended)) for (const v of videos) v.currentTime = 0;
    for (const v of videos) v.play().catch(() => undefined);
  };
  const restart = () => {
    for (const v of videos) {
      v.pause();
      v.currentTime = 0;
    }
  };
  if (isVideo) {
    for (const s of sides) {
      const check = () => {
        const fps = (item[s.side] && item[s.side].fps) || 25;
        if (coversWhole(s.el.played, s.el.duration, Math.min(0.5, Math.max(0.1, 2 / fps)))) markSeen(s.side);
      };
      for (const type of ["timeupdate", "ended", "pause", "seeking"]) s.el.addEventListener(type, check);
      s.el.addEventListener("click", togglePlay);
      // One clip pausing (the other ended, or the browser stalled) pauses both, so they stay in step.
      s.el.addEventListener("pause", () => {
        if (!s.el.ended) for (const v of videos) if (v !== s.el && !v.paused) v.pause();
      });
    }
  } else {
    for (const s of sides) {
      if (s.el.complete && s.el.naturalWidth) markSeen(s.side);
      else s.el.addEventListener("load", () => markSeen(s.side), { once: true });
    }
  }

  // ---- votes ----
  const rows = criteria.map((c, index) => {
    const buttons = SCREEN_VOTES.map((v) => {
      const button = h("button", { type: "button", class: "vote", dataset: { vote: v.vote, criterion: c.key }, "aria-pressed": "false" }, v.label);
      button.addEventListener("click", () => {
        setFocus(index);
        castVote(v.vote);
      });
      return button;
    });
    const row = h("div", { class: "criterion", dataset: { criterion: c.key }, tabindex: "-1" },
      h("div", { class: "criterion-name" }, c.label, c.required ? null : h("span", { class: "muted small" }, " (optional)")),
      h("div", { class: "votes", role: "group", "aria-label": c.label }, buttons));
    row.addEventListener("click", () => setFocus(index));
    return row;
  });
  const showVotes = () => {
    rows.forEach((row, i) => {
      const chosen = votes[criteria[i].key];
      row.classList.toggle("done", chosen !== undefined);
      for (const b of row.querySelectorAll("[data-vote]")) {
        const on = b.dataset.vote === chosen;
        b.classList.toggle("chosen", on);
        b.setAttribute("aria-pressed", String(on));
      }
    });
  };
  function setFocus(index) {
    focusIndex = Math.max(0, Math.min(criteria.length - 1, index));
    rows.forEach((r, i) => r.classList.toggle("focused", i === focusIndex));
  }
  function castVote(vote) {
    if (!bothSeen()) {
      ctx.notices.show(isVideo ? "Watch both videos through before voting." : "Wait until both images are shown.", { kind: "warning", id: "blocked" });
      return;
    }
    const c = criteria[focusIndex];
    votes[c.key] = vote;
    showVotes();
    const label = SCREEN_VOTES.find((v) => v.vote === vote).short;
    if (focusIndex < criteria.length - 1) {
      setFocus(focusIndex + 1);
      note.textContent = `${c.label}: ${label} — now ${criteria[focusIndex].label} (optional; Ctrl+Enter submits)`;
    } else {
      note.textContent = `${c.label}: ${label}`;
    }
    ctx.changed();
  }
  const note = h("p", { class: "muted small moved-note", "data-vote-note": "", "aria-live": "polite" },
    "← / → the better side, T tie, B both bad; ↑ / ↓ pick the criterion.");
  const gate = h("p", { class: "muted small", "data-vote-gate": "" });

  // Side by side at equal widths (styles through the CSSOM: the page's policy allows no style attribute).
  const sideBySide = h("div", { class: "arena-sides" }, sides.map((s) => s.pane));
  Object.assign(sideBySide.style, { display: "grid", gridTemplateColumns: "1fr 1fr", gap: "1rem" });
  for (const s of sides) Object.assign(s.el.style, { width: "100%", height: "auto" });
  container.append(
    h("div", { class: "arena" },
      h("p", { class: "prompt" }, h("span", { class: "muted" }, "Prompt: "), h("q", { "data-prompt": "" }, item.prompt || "")),
      sideBySide,
      isVideo
        ? h("div", { class: "video-tools" },
          h("button", { type: "button", onclick: togglePlay, "data-play-both": "" }, "Play/pause both ", h("kbd", {}, "Space")),
          h("button", { type: "button", onclick: restart }, "Back to the start ", h("kbd", {}, "0")))
        : null,
      h("section", { class: "card criteria" }, h("h2", {}, "Which is better?"), gate, rows, note)),
  );
  setFocus(focusIndex);
  showVotes();
  updateWatched();

  const s = ctx.shortcuts;
  if (isVideo) {
    s.register("space", "Play / pause both videos", togglePlay, { group: "Videos" });
    s.register("0", "Both videos back to the start", restart, { group: "Videos" });
  }
  for (const v of SCREEN_VOTES) s.register(v.key, `Vote: ${v.short}`, () => castVote(v.vote), { group: "Vote" });
  s.register("arrowdown", "Next criterion", () => setFocus(focusIndex + 1), { group: "Vote" });
  s.register("arrowup", "Previous criterion", () => setFocus(focusIndex - 1), { group: "Vote" });

  return {
    draft() {
      return { votes: { ...votes }, shown, watched: { ...watched }, ...(isVideo ? { played: playedSeconds() } : {}) };
    },
    blocked() {
      if (!bothSeen()) return isVideo ? "Watch both videos through before voting." : "Wait until both images are shown.";
      return "";
    },
    collect() {
      const headline = criteria[0];
      if (!(headline.key in votes)) return { error: `Vote on “${headline.label}”: ← left, → right, T tie or B both bad.`, field: `votes.${headline.key}` };
      const chosen = Object.fromEntries(criteria.filter((c) => c.key in votes).map((c) => [c.key, votes[c.key]]));
      return { result: { shown, votes: chosen, ...(isVideo ? { played: playedSeconds() } : {}) } };
    },
    focusField(name) {
      const index = criteria.findIndex((c) => `votes.${c.key}` === name);
      if (index >= 0) setFocus(index);
    },
    destroy() {
      for (const v of videos) {
        v.pause();
        v.removeAttribute("src");
        v.load();
      }
    },
  };
}

export const arenaWorkflow = { name: "pairwise", mount };

if (document.querySelector("[data-workbench]")) startWorkbench(arenaWorkflow);
