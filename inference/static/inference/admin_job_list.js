// Admin list of inference jobs: keeps the status, progress, rate, ETA, failures (and a judge's
// unreadable replies), tokens and cost cells of every queued or running job live, by polling the
// job's progress API (the one the job page uses) every 2 s until the job ends. Cells are spans
// with data-job and data-field.
(function () {
  "use strict";
  const ACTIVE = new Set(["queued", "running"]);
  const POLL_MS = 2000;

  function cells(id) {
    const out = {};
    document.querySelectorAll('.job-live[data-job="' + id + '"]').forEach(function (el) {
      out[el.dataset.field] = el;
    });
    return out;
  }

  function eta(seconds) {
    const s = Math.floor(seconds);
    return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  }

  function render(id, p) {
    const c = cells(id);
    if (c.status) {
      c.status.textContent = p.status;
      c.status.dataset.status = p.status;
    }
    if (c.progress) {
      c.progress.querySelector("progress").value = p.percent;
      c.progress.querySelector(".pct").textContent = p.percent.toFixed(1) + "%";
      c.progress.querySelector(".n").textContent = (p.done + p.failed) + "/" + p.total;
    }
    if (c.rate) c.rate.textContent = p.rate_per_s == null ? "–" : p.rate_per_s.toFixed(2) + "/s";
    if (c.eta) c.eta.textContent = p.eta_s == null || p.status !== "running" ? "–" : eta(p.eta_s);
    if (c.failures) {
      c.failures.textContent = String(p.failed);
      const first = p.failures && p.failures.length ? p.failures[0].error : "";
      c.failures.title = p.error || first;
    }
    if (c.unreadable) c.unreadable.textContent = p.unreadable + " unreadable";
    if (c.tokens) c.tokens.textContent = p.prompt_tokens + " / " + p.completion_tokens;
    if (c.cost) c.cost.textContent = p.cost_usd == null ? "–" : "$" + p.cost_usd.toFixed(4);
  }

  function watch(el) {
    const id = el.dataset.job;
    const url = el.dataset.progressUrl;
    function tick() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (p) {
          if (!p) return; // no access or gone: leave the row as rendered
          render(id, p);
          if (ACTIVE.has(p.status)) setTimeout(tick, POLL_MS);
        })
        .catch(function () { setTimeout(tick, POLL_MS * 2); });
    }
    tick();
  }

  function start() {
    document.querySelectorAll('.job-live[data-field="status"][data-progress-url]').forEach(function (el) {
      if (ACTIVE.has(el.dataset.status)) watch(el);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
