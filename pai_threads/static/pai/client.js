// PAI browser client: keeps one thread's state in sync over the thread websocket.
// An ES module with no build step. Protocol: docs/realtime.md. API: docs/reference/client.md.
//
//   import { connectThread } from "/static/pai/client.js";
//   const conn = connectThread({ threadId, onState: (state) => render(state) });
//   await conn.send("Hello");          // resolves with the ack ({message, run, created})
//   conn.cancel(); conn.regenerate(); conn.rename("Title"); conn.submitAction(id, value);
//   conn.getPendingAction(message, part)?.submit({ approved: true });   // MF-024
//   conn.close();
//   const part = await uploadFile(file, { threadId });      // an attachment part (MF-038)
//   await conn.send({ role: "user", parts: [{ type: "text", text: "Look" }, part] });
//
// State: { status, thread, messages, runs, queue, pendingActions, seq, error }. Messages are
// PaiMessages (UIMessage + metadata.pai); the open generation is an ordinary message with
// metadata.pai.status "open" (MF-025) whose parts fold live from native chunks. Tool parts
// carry `suspensions` and `pendingSuspension` (MF-023, joined by the server and kept current
// from `actions.changed`, or streamed as `data-pai-suspension` parts), and `data[channel]`: the ToolData records the call wrote, durable
// and live transient ones (MF-012, MF-019).

import {
  MessageReducer, joinSuspensions, projectReasoningSummaries, projectToolData,
  unprojectReasoningSummaries, unprojectToolData,
} from "./reducer.js";

export { MessageReducer, joinSuspensions, projectReasoningSummaries, projectToolData } from "./reducer.js";

const STREAMING = new Set(["queued", "running"]);
// A run's end is final: a later status of an ended run is a stale read (see upsertRun).
const RUN_ENDS = new Set(["completed", "failed", "cancelled", "blocked"]);

/** PAI's reserved suspension part (pai_agents/messages/suspension_parts.py); never shown raw. */
export const SUSPENSION = "data-pai-suspension";

/**
 * Suspension records streamed as `data-pai-suspension` parts (one per suspended call, sent
 * once the step is stored) joined onto their tool parts as `suspensions` and
 * `pendingSuspension`, and removed, as the server's project_suspensions does (MF-011,
 * MF-023). A message without them is returned as is.
 */
export function projectSuspensions(message) {
  const parts = message.parts ?? [];
  if (!parts.some((p) => p.type === SUSPENSION)) return message;
  const records = new Map(parts.filter((p) => p.type === SUSPENSION && p.data)
    .map((p) => [String(p.data.toolCallId), p.data]));
  const projected = parts.filter((p) => p.type !== SUSPENSION).map((part) => {
    const record = typeof part.toolCallId === "string" ? records.get(part.toolCallId) : undefined;
    return record ? { ...part, suspensions: record.suspensions, pendingSuspension: record.pendingSuspension } : part;
  });
  return { ...message, parts: projected };
}

/**
 * What a reader must know about how a stored step ended, beyond the run's status, from
 * `metadata.pai.diagnostics` (the notes `pai_chat` prints): an answer cut by the output
 * token limit (finish reason `length`), tool calls not executed, the run's step limit
 * (`max_steps`) reached. `[{kind, text}]`, empty for an ordinary step or an open message.
 */
export function stepNotes(message) {
  const d = message.metadata?.pai?.diagnostics ?? {};
  const notes = [];
  if (d.finishReason === "length") {
    notes.push({ kind: "length", text: "Cut off: the answer reached the output token limit." });
  }
  if (d.toolCallsRefused) {
    notes.push({ kind: "refused", text: `${d.toolCallsRefused} tool call(s) were not executed.` });
  }
  if (d.maxStepsReached) {
    notes.push({ kind: "max-steps", text: "Stopped at the step limit (max_steps): the model did not see the last tool results." });
  }
  return notes;
}

