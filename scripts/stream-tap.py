#!/usr/bin/env python3
"""A logging reverse proxy for checking request-sim's stream split against a real server.

    stream-tap.py LISTEN_PORT UPSTREAM_URL LOG.jsonl

Forwards every request to UPSTREAM_URL unchanged and streams the answer back unchanged. For
each answered POST it appends one JSON line to LOG.jsonl, in the order requests arrived:
    {"seq": n, "key": "first 60 characters of the last message", "path": "/v1/chat/completions",
     "status": 200,
     "events": [[ms_since_request, ["reasoning"|"answer"|"tool", ...]], ...],
     "tool_calls": k, "tool_arg_bytes": b, "usage": {...}}
where each event is one SSE data line that carried thinking, answer text or a tool call
(name or arguments), with what it carried (a chunk can carry the last thinking and the first
answer text at once), read here independently of request-sim's parser. Used by
scripts/vllm.sh (checks `reasoning` and `tools`); needs aiohttp (vLLM's venv has it).
"""
import asyncio
import json
import os
import sys
import time

from aiohttp import ClientSession, ClientTimeout, web


def kinds_of_chat(ev):
    """What one chat chunk carried: a list of kinds, tool calls begun, argument bytes."""
    out, calls, arg = [], 0, 0
    for c in ev.get("choices") or []:
        d = c.get("delta") or {}
        tcs = d.get("tool_calls") or []
        # `reasoning: ""` / `content: ""` outside the role preamble, with nothing else in the
        # delta: a token whose bytes the server held back (part of a multi-byte character).
        visible = d.get("reasoning") or d.get("reasoning_content") or d.get("content") or tcs
        held = not visible and "role" not in d
        if d.get("reasoning") or d.get("reasoning_content") or (
                held and (d.get("reasoning") == "" or d.get("reasoning_content") == "")):
            out.append("reasoning")
        elif held and d.get("content") == "":
            out.append("answer")
        if d.get("content"):
            out.append("answer")
        if tcs:
            out.append("tool")
        if "delta" in c and not out and "role" not in d:
            # A delta that carried nothing: still a token event (vLLM's final `{}` with the
            # finish reason after a tool parser swallowed the last tokens).
            out.append("none")
        for t in tcs:
            f = t.get("function") or {}
            if t.get("id") or f.get("name"):
                calls += 1
            arg += len((f.get("arguments") or "").encode())
    return out, calls, arg


def kinds_of_responses(ev):
    k = ev.get("type", "")
    if k == "response.output_item.added" and (ev.get("item") or {}).get("type") == "function_call":
        return [], 1, 0
    # `delta: ""`: a token whose bytes the server held back (part of a multi-byte character).
    if k.endswith(".delta") and (ev.get("delta") or ev.get("delta") == ""):
        if "reasoning" in k:
            return ["reasoning"], 0, 0
        if "arguments" in k:
            return ["tool"], 0, len(ev["delta"].encode())
        return ["answer"], 0, 0
    return [], 0, 0


def kinds_of_messages(ev):
    k = ev.get("type", "")
    if k == "content_block_start":
        b = ev.get("content_block") or {}
        if b.get("type") == "tool_use":
            return ["tool"], 1, 0
        if b.get("thinking"):
            return ["reasoning"], 0, 0
        if b.get("text"):
            return ["answer"], 0, 0
    if k == "content_block_delta":
        # Empty text is a held-back token of its kind; a `signature_delta` is no token.
        d = ev.get("delta") or {}
        if d.get("thinking") is not None:
            return ["reasoning"], 0, 0
        if d.get("text") is not None:
            return ["answer"], 0, 0
        if d.get("partial_json") is not None:
            return ["tool"], 0, len(d["partial_json"].encode())
    return [], 0, 0


def key_of(body):
    """The first 60 characters of the request's last message (or prompt / input) text: what
    scripts/split-check.py matches a request with its trace row by."""
    try:
        b = json.loads(body)
    except ValueError:
        return None
    if not isinstance(b, dict):
        return None
    m = b.get("messages") or b.get("input") or b.get("prompt")
    text = m[-1].get("content") if isinstance(m, list) and m and isinstance(m[-1], dict) else m
    return text[:60] if isinstance(text, str) else None


def usage_of(ev):
    u = ev.get("usage")
    if u is None and isinstance(ev.get("response"), dict):
        u = ev["response"].get("usage")
    if u is None and isinstance(ev.get("message"), dict):
        u = ev["message"].get("usage")
    return u


async def main():
    port, upstream, log_path = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3]
    log = open(log_path, "a", buffering=1)
    # TAP_RAW=FILE: also every data line, parsed, with its arrival time (for debugging).
    raw = open(os.environ["TAP_RAW"], "a", buffering=1) if os.environ.get("TAP_RAW") else None
    seq = 0
    session = ClientSession(timeout=ClientTimeout(total=None))

    async def handle(request):
        nonlocal seq
        my = seq
        seq += 1
        body = await request.read()
        t0 = time.monotonic()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with session.request(request.method, upstream + request.path_qs, data=body, headers=headers) as up:
            resp = web.StreamResponse(status=up.status)
            for k, v in up.headers.items():
                if k.lower() in ("content-type", "cache-control"):
                    resp.headers[k] = v
            await resp.prepare(request)
            path = request.path
            kinds_of = kinds_of_responses if path.endswith("/responses") else (
                kinds_of_messages if path.endswith("/messages") else kinds_of_chat)
            events, calls, arg, usage, buf = [], 0, 0, None, b""
            async for piece in up.content.iter_any():
                now = (time.monotonic() - t0) * 1000.0
                await resp.write(piece)
                buf += piece
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.strip()
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        continue
                    try:
                        ev = json.loads(data)
                    except ValueError:
                        continue
                    ks, c, a = kinds_of(ev)
                    if raw is not None:
                        raw.write(json.dumps({"seq": my, "ms": round(now, 3), "kinds": ks, "data": ev}) + "\n")
                    calls += c
                    arg += a
                    if ks:
                        events.append([round(now, 3), ks])
                    usage = usage_of(ev) or usage
            await resp.write_eof()
        if request.method == "POST":
            log.write(json.dumps({"seq": my, "key": key_of(body), "path": path,
                                  "status": up.status, "events": events,
                                  "tool_calls": calls, "tool_arg_bytes": arg, "usage": usage}) + "\n")
        return resp

    app = web.Application(client_max_size=64 << 20)
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"stream-tap: 127.0.0.1:{port} -> {upstream}, log {log_path}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
