// An item's images and videos: their URLs whatever the payload's shape, preloading the next
// task's media, and the zoomable image and video player widgets.
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

/** Media of an item as [{url, kind}], whatever field names the payload uses. */
export function mediaOf(item) {
  const out = [];
  const visit = (value, kindHint) => {
    if (!value) return;
    if (typeof value === "string") {
      if (/^(\/|https?:)/.test(value)) out.push({ url: value, kind: kindHint || guessKind(value) });
    } else if (Array.isArray(value)) {
      value.forEach((v) => visit(v, kindHint));
    } else if (typeof value === "object") {
      if (typeof value.url === "string") out.push({ url: value.url, kind: value.kind || kindHint || guessKind(value.url) });
      else Object.values(value).forEach((v) => visit(v, kindHint));
    }
  };
  visit(item.media);
  for (const key of ["image", "image_a", "image_b", "images", "video", "video_before", "video_after"]) {
    if (item[key] !== undefined) visit(item[key], key.startsWith("video") ? "video" : "image");
  }
  const seen = new Set();
  return out.filter((m) => (seen.has(m.url) ? false : (seen.add(m.url), true)));
}

export function guessKind(url) {
  return /\.(mp4|webm|mov|mkv|ogv|m4v)(\?|$)/i.test(url) ? "video" : "image";
}

/** URL of a media field whatever the backend's shape: "url", {url}, or item.media[name]. */
export function mediaUrl(item, name) {
  const pick = (v) => (v && typeof v === "object" && !Array.isArray(v) ? v.url : v);
  if (item.media && item.media[name] !== undefined) return pick(item.media[name]);
  if (item.media_urls && item.media_urls[name] !== undefined) return pick(item.media_urls[name]);
  if (item[`${name}_url`] !== undefined) return pick(item[`${name}_url`]);
  return pick(item[name]);
}

export function mediaList(item, name) {
  const value = (item.media && item.media[name]) ?? (item.media_urls && item.media_urls[name]) ?? item[`${name}_urls`] ?? item[name] ?? [];
  return (Array.isArray(value) ? value : [value]).map((v) => (v && typeof v === "object" ? v.url : v)).filter(Boolean);
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
