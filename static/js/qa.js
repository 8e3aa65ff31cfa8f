// Blind QA verification: the annotator answers from the media alone (an image list or videos side
// by side, as the page's form description lists the media) and may flag the item. The item never
// carries the expected answer; it says the answer's format and whether several letters may be
// chosen (`multiple`), from the item's or the project's setting.
import { h, mediaList, mediaUrl, startWorkbench, videoPlayer, zoomableImage } from "./workbench.js";

export const FLAGS = [
  ["missing_correct_option", "No listed option is correct", "m"],
  ["wrong_ground_truth", "The expected answer is probably wrong", "w"],
  ["ambiguous", "Ambiguous question", "u"],
  ["insufficient_evidence", "The media do not show enough", "i"],
];

// The flag that says no listed option is correct: an answer says so one way only (the server
// refuses the others, annotation/results.py validate_qa): this flag with no option picked, or, on an
// item listing a "none of the others" option (item.none_option), that option alone; the flag is not
// offered there.
const NO_CORRECT_OPTION = "missing_correct_option";

/** A set answer's object as the server compares it (protocols/normalize.py answer_text). */
export function objectKey(text) {
  const edges = " \t\r\n.,;:!?\"'`()[]{}";
  const t = String(text).replace(/\s+/g, " ").trim();
  let a = 0;
  let b = t.length;
  while (a < b && edges.includes(t[a])) a += 1;
  while (b > a && edges.includes(t[b - 1])) b -= 1;
  return t.slice(a, b).trim().toLowerCase();
}

/** Why an answer contradicts itself or its flags (the server's rule), or "". */
export function contradiction(item, answer, flags) {
  const format = item.format;
  if (format === "choice") {
    const picked = Array.isArray(answer) ? answer : answer ? [answer] : [];
    const none = item.none_option || null;
    if (none) {
      if (flags.includes(NO_CORRECT_OPTION)) return `Option ${none} says that no listed option is correct: pick ${none} (alone) instead of the flag.`;
      const others = picked.filter((x) => x !== none);
      if (picked.includes(none) && others.length) return `Option ${none} says that no listed option is correct, so it cannot go with ${others.join(", ")}.`;
    } else if (flags.includes(NO_CORRECT_OPTION) && picked.length) {
      return `The flag “no listed option is correct” contradicts the answer ${picked.join(", ")}: clear the flag, or leave the options unpicked.`;
    }
  } else if (format === "set" && Array.isArray(answer)) {
    const seen = new Set();
    for (const name of answer) {
      const key = objectKey(name);
      if (seen.has(key)) return `“${name}” is named twice: name each object once.`;
      seen.add(key);
    }
  }
  return "";
}

function imageLabel(index, count) {
  if (index === 0) return "Initial";
  if (index === 1) return "Final";
  return count > 3 ? `Candidate ${index - 1}` : "Candidate";
}

/** The newest machine-made answer (the server sends suggestions newest first, each in the form's
 * shape: {source, machine_made, result: {answer}}), if any. */
export function suggestionOf(item) {
  const s = item.suggestions[0];
  return s ? { source: s.source, answer: s.result.answer } : null;
}

