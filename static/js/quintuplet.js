// Quintuplet labeling: two images (the page's form description names their fields), two state
// descriptions, the change, three wrong changes, category and difference. Format checks warn and
// never block.
import { h, mediaUrl, startWorkbench, zoomableImage } from "./workbench.js";

const TEXT_FIELDS = [
  ["state_a", "State A", "the object and its state in image A, e.g. “a slightly opened door”"],
  ["state_b", "State B", "the object and its state in image B"],
  ["change", "Change", "a verb phrase, e.g. “open the door”"],
  ["distractor_0", "Wrong change 1", "plausible but wrong"],
  ["distractor_1", "Wrong change 2", "plausible but wrong"],
  ["distractor_2", "Wrong change 3", "plausible but wrong"],
];
const CATEGORIES = [
  ["positional", "Positional", "p"],
  ["functional", "Functional", "f"],
  ["other", "Other", "o"],
];
const DIFFERENCES = [
  ["slight", "Slight", "s"],
  ["significant", "Significant", "g"],
];

const DETERMINERS = new Set(["a", "an", "the", "this", "that", "these", "those", "some", "its", "his", "her", "their", "my", "your", "our", "one", "two"]);
const NOT_VERBS = new Set([...DETERMINERS, "is", "was", "are", "it", "there", "from", "to", "with", "by", "of", "in", "on"]);

/** Light checks of a state description: several words naming a thing and its state. */
export function stateWarnings(text) {
  const t = text.trim();
  if (!t) return [];
  const words = t.split(/\s+/);
  const out = [];
  if (words.length < 2) out.push("Name the object and its state (at least two words, e.g. “an open door”).");
  if (/^(open|close|cut|put|turn|move|fold|pour|fill|remove|take|peel|slice|push|pull|switch)\b/i.test(t) && !/(ed|en)\b/i.test(words[0])) {
    out.push("This reads like an action; describe the state instead (“an opened box”).");
  }
  if (/[.!?]$/.test(t)) out.push("No final punctuation needed.");
  return out;
}

/** Light checks of a change description: it starts with a verb. */
export function changeWarnings(text) {
  const t = text.trim();
  if (!t) return [];
  const first = t.split(/\s+/)[0].toLowerCase();
  const out = [];
  if (NOT_VERBS.has(first) || (/ing$/.test(first) && first.length > 4)) {
    out.push("Start with a verb in the imperative, e.g. “open the door”.");
  }
  if (t.split(/\s+/).length < 2) out.push("Say what is changed, e.g. “open the door”.");
  return out;
}

/** The newest machine-made answer (the server sends suggestions newest first, each
 * {source, machine_made, result}), if any. */
function suggestionOf(item) {
  const s = item.suggestions[0];
  return s ? { source: s.source, result: s.result } : null;
}

// Keyboard keys of the closed fields' values (a labelling pass's choices reuse them where they match).
const KEYS = Object.fromEntries([...CATEGORIES, ...DIFFERENCES].map(([value, , key]) => [value, key]));

/** A labelling pass's item (`item.fill`, annotation/fill_form.py): the pair, the item's label texts
 * as context, and one radio group per field asked; the answer holds just those fields. */
