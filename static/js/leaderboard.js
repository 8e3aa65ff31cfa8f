// Leaderboard and correlation pages: sortable columns and breakdown tabs. No build step.
// The server sends rows in leaderboard order (evaluation/ranking.py: headline metric, tie-break,
// model name) and marks that column aria-sort="descending"; a click re-sorts in the browser, and
// rows with equal values keep their leaderboard order (data-order), so a sort is never arbitrary.

function cellKey(cell, type) {
  const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
  if (type === "num") {
    const v = parseFloat(raw);
    return Number.isFinite(v) ? v : null; // missing values always sort last
  }
  return raw.toLowerCase();
}

function leaderboardOrder(row) {
  const v = parseInt(row.dataset.order, 10);
  return Number.isFinite(v) ? v : 0; // tables without data-order keep the stable sort's order
}

function sortTable(table, th) {
  const index = Array.from(th.parentNode.children).indexOf(th);
  const type = th.dataset.type || "text";
  const descending = th.getAttribute("aria-sort") !== "descending";
  table.querySelectorAll("th").forEach((h) => h.removeAttribute("aria-sort"));
  th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const ka = cellKey(a.cells[index], type);
    const kb = cellKey(b.cells[index], type);
    const tie = leaderboardOrder(a) - leaderboardOrder(b);
    if (ka === null && kb === null) return tie;
    if (ka === null) return 1;
    if (kb === null) return -1;
    const cmp = ka < kb ? -1 : ka > kb ? 1 : 0;
    return (descending ? -cmp : cmp) || tie;
  });
  rows.forEach((r) => body.appendChild(r));
}

document.querySelectorAll("table[data-sortable]").forEach((table) => {
  table.querySelectorAll("th.sortable").forEach((th) => {
    th.tabIndex = 0;
    th.addEventListener("click", () => sortTable(table, th));
    th.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortTable(table, th); }
    });
  });
});

const tabs = document.querySelectorAll(".lb-tabs [data-tab]");
tabs.forEach((button) => {
  button.addEventListener("click", () => {
    tabs.forEach((b) => b.setAttribute("aria-selected", String(b === button)));
    document.querySelectorAll(".lb-panel").forEach((panel) => {
      panel.hidden = panel.id !== `panel-${button.dataset.tab}`;
    });
  });
});

// Filters (release, judge) apply as soon as one is picked.
document.querySelectorAll("select[data-autosubmit]").forEach((select) => {
  select.addEventListener("change", () => select.form.submit());
});

// Boards with a rater screen (the protocol's rater_screen_module): exclude a rater from the board (or include them again) through the API, then
// show the board fitted again. The API names what it refused; that text is shown as it is.
const raterScreen = document.getElementById("lb-rater-screen");
if (raterScreen) {
  const error = document.getElementById("lb-exclusion-error");
  raterScreen.addEventListener("click", async (event) => {
    const button = event.target.closest("button.lb-exclude");
    if (!button) return;
    button.disabled = true;
    error.hidden = true;
    try {
      const response = await fetch(raterScreen.dataset.exclusionsUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          "X-CSRFToken": raterScreen.querySelector("input[name=csrfmiddlewaretoken]").value,
        },
        body: JSON.stringify({ rater: button.dataset.rater, excluded: button.dataset.excluded === "true" }),
      });
      if (response.ok) {
        window.location.reload();
        return;
      }
      let text = `The change was refused (${response.status}).`;
      try {
        const body = await response.json();
        if (body.errors) text = Object.entries(body.errors).map(([k, v]) => `${k}: ${v}`).join(" ");
        else if (body.detail) text = body.detail;
      } catch (_) { /* not JSON: keep the status */ }
      error.textContent = text;
      error.hidden = false;
    } catch (_) {
      error.textContent = "The server could not be reached; nothing changed.";
      error.hidden = false;
    }
    button.disabled = false;
  });
}