function mount(container, item, draft, ctx) {
  const format = item.format;
  const multiple = format === "choice" && item.multiple;
  const options = item.options; // [{letter, text}]
  // A draft (the annotator's own work) wins; else a model's suggestion pre-fills the answer,
  // marked as machine-made until the annotator changes it. Flags are never pre-filled.
  const suggestion = suggestionOf(item);
  const hasDraft = Object.keys(draft || {}).some((k) => !k.startsWith("_"));
  let machine = hasDraft ? Boolean(draft._machine) : Boolean(suggestion);
  if (!hasDraft && suggestion) draft = { answer: suggestion.answer, flags: [] };
  const flagsSet = new Set(draft.flags || []);
  const machineBadge = h("span", { class: "badge machine", "data-machine": "", title: `Pre-filled by ${suggestion ? suggestion.source : "a model"}`, hidden: !machine }, "machine");
  const machineNote = suggestion
    ? h("p", { class: "muted small machine-note", hidden: !machine }, h("span", { class: "badge machine" }, "machine"),
      ` answer suggested by ${suggestion.source}, not checked by anyone; change it if the media show otherwise.`)
    : null;
  const answerEdited = () => {
    if (machine) {
      machine = false;
      machineBadge.hidden = true;
      if (machineNote) machineNote.hidden = true;
    }
    ctx.changed();
  };

  // ---- media: videos side by side, each captioned with its field's label; or an image list ----
  const videos = ctx.form.media.filter((m) => m.kind === "video");
  let media;
  const players = [];
  if (videos.length) {
    const figures = videos.map((m) => videoPlayer(mediaUrl(item, m.field), m.label, { muted: true }));
    players.push(...figures.map((f) => f.video));
    media = h("div", { class: "pair videos" }, figures.map((f) => f.figure));
  } else {
    const images = ctx.form.media.flatMap((m) => (m.kind === "images" ? mediaList(item, m.field) : [mediaUrl(item, m.field)].filter(Boolean)));
    media = h("div", { class: `pair n${images.length}` }, images.map((url, i) => zoomableImage(url, `Image ${i + 1}`, imageLabel(i, images.length))));
  }

  // ---- answer input matching the format ----
  let answerEl;
  let getAnswer;
  let focusAnswer;
  const optionInputs = [];
  if (format === "choice") {
    const chosen = new Set(Array.isArray(draft.answer) ? draft.answer : draft.answer ? [draft.answer] : []);
    answerEl = h("fieldset", { class: "options", id: "qa-answer" },
      h("legend", {}, multiple ? "Choose every correct option" : "Choose one option", " ", machineBadge),
      options.map(({ letter, text }) => {
        const input = h("input", { type: multiple ? "checkbox" : "radio", name: "answer", value: letter, checked: chosen.has(letter) });
        input.addEventListener("change", answerEdited);
        optionInputs.push(input);
        return h("label", { class: "option" }, input, h("kbd", {}, letter), h("span", {}, text));
      }));
    getAnswer = () => {
      const picked = optionInputs.filter((x) => x.checked).map((x) => x.value);
      return multiple ? picked : picked[0] || null;
    };
    focusAnswer = () => (optionInputs.find((x) => x.checked) || optionInputs[0])?.focus();
    options.slice(0, 6).forEach(({ letter }, i) => {
      ctx.shortcuts.register(letter.toLowerCase(), `Option ${letter}`, () => {
        const input = optionInputs[i];
        input.checked = multiple ? !input.checked : true;
        input.dispatchEvent(new Event("change"));
        input.focus();
      }, { group: "Answer" });
    });
  } else if (format === "count") {
    const input = h("input", { type: "number", min: "0", step: "1", inputmode: "numeric", id: "qa-answer", name: "answer", value: draft.answer ?? "", placeholder: "a whole number" });
    input.addEventListener("input", answerEdited);
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.ctrlKey) {
        e.preventDefault();
        ctx.submit();
      }
    });
    answerEl = h("label", { class: "count" }, "Count ", input, " ", machineBadge);
    getAnswer = () => (input.value.trim() === "" ? null : Number(input.value));
    focusAnswer = () => input.focus();
  } else {
    // A list of strings: type one, Enter adds it; Enter on an empty box submits.
    const values = Array.isArray(draft.answer) ? [...draft.answer] : [];
    const chips = h("ul", { class: "chips", "data-set": "" });
    const input = h("input", { type: "text", id: "qa-answer", name: "answer", placeholder: "type an object, Enter to add (commas work too)", autocomplete: "off" });
    const renderChips = () => {
      chips.replaceChildren(...values.map((v, i) => h("li", { class: "chip" }, v, h("button", { type: "button", "aria-label": `Remove ${v}`, onclick: () => { values.splice(i, 1); renderChips(); answerEdited(); input.focus(); } }, "×"))));
    };
    const addFromInput = () => {
      const parts = input.value.split(",").map((s) => s.trim()).filter(Boolean);
      if (!parts.length) return false;
      values.push(...parts);
      input.value = "";
      renderChips();
      answerEdited();
      return true;
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.ctrlKey) {
        e.preventDefault();
        if (!addFromInput()) ctx.submit();
      } else if (e.key === "Backspace" && !input.value && values.length) {
        values.pop();
        renderChips();
        answerEdited();
      } else if (e.key === ",") {
        e.preventDefault();
        addFromInput();
      }
    });
    input.addEventListener("blur", addFromInput);
    input.addEventListener("input", answerEdited); // a half-typed entry is autosaved too (see currentAnswer)
    renderChips();
    answerEl = h("div", { class: "set-input" }, h("label", { for: "qa-answer" }, "Objects ", machineBadge), chips, input);
    getAnswer = () => {
      addFromInput();
      return [...values];
    };
    focusAnswer = () => input.focus();
  }

  // ---- flags ----
  const flagInputs = {};
  // On an item with its own "none of the others" option, that option is how to say so: no flag for it.
  const shownFlags = FLAGS.filter(([name]) => !(format === "choice" && item.none_option && name === NO_CORRECT_OPTION));
  const flagsEl = h("fieldset", { class: "flags", id: "qa-flags" }, h("legend", {}, "Flags"),
    shownFlags.map(([name, label, key]) => {
      const input = h("input", { type: "checkbox", name: "flags", value: name, checked: flagsSet.has(name) });
      input.addEventListener("change", () => ctx.changed());
      flagInputs[name] = input;
      ctx.shortcuts.register(key, `Flag: ${label}`, () => {
        input.checked = !input.checked;
        input.dispatchEvent(new Event("change"));
      }, { group: "Flags" });
      return h("label", { class: "flag" }, input, ` ${label} `, h("kbd", {}, key.toUpperCase()));
    }));

  ctx.shortcuts.register("enter", "Submit", () => ctx.submit(), { group: "Answer" });
  if (players.length) {
    ctx.shortcuts.register("space", "Play / pause both videos", () => {
      const play = players.some((v) => v.paused);
      players.forEach((v) => (play ? v.play().catch(() => undefined) : v.pause()));
    }, { group: "Videos" });
  }

  container.append(
    h("div", { class: "qa" },
      media,
      h("section", { class: "card qa-form" },
        h("h2", { class: "question" }, item.question || ""),
        machineNote,
        answerEl,
        flagsEl),
    ),
  );
  if (format !== "choice") requestAnimationFrame(() => focusAnswer());

  return {
    draft() {
      return { answer: getAnswer === undefined ? null : currentAnswer(), flags: checkedFlags(), _machine: machine };
    },
    collect() {
      const answer = getAnswer();
      const flags = checkedFlags();
      const empty = answer === null || answer === "" || (Array.isArray(answer) && !answer.length) || Number.isNaN(answer);
      if (empty && !flags.length) return { error: "Answer the question, or set a flag saying why you cannot.", field: "answer" };
      if (format === "count" && !empty && (!Number.isInteger(answer) || answer < 0)) return { error: "The count is a whole number, 0 or more.", field: "answer" };
      const reason = contradiction(item, empty ? null : answer, flags);
      if (reason) return { error: reason, field: "answer" };
      return { result: { answer: empty ? null : answer, flags } };
    },
    focusField(name) {
      if (name === "flags") flagInputs[shownFlags[0][0]].focus();
      else focusAnswer();
    },
  };

  function checkedFlags() {
    return shownFlags.map(([n]) => n).filter((n) => flagInputs[n].checked);
  }

  // The draft must not consume a half-typed set entry, so read the set without committing it.
  function currentAnswer() {
    if (format === "set") {
      const chipsText = [...container.querySelectorAll(".chip")].map((li) => li.firstChild.textContent);
      const typed = (container.querySelector("#qa-answer")?.value || "").split(",").map((s) => s.trim()).filter(Boolean);
      return [...chipsText, ...typed];
    }
    return getAnswer();
  }
}

export const qaWorkflow = { name: "qa", mount };

if (document.querySelector("[data-workbench]")) startWorkbench(qaWorkflow);