function mountFill(container, item, draft, ctx) {
  const { fields, context } = item.fill;
  const radios = {};
  const used = new Set();
  const groups = fields.map(({ field, label, choices }) => {
    radios[field] = [];
    return h("fieldset", { class: "radios", id: `q-${field}`, dataset: { fillField: field } }, h("legend", {}, label),
      choices.map(({ value, label: text }, i) => {
        const radio = h("input", { type: "radio", name: field, value, checked: (draft || {})[field] === value });
        radio.addEventListener("change", () => ctx.changed());
        radios[field].push(radio);
        let key = KEYS[value];
        if (!key || used.has(key)) key = String(used.size + 1);
        used.add(key);
        const pick = () => {
          if (!radio.checked) {
            radio.checked = true;
            radio.dispatchEvent(new Event("change"));
          }
        };
        ctx.shortcuts.register(key, `${label}: ${text}`, pick, { group: "Labelling pass" });
        return h("label", { class: "radio" }, radio, ` ${text} `, h("kbd", {}, key.toUpperCase()));
      }));
  });
  const shown = (value) => (Array.isArray(value) ? h("ul", {}, value.map((v) => h("li", {}, String(v)))) : String(value));
  const images = ctx.form.media.map((m) => zoomableImage(mediaUrl(item, m.field), `Image ${m.label}`, m.label));
  container.append(
    h("div", { class: "quintuplet", "data-fill-pass": "" },
      h("div", { class: "pair" }, images),
      h("form", { class: "card quintuplet-form", onsubmit: (e) => e.preventDefault() },
        h("p", { class: "muted small" }, "Labelling pass: this item's descriptions are already verified. Choose only the fields below."),
        h("dl", { class: "fill-context", "data-fill-context": "" }, context.flatMap(({ field, label, value }) => [
          h("dt", {}, label), h("dd", { dataset: { field } }, shown(value)),
        ])),
        h("div", { class: "radio-row" }, groups),
      ),
    ),
  );
  const checked = (name) => (radios[name].find((r) => r.checked) || {}).value || "";
  requestAnimationFrame(() => (radios[fields[0].field].find((r) => r.checked) || radios[fields[0].field][0]).focus());
  return {
    draft() {
      return Object.fromEntries(fields.map(({ field }) => [field, checked(field)]));
    },
    collect() {
      for (const { field, label } of fields) {
        if (!checked(field)) return { error: `Pick the ${label.toLowerCase()}.`, field };
      }
      return { result: Object.fromEntries(fields.map(({ field }) => [field, checked(field)])) };
    },
    focusField(name) {
      if (radios[name]) radios[name][0].focus();
    },
  };
}

