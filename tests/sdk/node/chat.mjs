// Drives the real AI SDK `Chat` (AbstractChat, as useChat wraps it) with DefaultChatTransport
// against a live PAI server, the way a React app using useChat would.
//
// Input (stdin, one JSON object):
//   {"baseUrl": "http://127.0.0.1:PORT", "cookie": "sessionid=...; csrftoken=...",
//    "csrf": "...", "chatId": "thr_...", "messages": [UIMessage...] (the loaded history),
//    "api": "/api/pai/ai-sdk/chat" (default), "autoSend": "approvals" | "tools" | "both" | "none",
//    "actions": [...]}
// Actions run in order; each waits until the chat is idle again (status ready or error and no
// request in flight), then the messages are recorded:
//   {"op": "send", "text": "..."}                      chat.sendMessage({text})
//   {"op": "approve", "approved": true, "reason"?, "approvalId"?}
//                                                      addToolApprovalResponse (default: the first
//                                                      part in state approval-requested)
//   {"op": "toolOutput", "output": ..., "toolCallId"?, "tool"?, "errorText"?}
//                                                      addToolOutput (default: the first tool part
//                                                      in state input-available)
//   {"op": "regenerate", "messageId"?}                 chat.regenerate()
//   {"op": "resume"}                                   chat.resumeStream()
//   {"op": "sendAndStop", "text": "...", "afterChunks": N}
//                                                      send, then chat.stop() once N chunks came
//   {"op": "fetch", "method": "POST", "path": "/api/pai/...", "body"?}
//                                                      a plain request with the session (e.g. the
//                                                      cancel endpoint); its status is recorded
//   {"op": "setMessages", "messages": [...]}           chat.messages = ... (a reload)
// Output (stdout, one JSON object):
//   {"steps": [{"op", "status", "error", "messages", "http"?}], "finishes": [...],
//    "errors": [...], "data": [...], "toolCalls": [...], "chunks": N, "messages": [...]}
import { readFileSync } from "node:fs";
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";

const config = JSON.parse(readFileSync(0, "utf8"));
const headers = { Cookie: config.cookie, "X-CSRFToken": config.csrf };
const clone = (value) => (value === undefined ? undefined : structuredClone(value));

class State {
  constructor(messages) {
    this.status = "ready";
    this.error = undefined;
    this.messages = messages;
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = (thing) => structuredClone(thing);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new State(init.messages ?? []) });
  }
}

let chunkCount = 0;
let stopAt = null;
let chat;
const countingFetch = async (input, init) => {
  const response = await fetch(input, init);
  if (!response.body) return response;
  const counter = new TransformStream({
    transform(bytes, controller) {
      const events = new TextDecoder().decode(bytes).split("\n\n").filter((e) => e.startsWith("data:"));
      chunkCount += events.length;
      controller.enqueue(bytes);
      if (stopAt !== null && chunkCount >= stopAt) {
        stopAt = null;
        queueMicrotask(() => chat.stop());
      }
    },
  });
  return new Response(response.body.pipeThrough(counter), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
};

const autoSend = config.autoSend ?? "both";
const finishes = [];
const errors = [];
const data = [];
const toolCalls = [];
chat = new Chat({
  id: config.chatId,
  messages: config.messages ?? [],
  transport: new DefaultChatTransport({
    api: new URL(config.api ?? "/api/pai/ai-sdk/chat", config.baseUrl).href,
    headers,
    fetch: countingFetch,
  }),
  sendAutomaticallyWhen: ({ messages }) =>
    ((autoSend === "approvals" || autoSend === "both") &&
      lastAssistantMessageIsCompleteWithApprovalResponses({ messages })) ||
    ((autoSend === "tools" || autoSend === "both") &&
      lastAssistantMessageIsCompleteWithToolCalls({ messages })),
  onFinish: ({ message, isAbort, isDisconnect, isError, finishReason }) =>
    finishes.push({ messageId: message.id, isAbort, isDisconnect, isError, finishReason }),
  onError: (error) => errors.push(String(error?.message ?? error).slice(0, 400)),
  onData: (part) => data.push(clone(part)),
  onToolCall: ({ toolCall }) => toolCalls.push(clone(toolCall)),
});

// Idle: not submitted/streaming, for a few consecutive turns of the event loop (an automatic
// send starts in a microtask after the previous response settles).
async function idle() {
  let quiet = 0;
  while (quiet < 5) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    quiet = chat.status === "submitted" || chat.status === "streaming" ? 0 : quiet + 1;
  }
}

function toolParts() {
  return chat.messages.flatMap((m) =>
    m.parts.filter((p) => p.type.startsWith("tool-") || p.type === "dynamic-tool"),
  );
}

async function run(action) {
  switch (action.op) {
    case "send":
      await chat.sendMessage({ text: action.text });
      return {};
    case "sendAndStop":
      stopAt = chunkCount + (action.afterChunks ?? 1);
      await chat.sendMessage({ text: action.text });
      return {};
    case "approve": {
      const part = toolParts().find((p) => p.state === "approval-requested");
      const id = action.approvalId ?? part?.approval?.id;
      if (id === undefined) throw new Error("no tool part awaits an approval");
      await chat.addToolApprovalResponse({ id, approved: action.approved ?? true, reason: action.reason });
      return {};
    }
    case "toolOutput": {
      const part = toolParts().find(
        (p) => p.state === "input-available" && (action.toolCallId ?? p.toolCallId) === p.toolCallId,
      );
      if (part === undefined) throw new Error("no tool part awaits an output");
      const tool = action.tool ?? (part.type === "dynamic-tool" ? part.toolName : part.type.slice(5));
      if (action.errorText !== undefined) {
        await chat.addToolOutput({ state: "output-error", tool, toolCallId: part.toolCallId, errorText: action.errorText });
      } else {
        await chat.addToolOutput({ tool, toolCallId: part.toolCallId, output: action.output });
      }
      return {};
    }
    case "regenerate":
      await chat.regenerate(action.messageId ? { messageId: action.messageId } : undefined);
      return {};
    case "resume":
      await chat.resumeStream();
      return {};
    case "setMessages":
      chat.messages = action.messages;
      return {};
    case "fetch": {
      const response = await fetch(new URL(action.path, config.baseUrl), {
        method: action.method ?? "GET",
        headers: { ...headers, "Content-Type": "application/json" },
        body: action.body === undefined ? undefined : JSON.stringify(action.body),
      });
      const text = await response.text();
      return { http: { status: response.status, body: text ? safeJson(text) : null } };
    }
    default:
      throw new Error(`unknown action ${action.op}`);
  }
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const steps = [];
for (const action of config.actions ?? []) {
  let extra = {};
  try {
    extra = await run(action);
  } catch (error) {
    errors.push(`${action.op}: ${String(error?.message ?? error).slice(0, 400)}`);
  }
  await idle();
  steps.push({
    op: action.op,
    status: chat.status,
    error: chat.error ? String(chat.error.message ?? chat.error) : null,
    messages: clone(chat.messages),
    ...extra,
  });
}
await chat.dispose?.();
process.stdout.write(
  JSON.stringify({ steps, finishes, errors, data, toolCalls, chunks: chunkCount, messages: clone(chat.messages) }) + "\n",
);
