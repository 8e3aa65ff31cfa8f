// Shared behaviour of every annotator and reviewer page: the JSON API with CSRF, draft autosave
// (versioned, with a local copy so nothing is lost offline), idempotent submit with retries, the
// task lease, keyboard shortcuts and preloading of the next task's media.
// Plain ES modules, no build step. The workflow modules (quintuplet.js, box.js, qa.js, rating.js)
// only render an item and turn the form into a result; everything about not losing work is in
// workbench/, one module per job, and this file re-exports what the pages import:
//   workbench/dom.js        h() to build elements, sleep(), uuid()
//   workbench/api.js        the JSON API client: CSRF, retries, error text
//   workbench/shortcuts.js  keyboard shortcuts and the "?" help list
//   workbench/notices.js    messages above the workspace
//   workbench/media.js      media URLs of an item, the page's form description, preloading,
//                           image and video widgets
//   workbench/task_loop.js  the Workbench: claim, show, claim the next; startWorkbench()
//   workbench/drafts.js     local copy and server autosave of the draft   (a layer of Workbench)
//   workbench/lease.js      renewing the lease while someone is at the page,
//                           preloading the next task                      (a layer of Workbench)
//   workbench/submit.js     submit and skip, idempotency keys              (a layer of Workbench)
//   workbench/amend.js      amend mode: one's own earlier answer, saved by /api/annotations/<id>/amend/

export { h, sleep, uuid } from "./workbench/dom.js";
export { ApiError, NetworkError, api, apiList, csrfToken, describeError, errorField } from "./workbench/api.js";
export { Shortcuts, isTyping } from "./workbench/shortcuts.js";
export { Notices } from "./workbench/notices.js";
export { coversWhole, mediaList, mediaOf, mediaUrl, pageForm, preloadMedia, videoPlayer, zoomableImage } from "./workbench/media.js";
export { Workbench } from "./workbench/task_loop.js";
import { AmendBench } from "./workbench/amend.js";
import { startWorkbench as startTaskLoop } from "./workbench/task_loop.js";

/** The page's workbench: the task loop, or (a data-amend page) amending one's own earlier answer. */
export function startWorkbench(workflow) {
  const root = document.querySelector("[data-workbench]");
  if (!root || !root.dataset.amend) return startTaskLoop(workflow);
  const bench = new AmendBench({ root, slug: root.dataset.project, workflow });
  window.statelabWorkbench = bench; // for debugging and the browser tests
  bench.start();
  return bench;
}
