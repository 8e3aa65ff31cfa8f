// The JSON API client: CSRF header, retries of lost requests, and error bodies turned into text.
import { sleep } from "./dom.js";

export function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  if (meta && meta.content) return meta.content;
  const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

export class ApiError extends Error {
  constructor(status, body, message) {
    super(message || describeError(body) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export class NetworkError extends Error {}

/** Flatten a DRF error body into readable "field: message" lines. */
export function describeError(body, prefix = "") {
  if (body === null || body === undefined) return "";
  // Our API's 400s: {"detail": "Please fix: a, b.", "errors": {field: message}}: the fields say it all.
  if (!prefix && typeof body === "object" && body.errors && typeof body.errors === "object" && !Array.isArray(body.errors)) {
    return describeError(body.errors);
  }
  if (typeof body === "string") return prefix ? `${prefix}: ${body}` : body;
  if (Array.isArray(body)) {
    return body.map((x) => describeError(x, prefix)).filter(Boolean).join("; ");
  }
  if (typeof body === "object") {
    const parts = [];
    for (const [key, value] of Object.entries(body)) {
      if (key === "detail" || key === "non_field_errors" || key === "message" || key === "error") {
        parts.push(describeError(value, prefix));
      } else if (key === "code" || key === "status") {
        continue;
      } else {
        parts.push(describeError(value, prefix ? `${prefix}.${key}` : key));
      }
    }
    return parts.filter(Boolean).join("; ");
  }
  return String(body);
}

/** First field path named in an error body ("result.state_a" -> "state_a"), if any. */
export function errorField(body) {
  if (!body || typeof body !== "object") return null;
  if (typeof body.field === "string") return body.field.replace(/^result\./, "");
  if (body.errors && typeof body.errors === "object") return errorField(body.errors);
  for (const [key, value] of Object.entries(body)) {
    if (["detail", "non_field_errors", "message", "code", "status", "error"].includes(key)) continue;
    if (key === "result" && value && typeof value === "object" && !Array.isArray(value)) {
      return errorField(value) || "result";
    }
    return key;
  }
  return null;
}

const RETRY_DELAYS_MS = [400, 1200, 3000, 6000];

let clockOffsetMs = 0;

/**
 * This browser's clock minus the server's, from the Date header of the latest answer (to about a
 * second). Times the server sends (a lease's end) plus this are times on this browser's clock,
 * however wrong either clock is.
 */
// Why the last empty answer (204) had nothing for this annotator, when the server said
// (StateLab-Queue-Done: e.g. a project's cap on answers per annotator); "" when it did not.
let queueDone = "";
export function queueDoneReason() {
  return queueDone;
}

export function serverClockOffset() {
  return clockOffsetMs;
}

/**
 * Call the JSON API. Network failures and 502/503/504 are retried `retries` times with the same
 * request (and so the same Idempotency-Key), which is what makes a retried submit safe.
 */
export async function api(method, url, { body, headers = {}, retries = 0, keepalive = false } = {}) {
  const init = {
    method,
    credentials: "same-origin",
    keepalive,
    headers: { Accept: "application/json", ...headers },
  };
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRFToken"] = csrfToken();
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  for (let attempt = 0; ; attempt++) {
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      if (attempt < retries) {
        await sleep(RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length - 1)]);
        continue;
      }
      throw new NetworkError("The server cannot be reached. Your work is kept in this browser.");
    }
    const serverDate = Date.parse(response.headers.get("Date") || "");
    if (Number.isFinite(serverDate)) clockOffsetMs = Date.now() - serverDate;
    if ([502, 503, 504].includes(response.status) && attempt < retries) {
      await sleep(RETRY_DELAYS_MS[Math.min(attempt, RETRY_DELAYS_MS.length - 1)]);
      continue;
    }
    if (response.status === 204) {
      queueDone = response.headers.get("StateLab-Queue-Done") || "";
      return null;
    }
    const text = await response.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = { detail: text.slice(0, 300) };
      }
    }
    if (!response.ok) throw new ApiError(response.status, data);
    data = data ?? {};
    Object.defineProperty(data, "_status", { value: response.status, enumerable: false });
    return data;
  }
}

/** Follow DRF pagination ({results, next}) or accept a bare list. */
export async function apiList(url) {
  const out = [];
  let next = url;
  while (next) {
    const data = await api("GET", next, { retries: 2 });
    if (Array.isArray(data)) return out.concat(data);
    const rows = data.results || data.items || [];
    out.push(...rows);
    next = data.next || null;
  }
  return out;
}
