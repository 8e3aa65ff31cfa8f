// What StateLab keeps in this browser (drafts, submit keys: every key starts "statelab:")
// belongs to the person signed in. On a shared computer the next person must not find it, so:
// - Log out (ours or the admin's) first lets open pages save what they hold to the server
//   (onLogout hooks, waited for a few seconds at most), then removes every StateLab entry from
//   localStorage and sessionStorage, then submits.
// - A session can also end without a logout (it expired, the browser was closed, another tab
//   logged out while this one kept working). The next sign-in then removes what is left, unless
//   the person signing in is the one who left it: after an expired session the local copy is
//   exactly the work that could not reach the server, and it must come back to its owner.
// Loaded by every page (templates/base.html, templates/admin/base_site.html).
const PREFIX = "statelab:";
const OWNER_KEY = `${PREFIX}owner`; // username of the person whose entries these are
const LOGOUT_WAIT_MS = 3000;
const beforeLogout = new Set();

/** Run `fn` (it may return a promise) before this page logs out, e.g. to save a draft. */
export function onLogout(fn) {
  beforeLogout.add(fn);
  return () => beforeLogout.delete(fn);
}

/** Remove every StateLab entry from this browser's storage. */
export function clearStoredWork() {
  for (const store of [window.localStorage, window.sessionStorage]) {
    try {
      for (const key of Object.keys(store)) if (key.startsWith(PREFIX)) store.removeItem(key);
    } catch {
      /* storage disabled: nothing was kept */
    }
  }
}

async function logOut(form) {
  const hooks = [...beforeLogout].map((fn) => Promise.resolve().then(fn));
  await Promise.race([Promise.allSettled(hooks), new Promise((resolve) => setTimeout(resolve, LOGOUT_WAIT_MS))]);
  clearStoredWork();
  form.submit(); // a programmatic submit does not fire "submit" again
}

for (const form of document.querySelectorAll("form[data-logout], form#logout-form")) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    form.querySelector("[type=submit]")?.setAttribute("disabled", "");
    logOut(form);
  });
  if (form.dataset.user) {
    try {
      localStorage.setItem(OWNER_KEY, form.dataset.user);
    } catch {
      /* storage disabled */
    }
  }
}

for (const form of document.querySelectorAll("form[data-login], form#login-form")) {
  form.addEventListener("submit", () => {
    let owner = null;
    try {
      owner = localStorage.getItem(OWNER_KEY);
    } catch {
      return;
    }
    if (owner === null || owner !== form.elements.username.value) clearStoredWork();
  });
}
