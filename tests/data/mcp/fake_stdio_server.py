#!/usr/bin/env python3
"""A fake MCP server over stdio for troupe's client tests: JSON-RPC 2.0, one message per
line, as the MCP stdio transport defines it. It serves a few tools that exercise the
client: pagination of tools/list, progress, cancellation, a server that dies mid-call,
elicitation and tools/list_changed.

Every message it receives is appended, one JSON per line, to the file named by
FAKE_MCP_LOG (when set), so a test can see what the client sent.

Tools:
  echo {message}          -> "Echo: <message>"
  fail {}                 -> isError: true, "it failed on purpose"
  slow {steps, delay_ms}  -> a progress notification per step, then "done after N steps";
                             a notifications/cancelled for the call ends it without an answer
  die {}                  -> writes to stderr and exits with code 3, never answering
  elicit {}               -> asks the client (elicitation/create), answers with its reply
  grow {}                 -> adds the tool "extra" and sends notifications/tools/list_changed
  extra {}                -> "extra"
"""

import json
import os
import queue
import sys
import threading
import time

VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"]
PAGE_SIZE = 2

tools = [
    {"name": "echo", "description": "Echoes its message",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}},
                     "required": ["message"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "fail", "description": "Always fails", "inputSchema": {"type": "object"}},
    {"name": "slow", "description": "Reports progress",
     "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer"},
                                                       "delay_ms": {"type": "integer"}}}},
    {"name": "die", "description": "Exits mid-call", "inputSchema": {"type": "object"}},
    {"name": "elicit", "description": "Asks the client", "inputSchema": {"type": "object"}},
    {"name": "grow", "description": "Adds a tool", "inputSchema": {"type": "object"}},
]

log_path = os.environ.get("FAKE_MCP_LOG")
inbox = queue.Queue()
cancelled = set()
answers = {}


def record(message):
    if log_path:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(message) + "\n")


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id, value):
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text(request_id, words, is_error=False):
    value = {"content": [{"type": "text", "text": words}]}
    if is_error:
        value["isError"] = True
    result(request_id, value)


def reader():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        record(message)
        inbox.put(message)
    inbox.put(None)


def wait_for(predicate, seconds):
    """Handles incoming messages until predicate() holds or the time is up."""
    end = time.monotonic() + seconds
    while not predicate():
        left = end - time.monotonic()
        if left <= 0:
            return False
        try:
            message = inbox.get(timeout=left)
        except queue.Empty:
            return predicate()
        if message is None:
            sys.exit(0)
        handle(message)
    return True


def call_tool(request_id, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "echo":
        text(request_id, "Echo: " + str(args.get("message", "")))
    elif name == "fail":
        text(request_id, "it failed on purpose", is_error=True)
    elif name == "slow":
        steps = int(args.get("steps", 3))
        delay = int(args.get("delay_ms", 100)) / 1000.0
        for step in range(1, steps + 1):
            if wait_for(lambda: request_id in cancelled, delay):
                sys.stderr.write("fake: call %s cancelled\n" % request_id)
                sys.stderr.flush()
                return
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": step, "total": steps,
                                 "message": "step %d" % step}})
        text(request_id, "done after %d steps" % steps)
    elif name == "die":
        sys.stderr.write("fake: dying on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "elicit":
        send({"jsonrpc": "2.0", "id": "elicit-1", "method": "elicitation/create",
              "params": {"message": "Who are you?",
                         "requestedSchema": {"type": "object", "properties": {
                             "name": {"type": "string", "default": "Ada"},
                             "age": {"type": "integer", "default": 36}},
                             "required": ["name"]}}})
        if wait_for(lambda: "elicit-1" in answers, 10):
            text(request_id, "elicited " + json.dumps(answers.pop("elicit-1"), sort_keys=True))
        else:
            text(request_id, "no answer to the elicitation", is_error=True)
    elif name == "grow":
        if not any(t["name"] == "extra" for t in tools):
            tools.append({"name": "extra", "description": "Added later",
                          "inputSchema": {"type": "object"}})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        text(request_id, "grown")
    elif name == "extra":
        text(request_id, "extra")
    else:
        send({"jsonrpc": "2.0", "id": request_id,
              "error": {"code": -32602, "message": "Unknown tool: %s" % name}})


def handle(message):
    method = message.get("method")
    request_id = message.get("id")
    if method is None:
        answers[request_id] = message.get("result", message.get("error"))
        return
    if method == "initialize":
        asked = message["params"].get("protocolVersion")
        version = os.environ.get("FAKE_MCP_VERSION") or (asked if asked in VERSIONS else VERSIONS[0])
        result(request_id, {"protocolVersion": version,
                            "capabilities": {"tools": {"listChanged": True}},
                            "serverInfo": {"name": "fake-stdio", "version": "1.0.0"}})
    elif method == "tools/list":
        cursor = (message.get("params") or {}).get("cursor")
        start = int(cursor.split("-")[1]) if cursor else 0
        page = {"tools": tools[start:start + PAGE_SIZE]}
        if start + PAGE_SIZE < len(tools):
            page["nextCursor"] = "page-%d" % (start + PAGE_SIZE)
        result(request_id, page)
    elif method == "tools/call":
        call_tool(request_id, message.get("params") or {})
    elif method == "ping":
        result(request_id, {})
    elif method == "notifications/cancelled":
        cancelled.add(message["params"]["requestId"])
    elif request_id is not None:
        send({"jsonrpc": "2.0", "id": request_id,
              "error": {"code": -32601, "message": "Method not found: %s" % method}})


sys.stderr.write("fake: started\n")
sys.stderr.flush()
threading.Thread(target=reader, daemon=True).start()
while True:
    incoming = inbox.get()
    if incoming is None:
        break
    handle(incoming)