function defaultUrl(threadId) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/pai/threads/${encodeURIComponent(threadId)}/`;
}

function emptyState() {
  return {
    status: "connecting", thread: null, messages: [], runs: [], queue: { items: [] },
    pendingActions: [], seq: null, error: null,
  };
}

/** Insert or replace a message by id; a run's input goes before that run's outputs. */
function upsert(messages, message) {
  const index = messages.findIndex((m) => m.id === message.id);
  if (index >= 0) {
    messages[index] = message;
    return;
  }
  const pai = message.metadata?.pai ?? {};
  if (pai.relation === "input" && pai.runId) {
    const position = messages.findIndex((m) => m.role === "assistant" && m.metadata?.pai?.runId === pai.runId);
    if (position >= 0) {
      messages.splice(position, 0, message);
      return;
    }
  }
  messages.push(message);
}

export class ThreadConnection {
  constructor({ threadId, url, onState, onEvent, WebSocketImpl }) {
    this.threadId = threadId;
    this.url = url ?? defaultUrl(threadId);
    this.onState = onState ?? (() => {});
    this.onEvent = onEvent ?? (() => {});
    this.WebSocket = WebSocketImpl ?? WebSocket;
    this.state = emptyState();
    this.reducers = new Map(); // messageId -> MessageReducer of open generations
    this.pending = new Map(); // requestId -> {resolve, reject}
    this.nextRequest = 1;
    this.attempt = 0;
    this.closed = false;
    this.socket = null;
    this.timer = null;
    /** Resolves once the first snapshot (or resume) has been applied; rejects on close(). */
    this.ready = new Promise((resolve, reject) => { this.markReady = resolve; this.markClosed = reject; });
    this.ready.catch(() => {}); // nobody waiting is not an error
    this.open();
  }

  // -- commands ---------------------------------------------------------------------

  /** Send a user message: a string, or a UIMessage ({id?, role: "user", parts}). */
  send(textOrMessage, { clientData } = {}) {
    const frame = typeof textOrMessage === "string" ? { text: textOrMessage } : { message: textOrMessage };
    if (clientData !== undefined) frame.clientData = clientData;
    return this.command("send", frame);
  }
  cancel(runId) { return this.command("cancel", runId ? { runId } : {}); }
  regenerate(messageId) { return this.command("regenerate", messageId ? { messageId } : {}); }
  rename(title) { return this.command("rename", { title }); }
  submitAction(actionId, value) { return this.command("submit-action", { actionId, value }); }

  /**
   * MF-024: the pending action of exactly this message and tool part (an approval or an
   * unresolved client tool) as `{...action, submit(value)}`, or null. A sidecar: nothing of
   * it is stored in the message. `message`/`part` may also be a message id / tool call id.
   */
  getPendingAction(message, part) {
    const messageId = typeof message === "string" ? message : message?.id;
    const toolCallId = typeof part === "string" ? part : part?.toolCallId;
    const action = this.state.pendingActions.find((a) => a.messageId === messageId
      && a.toolCallId === toolCallId && (a.status ?? "pending") === "pending");
    if (!action) return null;
    return { ...action, submit: (value) => this.submitAction(action.id, value) };
  }

  /** The active run (queued or running), if any. */
  get activeRun() { return this.state.runs.findLast((r) => STREAMING.has(r.status)) ?? null; }

  command(type, fields) {
    const requestId = `r${this.nextRequest++}`;
    return new Promise((resolve, reject) => {
      if (!this.socket || this.socket.readyState !== 1) {
        reject(Object.assign(new Error("not connected"), { code: "not_connected" }));
        return;
      }
      this.pending.set(requestId, { resolve, reject });
      this.socket.send(JSON.stringify({ type, requestId, ...fields }));
    });
  }

  close() {
    this.closed = true;
    this.markClosed(Object.assign(new Error("connection closed"), { code: "closed" }));
    clearTimeout(this.timer);
    this.socket?.close(1000);
    this.update({ status: "closed" });
  }

  // -- connection ---------------------------------------------------------------------

  open() {
    const since = this.state.seq;
    const url = since == null ? this.url : `${this.url}${this.url.includes("?") ? "&" : "?"}since=${since}`;
    const socket = new this.WebSocket(url);
    this.socket = socket;
    socket.onmessage = (event) => this.receive(JSON.parse(event.data));
    socket.onclose = (event) => {
      if (socket !== this.socket) return;
      for (const { reject } of this.pending.values()) reject(Object.assign(new Error("disconnected"), { code: "disconnected" }));
      this.pending.clear();
      if (this.closed || event.code === 4404 || event.code === 4401) {
        this.update({ status: event.code === 4404 ? "not-found" : "closed" });
        return;
      }
      // Exponential backoff with jitter, resuming from the last sequence number.
      const delay = Math.min(10000, 500 * 2 ** this.attempt++) * (0.75 + Math.random() / 2);
      this.update({ status: "reconnecting" });
      this.timer = setTimeout(() => this.open(), delay);
    };
  }

  update(changes) {
    this.state = { ...this.state, ...changes };
    this.onState(this.state);
  }

  receive(frame) {
    const s = { ...this.state, messages: [...this.state.messages], runs: [...this.state.runs] };
    const requestId = frame.requestId;
    switch (frame.type) {
      case "snapshot":
        Object.assign(s, frame.state, { seq: frame.seq, messages: structuredClone(frame.state.messages) });
        this.reducers.clear();
        break;
      case "resumed":
        break;
      case "synced":
        s.seq = frame.seq;
        s.status = "open";
        s.error = null;
        this.attempt = 0;
        queueMicrotask(() => this.markReady(this));
        break;
      case "ack":
      case "error":
        if (requestId != null && this.pending.has(requestId)) {
          const { resolve, reject } = this.pending.get(requestId);
          this.pending.delete(requestId);
          const e = frame.error ?? frame; // {"type": "error", "error": {code, message, details?}}
          if (frame.type === "ack") resolve(frame);
          else reject(Object.assign(new Error(e.message), { code: e.code, details: e.details }));
          // The ack's run is as it was created: the run's own events (which can overtake
          // the ack) are newer, so it only adds a run this client has not heard of yet.
          if (frame.type === "ack" && frame.run && !s.runs.some((r) => r.id === frame.run.id)) {
            this.firstSeen(s, frame.run);
            s.runs.push(frame.run);
          }
        } else if (frame.type === "error") {
          const e = frame.error ?? frame;
          s.error = { code: e.code, message: e.message };
        }
        break;
      case "pong":
        break;
      default:
        this.applyEvent(s, frame);
    }
    if (typeof frame.seq === "number" && !frame.replay && frame.type !== "snapshot") s.seq = frame.seq;
    this.state = s;
    this.onEvent(frame);
    this.onState(s);
  }

  upsertRun(s, run) {
    const index = s.runs.findIndex((r) => r.id === run.id);
    if (index >= 0) {
      // An operation reads a run and publishes after its commit; the run may end in between
      // and that stale read arrive after its end. The server withholds it; a client that
      // resumed after seeing the end may still get it, and never takes the end back.
      if (RUN_ENDS.has(s.runs[index].status) && !RUN_ENDS.has(run.status)) return;
      s.runs[index] = { ...s.runs[index], ...run };
      return;
    }
    this.firstSeen(s, run);
    s.runs.push(run);
  }

  /**
   * A run this client hears of for the first time. A regenerate run was created with the
   * history rewrite that hid the latest answer (everything after the latest user message,
   * LC-058's removed ids): that answer leaves the screen now, as it left the transcript.
   */
  firstSeen(s, run) {
    if (run.initiator !== "regenerate" || !STREAMING.has(run.status)) return;
    const target = s.messages.findLastIndex((m) => m.role === "user");
    if (target < 0) return;
    const superseded = s.messages.slice(target + 1).filter((m) => m.metadata?.pai?.runId !== run.id);
    for (const m of superseded) this.reducers.delete(m.id);
    s.messages = s.messages.filter((m) => !superseded.includes(m));
  }

  applyEvent(s, event) {
    switch (event.type) {
      case "generation.started": {
        // A new generation of the same run replaces an unfinished one (a crashed attempt);
        // a replay resets its own message to an empty shell (MF-028).
        s.messages = s.messages.filter((m) => m.id === event.messageId || !this.reducers.has(m.id)
          || m.metadata?.pai?.runId !== event.runId);
        // A continued generation (results joining a committed message) folds onto that message.
        const existing = event.continued ? s.messages.find((m) => m.id === event.messageId) : null;
        const shell = existing ?? {
          id: event.messageId, role: "assistant",
          metadata: { pai: { status: "open", runId: event.runId, relation: "output", producer: "model" } },
          parts: [],
        };
        const seed = existing
          ? structuredClone(unprojectReasoningSummaries(unprojectToolData(existing)).parts) : [];
        this.reducers.set(event.messageId, new MessageReducer({ id: event.messageId, role: "assistant", parts: seed }));
        upsert(s.messages, shell);
        break;
      }
      case "generation.message.chunk": {
        const reducer = this.reducers.get(event.messageId);
        if (!reducer) break; // a generation this client never saw start: the next snapshot has it
        reducer.apply(event.chunk);
        const index = s.messages.findIndex((m) => m.id === event.messageId);
        if (index >= 0) {
          // MF-012, MF-019: ToolData joined onto its tool parts, transient overlays included.
          // MF-013: reasoning summaries as `summary` on their reasoning parts.
          const folded = projectReasoningSummaries(
            projectToolData({ ...s.messages[index], parts: structuredClone(reducer.message.parts) }));
          // MF-023: streamed suspension records (sent when the step is stored) win over the
          // pending-action mirror, which may not have heard of the action yet.
          s.messages[index] = projectSuspensions(joinSuspensions(folded, s.pendingActions, s.messages[index]));
        }
        break;
      }
      case "generation.finished":
        this.reducers.delete(event.messageId);
        // No message: the run ended before any of it was stored (a reload shows none).
        if (event.message) upsert(s.messages, event.message);
        else s.messages = s.messages.filter((m) => m.id !== event.messageId);
        break;
      case "message.committed":
        upsert(s.messages, event.message);
        break;
      case "run.status":
        this.upsertRun(s, event.run ?? { id: event.runId, status: event.status });
        if (!STREAMING.has(event.status)) {
          for (const m of s.messages) if (m.metadata?.pai?.runId === event.runId) this.reducers.delete(m.id);
        }
        break;
      case "thread.updated":
        s.thread = event.thread;
        break;
      case "queue.changed":
        s.queue = event.queue;
        break;
      case "actions.changed":
        s.pendingActions = event.pendingActions;
        s.messages = s.messages.map((m) => joinSuspensions(m, s.pendingActions, m));
        break;
      default:
        break;
    }
  }
}

/** Connect to a thread; see the module comment for the returned object's API. */
export function connectThread(options) {
  return new ThreadConnection(options);
}

function csrfCookie() {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

/**
 * Upload a file (`POST /api/pai/files`, multipart) and resolve with its attachment part,
 * `{type: "attachment", id, fileId, mediaType, filename?, byteSize?, metadata?}` (MF-038):
 * put it in a message's `parts` to attach the file. Rejects with the server's error `code`
 * (`file_too_large` 413, `unsupported_media_type` 415, `invalid_input` 422, ...).
 */
export async function uploadFile(file, { threadId, metadata, filename, baseUrl = "/api/pai", csrfToken } = {}) {
  const form = new FormData();
  form.append("file", file, filename ?? file.name);
  if (threadId) form.append("threadId", threadId);
  if (metadata !== undefined) form.append("metadata", JSON.stringify(metadata));
  const token = csrfToken ?? csrfCookie();
  const response = await fetch(`${baseUrl}/files`, {
    method: "POST", body: form, credentials: "same-origin", headers: token ? { "X-CSRFToken": token } : {},
  });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body?.error ?? {};
    throw Object.assign(new Error(error.message ?? response.statusText), { code: error.code ?? "http_error", status: response.status });
  }
  return body;
}

/** Where an attachment's bytes are served (same partition only). */
export function fileContentUrl(attachment, { baseUrl = "/api/pai" } = {}) {
  return `${baseUrl}/files/${encodeURIComponent(attachment.fileId)}/content`;
}
