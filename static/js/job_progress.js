// Live job progress: polls /api/jobs/<id>/progress/ until the job stops running.
import { h } from "./workbench/dom.js";

const root = document.getElementById("job");
const url = root.dataset.progressUrl;
const $ = (id) => document.getElementById(id);
const ACTIVE = new Set(["queued", "running"]);

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m}m${String(s % 60).padStart(2, "0")}s` : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

function render(p) {
  $("job-status").textContent = p.status;
  $("job-error").textContent = p.error || "";
  const bar = $("job-bar");
  bar.setAttribute("aria-valuenow", String(p.percent));
  bar.firstElementChild.style.width = `${p.percent}%`;
  $("job-percent").textContent = String(p.percent);
  $("job-counts").textContent = `${p.done} done, ${p.failed} failed of ${p.total}`;
  $("job-rate").textContent = p.rate_per_s === null ? "–" : `${p.rate_per_s.toFixed(2)} queries/s`;
  $("job-eta").textContent = ACTIVE.has(p.status) ? duration(p.eta_s) : "–";
  $("job-tokens").textContent = `${p.prompt_tokens} in / ${p.completion_tokens} out`;
  $("job-cost").textContent = usd(p.cost_usd);
  $("job-cost-per-correct").textContent = perCorrect(p);
  const cached = $("job-cached");
  cached.hidden = !p.cached_answers;
  cached.textContent = ` · ${p.cached_answers.toLocaleString("en-US")} answer${p.cached_answers === 1 ? "" : "s"} from cache (no cost)`;
  const body = $("job-failures").tBodies[0];
  body.replaceChildren();
  if (!p.failures.length) body.append(h("tr", { class: "none" }, h("td", { colspan: "4" }, "No failures.")));
  for (const f of p.failures) {
    body.append(h("tr", {}, h("td", {}, f.item), h("td", {}, f.query), h("td", {}, String(f.attempts)), h("td", {}, f.error)));
  }
  $("job-failed-count").textContent = String(p.failed);
  renderUnreadable(p);
}

// Dollars to the micro-dollar, at least cents: "$0.00", "$0.075" (as inference.selectors.usd).
function usd(value) {
  if (value === null || value === undefined) return "–";
  const [whole, cents] = value.toFixed(6).split(".");
  return `$${whole}.${cents.replace(/0+$/, "").padEnd(2, "0")}`;
}

// Cost per correct answer once the job is scored (as the template words it).
function perCorrect(p) {
  if (p.cost_per_correct_usd !== null) return `${usd(p.cost_per_correct_usd)} (${p.correct_answers.toLocaleString("en-US")} correct)`;
  if (p.correct_answers === 0) return "– (none correct)";
  if (p.correct_answers === null) return "– (not scored)";
  return "– (no price)";
}

// Judge replies that came back but stayed unreadable JSON: listed apart from the failures (the
// table is on the page only for jobs with JSON queries).
function renderUnreadable(p) {
  const table = $("job-unreadable");
  if (!table) return;
  $("job-unreadable-count").textContent = String(p.unreadable);
  const body = table.tBodies[0];
  body.replaceChildren();
  if (!p.unreadable_replies.length) body.append(h("tr", { class: "none" }, h("td", { colspan: "6" }, "No unreadable replies.")));
  for (const u of p.unreadable_replies) {
    body.append(h("tr", {}, h("td", {}, u.item), h("td", {}, u.query), h("td", {}, String(u.attempts)),
      h("td", {}, String(u.json_repairs)), h("td", {}, u.reason), h("td", {}, h("code", {}, u.reply))));
  }
  const more = $("job-unreadable-more");
  more.hidden = p.unreadable <= p.unreadable_replies.length;
  more.textContent = `Showing the first ${p.unreadable_replies.length}; every one is in samples.jsonl.`;
}

async function poll() {
  let delay = 1000;
  try {
    const res = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (res.ok) {
      const p = await res.json();
      render(p);
      if (!ACTIVE.has(p.status)) return;
    } else {
      delay = 5000;
    }
  } catch (err) {
    delay = 5000; // network hiccup: keep trying, more slowly
  }
  setTimeout(poll, delay);
}

// The page is rendered with the job's progress; the bar's width is set here (no inline style).
const jobBar = $("job-bar");
jobBar.firstElementChild.style.width = `${Number(jobBar.getAttribute("aria-valuenow")) || 0}%`;
poll();