function mount(container, item, draft, ctx) {
  if (item.fill) return mountFill(container, item, draft, ctx);
  const suggestion = suggestionOf(item);
  const hasDraft = draft && Object.keys(draft).some((k) => !k.startsWith("_"));
  // Fill from the draft when the annotator already worked on it; else from the model's suggestion.
  const machine = new Set(hasDraft ? draft._machine || [] : []);
  const values = {};
  if (hasDraft) {
    Object.assign(values, draft);
  } else if (suggestion) {
    const r = suggestion.result;
    for (const key of ["state_a", "state_b", "change", "category", "difference"]) {
      if (r[key]) {
        values[key] = r[key];
        machine.add(key);
      }
    }
    (r.change_distractors || []).slice(0, 3).forEach((d, i) => {
      if (d) {
        values[`distractor_${i}`] = d;
        machine.add(`distractor_${i}`);
      }
    });
  }

  const inputs = {};
  const warnEls = {};
  const badges = {};
  const textRows = TEXT_FIELDS.map(([name, label, hint], index) => {
    const input = h("input", { type: "text", name, id: `q-${name}`, value: values[name] || "", placeholder: hint, autocomplete: "off", spellcheck: "true" });
    inputs[name] = input;
    badges[name] = h("span", { class: "badge machine", title: `Pre-filled by ${suggestion ? suggestion.source : "a model"}`, hidden: !machine.has(name) }, "machine");
    warnEls[name] = h("div", { class: "field-warning warning", "data-warning-for": name });
    input.addEventListener("input", () => {
      machine.delete(name);
      badges[name].hidden = true;
      check(name);
      ctx.changed();
    });
    input.addEventListener("blur", () => check(name));
    input.addEventListener("keydown", (e) => {
      // Enter moves on like Tab; the last field's Enter jumps to the category.
      if (e.key === "Enter" && !e.ctrlKey && !e.metaKey) {
        e.preventDefault();
        const next = TEXT_FIELDS[index + 1];
        if (next) inputs[next[0]].focus();
        else radios.category.find((r) => r.checked)?.focus() || radios.category[0].focus();
      }
    });
    return h("div", { class: `field ${name.startsWith("distractor") ? "distractor" : ""}` },
      h("label", { for: `q-${name}` }, label, " ", badges[name]), input, warnEls[name]);
  });

  const radios = { category: [], difference: [] };
  const radioGroup = (name, label, options) => {
    const badge = h("span", { class: "badge machine", hidden: !machine.has(name) }, "machine");
    badges[name] = badge;
    const fieldset = h("fieldset", { class: "radios", id: `q-${name}` }, h("legend", {}, label, " ", badge),
      options.map(([value, text, key]) => {
        const radio = h("input", { type: "radio", name, value, checked: values[name] === value });
        radio.addEventListener("change", () => {
          machine.delete(name);
          badge.hidden = true;
          ctx.changed();
        });
        radios[name].push(radio);
        return h("label", { class: "radio" }, radio, ` ${text} `, h("kbd", {}, key.toUpperCase()));
      }));
    return fieldset;
  };
  const pick = (name, value) => {
    const radio = radios[name].find((r) => r.value === value);
    if (!radio.checked) {
      radio.checked = true;
      radio.dispatchEvent(new Event("change"));
    }
  };
  for (const [value, text, key] of CATEGORIES) {
    ctx.shortcuts.register(key, `Category: ${text}`, () => pick("category", value), { group: "Quintuplet" });
    ctx.shortcuts.register(`alt+${key}`, `Category: ${text}`, () => pick("category", value), { inInputs: true, group: "Quintuplet", hidden: true });
  }
  for (const [value, text, key] of DIFFERENCES) {
    ctx.shortcuts.register(key, `Difference: ${text}`, () => pick("difference", value), { group: "Quintuplet" });
    ctx.shortcuts.register(`alt+${key}`, `Difference: ${text}`, () => pick("difference", value), { inInputs: true, group: "Quintuplet", hidden: true });
  }
  ctx.shortcuts.register("e", "Edit the first empty field", () => {
    const empty = TEXT_FIELDS.find(([n]) => !inputs[n].value.trim());
    inputs[(empty || TEXT_FIELDS[0])[0]].focus();
  }, { group: "Quintuplet" });

  function check(name) {
    const value = inputs[name].value;
    let warnings = name.startsWith("state") ? stateWarnings(value) : changeWarnings(value);
    const others = TEXT_FIELDS.map(([n]) => n).filter((n) => n !== name && (n.startsWith("distractor") || n === "change") && (name.startsWith("distractor") || name === "change"));
    if (value.trim() && others.some((n) => inputs[n].value.trim().toLowerCase() === value.trim().toLowerCase())) {
      warnings = [...warnings, "Same text as another change description."];
    }
    if (name === "state_b" && value.trim() && value.trim().toLowerCase() === inputs.state_a.value.trim().toLowerCase()) {
      warnings = [...warnings, "State B is the same as state A."];
    }
    warnEls[name].textContent = warnings.join(" ");
    inputs[name].classList.toggle("has-warning", warnings.length > 0);
  }

  // The two images, captioned as the form description labels their fields ("A", "B").
  const images = ctx.form.media.map((m) => zoomableImage(mediaUrl(item, m.field), `Image ${m.label}`, m.label));
  container.append(
    h("div", { class: "quintuplet" },
      h("div", { class: "pair" }, images),
      h("form", { class: "card quintuplet-form", onsubmit: (e) => e.preventDefault() },
        suggestion ? h("p", { class: "muted small" }, h("span", { class: "badge machine" }, "machine"), ` suggestions from ${suggestion.source}; edit anything that is wrong.`) : null,
        textRows,
        h("div", { class: "radio-row" }, radioGroup("category", "Category", CATEGORIES), radioGroup("difference", "Difference", DIFFERENCES)),
      ),
    ),
  );
  TEXT_FIELDS.forEach(([n]) => inputs[n].value && check(n));
  const firstEmpty = TEXT_FIELDS.find(([n]) => !inputs[n].value.trim());
  requestAnimationFrame(() => inputs[(firstEmpty || TEXT_FIELDS[0])[0]].focus());

  const checked = (name) => (radios[name].find((r) => r.checked) || {}).value || "";

  return {
    draft() {
      const out = { _machine: [...machine] };
      for (const [n] of TEXT_FIELDS) out[n] = inputs[n].value;
      out.category = checked("category");
      out.difference = checked("difference");
      return out;
    },
    collect() {
      for (const [n, label] of TEXT_FIELDS) {
        if (!inputs[n].value.trim()) return { error: `${label} is empty.`, field: n };
      }
      if (!checked("category")) return { error: "Pick a category (P, F or O).", field: "category" };
      if (!checked("difference")) return { error: "Pick a difference level (S or G).", field: "difference" };
      return {
        result: {
          state_a: inputs.state_a.value.trim(),
          state_b: inputs.state_b.value.trim(),
          change: inputs.change.value.trim(),
          change_distractors: [0, 1, 2].map((i) => inputs[`distractor_${i}`].value.trim()),
          category: checked("category"),
          difference: checked("difference"),
        },
      };
    },
    focusField(name) {
      const m = /^change_distractors(?:\.(\d))?$/.exec(name);
      const target = m ? `distractor_${m[1] || 0}` : name;
      if (inputs[target]) inputs[target].focus();
      else if (radios[target]) (radios[target][0]).focus();
    },
  };
}

export const quintuplet = { name: "quintuplet", mount };

if (document.querySelector("[data-workbench]")) startWorkbench(quintuplet);
