"""A local OpenAI-compatible chat server for tests and benchmarks (real HTTP over asyncio, stdlib only).

POST /v1/chat/completions answers like a small model would: a letter / number for option
prompts (with first-token top log-probs), a JSON object following `response_format`'s schema
for judges. It also misbehaves by a deterministic rule per query, so tests know what to expect:

    key     = sha256 of the first user message's text parts and image count (a retry or a JSON
              repair of the same query has the same key)
    bucket  = int(key, 16) % 100
    attempt = how many requests with this key the server has seen (1 = first)

    bucket  0-4   429 with retry-after on attempt 1           (recovered by the client's retries)
    bucket  5-9   500 on attempt 1                            (recovered)
    bucket 10-12  sleeps past the client timeout on attempt 1 (recovered); `timeout_sleep`, 10 s
    bucket 13-14  500 on every attempt                        (unrecoverable: the query fails)
    bucket 15-19  malformed JSON content in a well-formed reply on attempt 1: for a JSON schema
                  (judges) the object cut in half, recovered by the job's JSON repair round;
                  for option prompts (letters, numbers) a cut JSON object instead of the
                  option, which no repair round asks again: a parse failure (answer null)
    bucket 20-23  HTTP 200 whose body is not JSON on attempt 1 (recovered: the backend asks again)
    bucket 24     HTTP 200 whose body is not JSON on every attempt (unrecoverable)

`rule` (default `planned_fault`) maps a key to its fault; `unrepairable_json_fault` is the rule
for the judge's JSON repair accounting: `planned_fault`'s, plus two faults no repair recovers

    bucket 25-29  malformed JSON on every request, repairs included (judges: the reply stays
                  unreadable through every repair round)
    bucket 30-34  malformed JSON on attempt 1, then 500 on every request (the repair request
                  fails after the client's retries)

`four_judge_outcomes` gives judge queries four outcomes in equal shares (bucket % 4): a reply that
stays unreadable through every repair, one whose repair request fails, a request that always
fails, a clean reply (the job page's failures and unreadable replies, and their retry).

`faults=False` turns all of this off; `latency` adds a fixed delay to every request.
`events` records each request with its arrival and reply times (time.monotonic()), so tests can
check how long the client waited after a retry-after, and what it asked: `text`, the first user
message's text (which item the key is), and `follow_up`, the (role, text) turns after it (a JSON
repair: the unreadable reply, then the request to answer again; none on a first ask or a retry),
and `images`, the image URLs it sent (data URLs: the bytes the model was shown);
a request answered 200 with a completion also has `usage`, its (prompt, completion) tokens.
`schema_reply` gives the JSON a judge query's key is answered with. `max_in_flight` is the most
requests the server was handling at once (`reset_in_flight()` starts counting again).
Run alone: python -m tests.inference.openai_standin --port 8765 --latency 0.1 --no-faults
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import threading
import time
from collections import Counter
from typing import Any

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _first_user(messages: list[dict[str, Any]]) -> tuple[int, list[str], int]:
    """Where the first user message is (len(messages) when none), its text parts, its image count."""
    at = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages))
    content = messages[at]["content"] if at < len(messages) else ""
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
    texts = [p.get("text", "") for p in parts if p.get("type") == "text"]
    return at, texts, sum(1 for p in parts if p.get("type") != "text")


def _image_urls(messages: list[dict[str, Any]]) -> list[str]:
    """The image URLs (data URLs) of a conversation, in order."""
    return [
        p["image_url"]["url"] if isinstance(p.get("image_url"), dict) else p.get("image_url")
        for m in messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p.get("type") == "image_url"
    ]


def query_key(messages: list[dict[str, Any]]) -> str:
    _, texts, n_images = _first_user(messages)
    return hashlib.sha256(json.dumps([texts, n_images]).encode()).hexdigest()


def bucket_of(key: str) -> int:
    return int(key, 16) % 100


def planned_fault(key: str) -> str | None:
    b = bucket_of(key)
    if b < 5:
        return "429"
    if b < 10:
        return "500"
    if b < 13:
        return "timeout"
    if b < 15:
        return "always500"
    if b < 20:
        return "badjson"
    if b < 24:
        return "badbody"
    if b < 25:
        return "alwaysbadbody"
    return None


def unrepairable_json_fault(key: str) -> str | None:
    """planned_fault, plus malformed JSON that no repair recovers (buckets 25-34, see above)."""
    b = bucket_of(key)
    if 25 <= b < 30:
        return "alwaysbadjson"
    if 30 <= b < 35:
        return "badjson_then500"
    return planned_fault(key)


def four_judge_outcomes(key: str) -> str | None:
    """A rule: "alwaysbadjson", "badjson_then500", "always500" or none, by bucket % 4."""
    return ("alwaysbadjson", "badjson_then500", "always500", None)[bucket_of(key) % 4]


def _all_text(messages) -> str:
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out += [p.get("text", "") for p in c if p.get("type") == "text"]
    return "\n".join(out)


def _from_schema(schema: dict[str, Any], h: int) -> Any:
    if "anyOf" in schema:
        return _from_schema(schema["anyOf"][0], h)
    if "enum" in schema:
        values = [v for v in schema["enum"] if v is not None]
        return values[h % len(values)]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if kind == "object":
        return {k: _from_schema(s, h + i) for i, (k, s) in enumerate(schema.get("properties", {}).items())}
    if kind == "array":
        return [_from_schema(schema.get("items", {}), h + i) for i in range(schema.get("minItems", 1))]
    if kind == "integer":
        return schema.get("minimum", 1) + h % 3
    return f"observation {h % 97}"


def schema_reply(schema: dict[str, Any], key: str, *, malformed: bool = False) -> str:
    """The content a query asking for this JSON schema gets: the same object for every request of
    the key (a retry, a JSON repair), cut in half when malformed."""
    content = json.dumps(_from_schema(schema, int(key[:8], 16)))
    return content[: len(content) // 2] if malformed else content


class StandIn:
    """The server runs on its own asyncio loop in a daemon thread: one thread serves every
    connection, so a busy machine does not turn 32 concurrent requests into 32 threads fighting
    for the GIL (that made a thread-per-connection http.server the bottleneck of the benchmark)."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        faults: bool = True,
        timeout_sleep: float = 10.0,
        retry_after: float = 0.05,
        rule=planned_fault,
    ):
        self.latency = latency
        self.faults = faults
        self.rule = rule
        self.timeout_sleep = timeout_sleep
        self.retry_after = retry_after
        self.attempts: Counter[str] = Counter()
        self.log: list[tuple[str, int, str]] = []  # (key, attempt, outcome)
        self.events: list[dict[str, Any]] = []  # {"key", "attempt", "outcome", "received", "replied"}
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.hold_after: int | None = None  # see hold()
        self.received = 0
        self.address: tuple[str, int] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None

    def hold(self, after: int) -> None:
        """Answer the first `after` requests, then keep the others waiting until release(): a test
        can look at a job part-way through however slow the machine is."""
        with self.lock:
            self.hold_after = after

    def release(self) -> None:
        with self.lock:
            self.hold_after = None

    @property
    def base_url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}/v1"

    def start(self, port: int = 0) -> StandIn:
        ready = threading.Event()

        def run() -> None:
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            self._server = self.loop.run_until_complete(
                asyncio.start_server(self._connection, "127.0.0.1", port, backlog=512)
            )
            self.address = self._server.sockets[0].getsockname()[:2]
            ready.set()
            self.loop.run_forever()
            self._server.close()
            pending = asyncio.all_tasks(self.loop)  # open keep-alive connections
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self._server.wait_closed())
            self.loop.close()

        self.thread = threading.Thread(target=run, daemon=True, name="openai-standin")
        self.thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self.loop and self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    def reset_in_flight(self) -> None:
        with self.lock:
            self.max_in_flight = self.in_flight

    def outcomes(self) -> dict[str, list[str]]:
        """key -> outcomes in order (what the server did with each request of that query)."""
        out: dict[str, list[str]] = {}
        with self.lock:
            for key, _, outcome in self.log:
                out.setdefault(key, []).append(outcome)
        return out

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # HTTP/1.1 keep-alive: requests one after another on this connection
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                if method != "POST" or not path.startswith("/v1/") or not path.endswith("/chat/completions"):
                    status, payload, extra = 404, {"error": {"message": "not found"}}, {}
                else:
                    status, payload, extra = await self.respond(json.loads(body or b"{}"))
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                reason = {200: "OK", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error"}[status]
                out = [f"HTTP/1.1 {status} {reason}", "content-type: application/json", f"content-length: {len(data)}"]
                out += [f"{k}: {v}" for k, v in extra.items()]
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + data)  # one write: no Nagle stall
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass  # the client closed the connection (or gave up after its timeout)
        finally:
            writer.close()

    async def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes, dict[str, str]]:
        received = time.monotonic()
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        event: dict[str, Any] = {"received": received}
        try:
            return await self._respond(body, event)
        finally:
            event["replied"] = time.monotonic()
            with self.lock:
                self.in_flight -= 1
                self.events.append(event)

    async def _respond(
        self, body: dict[str, Any], event: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | bytes, dict[str, str]]:
        messages = body.get("messages") or []
        key = query_key(messages)
        with self.lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
            self.received += 1
            number = self.received
        while self.hold_after is not None and number > self.hold_after:
            await asyncio.sleep(0.02)
        at, texts, _ = _first_user(messages)
        event.update(
            key=key,
            attempt=attempt,
            text="\n".join(texts),
            follow_up=[(m.get("role"), _all_text([m])) for m in messages[at + 1 :]],
            images=_image_urls(messages),
        )
        fault = self.rule(key) if self.faults else None
        if self.latency:
            await asyncio.sleep(self.latency)
        outcome = "ok"
        if fault == "429" and attempt == 1:
            outcome = "429"
        elif fault == "500" and attempt == 1:
            outcome = "500"
        elif fault == "always500":
            outcome = "500"
        elif fault == "timeout" and attempt == 1:
            outcome = "timeout"
        elif fault in ("badjson", "badjson_then500") and attempt == 1:
            outcome = "badjson"
        elif fault == "alwaysbadjson":
            outcome = "badjson"
        elif fault == "badjson_then500":
            outcome = "500"
        elif (fault == "badbody" and attempt == 1) or fault == "alwaysbadbody":
            outcome = "badbody"
        event["outcome"] = outcome
        with self.lock:
            self.log.append((key, attempt, outcome))
        if outcome == "429":
            return (
                429,
                {"error": {"message": "rate limited", "type": "rate_limit"}},
                {"retry-after": str(self.retry_after)},
            )
        if outcome == "500":
            return 500, {"error": {"message": "internal error", "type": "server_error"}}, {}
        if outcome == "timeout":
            await asyncio.sleep(self.timeout_sleep)
        if outcome == "badbody":  # a proxy's error page, or a reply cut off, under status 200
            return 200, b'<html><body>502 Bad Gateway</body></html>{"id": "chatcmpl-', {}
        reply = self.completion(body, key, malformed=outcome == "badjson")
        event["usage"] = (reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"])
        return 200, reply, {}

    def completion(self, body: dict[str, Any], key: str, *, malformed: bool = False) -> dict[str, Any]:
        h = int(key[:8], 16)
        messages = body.get("messages") or []
        text_in = _all_text(messages)
        logprobs = None
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            content = schema_reply(fmt["json_schema"]["schema"], key, malformed=malformed)
        else:
            numbers = re.search(r"\(1 to (\d+)\)", text_in)
            letters = re.findall(r"^([A-Z])\. ", text_in, flags=re.M)
            if numbers:
                options = [str(i + 1) for i in range(int(numbers.group(1)))]
            elif letters:
                options = sorted(set(letters))
            elif "whole number" in text_in:
                options = [str(i) for i in range(10)]
            else:
                options = ["A", "B"]
            weights = [-(0.2 + ((h >> (3 * i)) % 7) * 0.35) for i in range(len(options))]
            best = max(range(len(options)), key=lambda i: weights[i])
            content = options[best]
            if malformed:  # JSON where the option was asked for, cut off: no option to read
                content = '{"answer": "' + content
            if body.get("logprobs"):
                ranked = sorted(zip(options, weights), key=lambda t: -t[1])
                first, first_lp = content, weights[best]
                if malformed:  # the reply's first token is the brace, the options come after it
                    first, first_lp = '{"', -0.05
                    ranked = [(first, first_lp)] + ranked
                top = ranked[: body.get("top_logprobs") or 1]
                logprobs = {
                    "content": [
                        {
                            "token": first,
                            "logprob": first_lp,
                            "bytes": list(first.encode()),
                            "top_logprobs": [{"token": t, "logprob": w, "bytes": list(t.encode())} for t, w in top],
                        }
                    ]
                }
        n_prompt = len(text_in.split()) + 64 * sum(
            1
            for m in messages
            if isinstance(m.get("content"), list)
            for p in m["content"]
            if p.get("type") == "image_url"
        )
        return {
            "id": f"chatcmpl-{key[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "standin"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "logprobs": logprobs,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": max(1, len(content) // 4),
                "total_tokens": n_prompt + max(1, len(content) // 4),
            },
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--no-faults", action="store_true")
    args = parser.parse_args()
    standin = StandIn(latency=args.latency, faults=not args.no_faults).start(args.port)
    print(standin.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        standin.stop()


if __name__ == "__main__":
    main()
