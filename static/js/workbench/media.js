// An item's images and videos: their URLs as the API sends them, preloading the next task's
// media, the zoomable image and video player widgets, and whether a video was played through.
import { h, sleep } from "./dom.js";

const preloaded = new Map(); // url -> element kept alive so the browser keeps the bytes around

/** Start downloading media; resolves when images are decoded (or after `timeoutMs`). */
export function preloadMedia(media, { timeoutMs = 4000 } = {}) {
  const waits = [];
  for (const { url, kind } of media) {
    if (!url || preloaded.has(url)) continue;
    if (kind === "video") {
      const v = document.createElement("video");
      v.preload = "auto";
      v.muted = true;
      v.src = url;
      preloaded.set(url, v);
      waits.push(new Promise((resolve) => {
        v.addEventListener("loadeddata", resolve, { once: true });
        v.addEventListener("error", resolve, { once: true });
      }));
    } else {
      const img = new Image();
      img.decoding = "async";
      img.src = url;
      preloaded.set(url, img);
      waits.push(img.decode().catch(() => undefined));
    }
  }
  if (preloaded.size > 64) {
    for (const key of [...preloaded.keys()].slice(0, preloaded.size - 64)) preloaded.delete(key);
  }
  return Promise.race([Promise.all(waits), sleep(timeoutMs)]);
}

/**
 * Media of an item as [{url, kind}] for preloading. `media` is the page's form description
 * ([{field, kind}], annotation/selectors.py workflow_form); the item holds each field as the API
 * sends it: an asset {url, kind, width, height, ...} (null when missing), or a list of them for
 * an "images" field.
 */
export function mediaOf(item, media) {
  const out = [];
  for (const { field } of media) {
    const value = item[field];
    for (const asset of Array.isArray(value) ? value : [value]) {
      if (asset && asset.url) out.push({ url: asset.url, kind: asset.kind === "video" ? "video" : "image" });
    }
  }
  return out;
}

/** URL of one media field of an item (or of a review item's `media`): its asset's url, or null. */
export function mediaUrl(item, field) {
  const asset = item[field];
  return asset ? asset.url : null;
}

/** URLs of an "images" field (a list of assets). */
export function mediaList(item, field) {
  return (item[field] || []).map((asset) => asset && asset.url).filter(Boolean);
}

/** The page's description of its workflow form (json_script "workflow-form" filled by the view). */
export function pageForm() {
  const el = document.getElementById("workflow-form");
  return el ? JSON.parse(el.textContent) : { media: [] };
}

/** An image that zooms under the pointer on hover; a click locks a stronger zoom. */
export function zoomableImage(url, alt, label) {
  const img = h("img", { src: url, alt, draggable: "false" });
  const frame = h("div", { class: "zoomable", tabindex: "0", title: "Hover to zoom, click to lock a stronger zoom" }, img);
  let locked = false;
  const place = (e) => {
    const r = frame.getBoundingClientRect();
    const x = ((e.clientX - r.left) / r.width) * 100;
    const y = ((e.clientY - r.top) / r.height) * 100;
    img.style.transformOrigin = `${x}% ${y}%`;
  };
  frame.addEventListener("mousemove", place);
  frame.addEventListener("mouseenter", (e) => {
    place(e);
    frame.classList.add("zoom");
  });
  frame.addEventListener("mouseleave", () => {
    if (!locked) frame.classList.remove("zoom");
  });
  frame.addEventListener("click", (e) => {
    locked = !locked;
    place(e);
    frame.classList.toggle("zoom-locked", locked);
    frame.classList.add("zoom");
  });
  return h("figure", { class: "media-figure" }, frame, label ? h("figcaption", {}, label) : null);
}

export function videoPlayer(url, label, { loop = false, muted = false } = {}) {
  const video = h("video", { src: url, controls: true, preload: "auto", playsinline: true });
  video.loop = loop;
  video.muted = muted;
  return { video, figure: h("figure", { class: "media-figure video" }, video, label ? h("figcaption", {}, label) : null) };
}

/**
 * Whether the played ranges cover [0, duration], allowing gaps up to `tolerance` seconds (a frame
 * step, the last frame's rounding). `ranges` is a TimeRanges or a list of [start, end].
 */
export function coversWhole(ranges, duration, tolerance) {
  if (!duration || !isFinite(duration)) return false;
  const list = [];
  if (Array.isArray(ranges)) list.push(...ranges.map(([a, b]) => [a, b]));
  else for (let i = 0; i < ranges.length; i++) list.push([ranges.start(i), ranges.end(i)]);
  list.sort((x, y) => x[0] - y[0]);
  let reached = 0;
  for (const [start, end] of list) {
    if (start > reached + tolerance) return false;
    reached = Math.max(reached, end);
  }
  return reached >= duration - tolerance;
}
