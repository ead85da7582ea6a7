// A port of the AI SDK's processUIMessageStream (ai@7), the same rules as
// pai_agents/messages/reducer.py: folding a generation's chunks gives exactly the stored
// message (MF-027). Unknown chunk types are ignored, as the SDK does.

const RESULT_STATES = new Set(["output-available", "output-error"]);
const OVERWRITTEN = ["input", "output", "errorText", "rawInput", "preliminary"];
const UNSAFE = new Set(["__proto__", "constructor", "prototype"]);

const clone = (value) => (value === undefined ? undefined : structuredClone(value));
const isTool = (part) => part.type === "dynamic-tool" || part.type.startsWith("tool-");
const toolName = (part) => (part.type === "dynamic-tool" ? part.toolName : part.type.slice(5));
const present = (chunk, key) => (chunk[key] == null ? undefined : clone(chunk[key]));

function setOrDrop(target, key, value) {
  if (value === undefined) delete target[key];
  else target[key] = value;
}

/** Merge message metadata like the SDK's mergeObjects (objects deep, the rest replace). */
export function mergeMetadata(old, value) {
  if (old == null || typeof old !== "object" || Array.isArray(old)) return clone(value);
  if (value == null || typeof value !== "object" || Array.isArray(value)) return clone(value);
  const result = { ...old };
  for (const [key, item] of Object.entries(value)) {
    if (UNSAFE.has(key)) continue;
    const base = result[key];
    const nested = item && typeof item === "object" && !Array.isArray(item);
    const baseNested = base && typeof base === "object" && !Array.isArray(base);
    result[key] = nested && baseNested ? mergeMetadata(base, item) : clone(item);
  }
  return result;
}

/** Parse possibly-truncated JSON (the input of a streaming tool call). */
export function parsePartialJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    /* repaired below */
  }
  const closers = [];
  let inString = false;
  let escaped = false;
  let out = "";
  for (const ch of text) {
    out += ch;
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === "\\") escaped = true;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === "{") closers.push("}");
    else if (ch === "[") closers.push("]");
    else if (ch === "}" || ch === "]") closers.pop();
  }
  if (inString) out += '"';
  let candidate = out.replace(/[,:\s]+$/, "").replace(/,\s*"[^"]*"$/, "");
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return JSON.parse(candidate + closers.slice().reverse().join(""));
    } catch {
      candidate = candidate.replace(/(,|\{)\s*"[^"]*"\s*:?\s*[^,{}[\]]*$/, "$1").replace(/,$/, "");
    }
  }
  return undefined;
}

const episodeOf = (action) => ({
  id: action.id, kind: action.kind, status: "pending", payload: clone(action.input),
  approvalId: action.approvalId ?? null, resolution: null,
  suspendedAt: action.createdAt ?? null, resolvedAt: null,
});

/**
 * MF-023 in the browser: a tool part whose call has suspended gets `suspensions` (its durable
 * episodes) and `pendingSuspension` (the pending one, or null); other parts stay as folded
 * (absent means no episode, as the server projects them). Episodes the server joined are
 * kept, also from `previous` (the same message before its parts were re-folded from chunks);
 * the thread's pending actions (`actions.changed`, snapshot) decide which one is pending now.
 * An answered episode keeps its last known fields until the next message event carries the
 * server's. Returns a new message; the input is not modified.
 */
export function joinSuspensions(message, pendingActions, previous) {
  if (!message.parts.some(isTool)) return message;
  const before = new Map((previous?.parts ?? []).filter(isTool).map((p) => [p.toolCallId, p]));
  const parts = message.parts.map((part) => {
    if (!isTool(part)) return part;
    const known = part.suspensions ?? before.get(part.toolCallId)?.suspensions ?? [];
    const action = (pendingActions ?? []).find((a) => a.messageId === message.id
      && a.toolCallId === part.toolCallId && (a.status ?? "pending") === "pending");
    if (!action && !known.length) return part;
    let suspensions = known;
    let pending = null;
    if (action) {
      pending = known.find((e) => e.id === action.id) ?? episodeOf(action);
      if (!known.includes(pending)) suspensions = [...known, pending];
    }
    return { ...part, suspensions, pendingSuspension: pending };
  });
  return { ...message, parts };
}

/** PAI's reserved ToolData part (pai_agents/messages/tool_data.py); never shown raw (MF-011). */
export const TOOL_DATA = "data-pai-tool-data";

/**
 * The ToolData projection, as the server's project_tool_data (MF-012, MF-019): reserved
 * parts removed, each tool part with records gets `data[channel]` = `[{id, value, transient?}]`
 * in write order. A message without records is returned as is.
 */
export function projectToolData(message) {
  const parts = message.parts ?? [];
  if (!parts.some((p) => p.type === TOOL_DATA)) return message;
  const byCall = new Map();
  for (const p of parts) {
    if (p.type !== TOOL_DATA || typeof p.data?.toolCallId !== "string") continue;
    const channels = byCall.get(p.data.toolCallId) ?? {};
    byCall.set(p.data.toolCallId, channels);
    const channel = String(p.data.channel);
    if (!Object.hasOwn(channels, channel)) channels[channel] = [];
    const record = { id: p.data.id, value: clone(p.data.value) };
    if (p.transient) record.transient = true;
    channels[channel].push(record);
  }
  const owners = new Map();
  const projected = [];
  for (const p of parts) {
    if (p.type === TOOL_DATA) continue;
    if (isTool(p) && byCall.has(p.toolCallId)) owners.set(p.toolCallId, projected.length);
    projected.push(p);
  }
  for (const [id, index] of owners) projected[index] = { ...projected[index], data: byCall.get(id) };
  return { ...message, parts: projected };
}

/**
 * The inverse, for folding more chunks into a projected message (a generation that continues
 * a committed one): `part.data` back to reserved parts, durable records only.
 */
export function unprojectToolData(message) {
  const parts = [];
  const records = [];
  for (const p of message.parts ?? []) {
    if (!isTool(p) || p.data == null || typeof p.data !== "object") {
      parts.push(p);
      continue;
    }
    const { data, ...rest } = p;
    parts.push(rest);
    for (const [channel, list] of Object.entries(data)) {
      for (const r of list) {
        if (r.transient) continue;
        records.push({
          type: TOOL_DATA, id: JSON.stringify([p.toolCallId, channel, r.id]),
          data: { toolCallId: p.toolCallId, channel, id: r.id, value: clone(r.value) },
        });
      }
    }
  }
  return { ...message, parts: [...parts, ...records] };
}

/** PAI's reserved reasoning-summary part (pai_agents/messages/reasoning_summary.py). */
export const REASONING_SUMMARY = "data-pai-reasoning-summary";

/**
 * The reasoning-summary projection, as the server's project_reasoning_summaries (MF-013):
 * reserved parts removed, each summary set as `summary` on the `reasoningOrdinal`-th
 * reasoning part of the message. A message without summaries is returned as is.
 */
export function projectReasoningSummaries(message) {
  const parts = message.parts ?? [];
  if (!parts.some((p) => p.type === REASONING_SUMMARY)) return message;
  const summaries = new Map();
  for (const p of parts) {
    if (p.type !== REASONING_SUMMARY) continue;
    const { reasoningOrdinal, summary } = p.data ?? {};
    if (Number.isInteger(reasoningOrdinal) && typeof summary === "string" && summary) summaries.set(reasoningOrdinal, summary);
  }
  const projected = [];
  let ordinal = 0;
  for (const p of parts) {
    if (p.type === REASONING_SUMMARY) continue;
    if (p.type === "reasoning") {
      projected.push(summaries.has(ordinal) ? { ...p, summary: summaries.get(ordinal) } : p);
      ordinal += 1;
    } else projected.push(p);
  }
  return { ...message, parts: projected };
}

/** The inverse, for folding more chunks into a projected message. */
export function unprojectReasoningSummaries(message) {
  const parts = [];
  const records = [];
  let ordinal = 0;
  for (const p of message.parts ?? []) {
    if (p.type !== "reasoning") {
      parts.push(p);
      continue;
    }
    const { summary, ...rest } = p;
    parts.push(rest);
    if (typeof summary === "string" && summary) {
      records.push({ type: REASONING_SUMMARY, id: String(ordinal), data: { reasoningOrdinal: ordinal, summary } });
    }
    ordinal += 1;
  }
  return records.length ? { ...message, parts: [...parts, ...records] } : message;
}

export class MessageReducer {
  constructor(message) {
    this.message = message?.role === "assistant"
      ? structuredClone(message)
      : { id: "", role: "assistant", parts: [] };
    this.activeText = new Map();
    this.activeReasoning = new Map();
    this.partialCalls = new Map();
    this.finishReason = undefined;
  }

  stepParts() {
    const parts = this.message.parts;
    let start = -1;
    for (let i = parts.length - 1; i >= 0; i--) if (parts[i].type === "step-start") { start = i; break; }
    return parts.slice(start + 1);
  }

  findInStep(id, dynamic) {
    return this.stepParts().find((p) => isTool(p) && p.toolCallId === id
      && (dynamic === undefined || (p.type === "dynamic-tool") === dynamic));
  }

  invocation(id) {
    const part = this.findInStep(id)
      ?? [...this.message.parts].reverse().find((p) => isTool(p) && p.toolCallId === id);
    if (!part) throw new Error(`No tool invocation found for tool call ID "${id}".`);
    return part;
  }

  updateTool({ dynamic, name, id, state, values, existing }) {
    let part = existing ?? this.findInStep(id, dynamic);
    const metaKey = RESULT_STATES.has(state) ? "resultProviderMetadata" : "callProviderMetadata";
    if (!part) {
      part = dynamic ? { type: "dynamic-tool", toolName: name } : { type: `tool-${name}` };
      part.toolCallId = id;
      part.state = state;
      this.message.parts.push(part);
    } else {
      part.state = state;
      if (dynamic) part.toolName = name;
    }
    for (const key of OVERWRITTEN) setOrDrop(part, key, values[key]);
    setOrDrop(part, "inputEncoding", state === "input-streaming" ? values.inputEncoding : undefined);
    if (values.title !== undefined) part.title = values.title;
    if (values.toolMetadata !== undefined) part.toolMetadata = values.toolMetadata;
    if (values.providerExecuted !== undefined) part.providerExecuted = values.providerExecuted;
    if (values.providerMetadata !== undefined) part[metaKey] = values.providerMetadata;
  }

  open(chunk, kind, registry) {
    const part = { type: kind };
    if (kind === "reasoning") part.id = chunk.id;
    part.text = "";
    setOrDrop(part, "providerMetadata", present(chunk, "providerMetadata"));
    part.state = "streaming";
    registry.set(chunk.id, part);
    this.message.parts.push(part);
  }

  active(chunk, kind, registry) {
    const part = registry.get(chunk.id);
    if (!part) throw new Error(`Received ${chunk.type} for missing ${kind} part "${chunk.id}".`);
    if (chunk.providerMetadata != null) part.providerMetadata = clone(chunk.providerMetadata);
    return part;
  }

  apply(chunk) {
    const t = chunk.type;
    const m = this.message;
    switch (t) {
      case "start":
        if (chunk.messageId != null && chunk.messageId !== m.id) {
          this.message = { id: chunk.messageId, role: "assistant", parts: [] };
          this.activeText.clear(); this.activeReasoning.clear(); this.partialCalls.clear();
        }
        if (chunk.messageMetadata != null) this.message.metadata = mergeMetadata(this.message.metadata, chunk.messageMetadata);
        return;
      case "message-metadata":
      case "finish":
        if (t === "finish" && chunk.finishReason != null) this.finishReason = chunk.finishReason;
        if (chunk.messageMetadata != null) m.metadata = mergeMetadata(m.metadata, chunk.messageMetadata);
        return;
      case "start-step": m.parts.push({ type: "step-start" }); return;
      case "reset-step": {
        this.activeText.clear(); this.activeReasoning.clear(); this.partialCalls.clear();
        const keep = m.parts.length - this.stepParts().length;
        m.parts.splice(keep);
        return;
      }
      case "text-start": this.open(chunk, "text", this.activeText); return;
      case "text-delta": this.active(chunk, "text", this.activeText).text += chunk.delta; return;
      case "reasoning-start": this.open(chunk, "reasoning", this.activeReasoning); return;
      case "reasoning-delta": this.active(chunk, "reasoning", this.activeReasoning).text += chunk.delta; return;
      case "text-end":
      case "reasoning-end": {
        const kind = t === "text-end" ? "text" : "reasoning";
        const registry = kind === "text" ? this.activeText : this.activeReasoning;
        const part = this.active(chunk, kind, registry);
        part.state = "done";
        if (kind === "text" && chunk.citations != null) part.citations = clone(chunk.citations);
        registry.delete(chunk.id);
        return;
      }
      case "tool-input-start": {
        const dynamic = Boolean(chunk.dynamic);
        const common = {
          inputEncoding: present(chunk, "inputEncoding"), title: present(chunk, "title"),
          toolMetadata: present(chunk, "toolMetadata"),
        };
        this.partialCalls.set(chunk.toolCallId, { text: "", toolName: chunk.toolName, dynamic, ...common });
        this.updateTool({
          dynamic, name: chunk.toolName, id: chunk.toolCallId, state: "input-streaming",
          values: { ...common, providerExecuted: present(chunk, "providerExecuted"), providerMetadata: present(chunk, "providerMetadata") },
        });
        return;
      }
      case "tool-input-delta": {
        const partial = this.partialCalls.get(chunk.toolCallId);
        if (!partial) throw new Error(`tool-input-delta for missing tool call "${chunk.toolCallId}".`);
        partial.text += chunk.inputTextDelta;
        const input = partial.inputEncoding === "text" ? partial.text : parsePartialJson(partial.text);
        this.updateTool({
          dynamic: partial.dynamic, name: partial.toolName, id: chunk.toolCallId, state: "input-streaming",
          values: { input, rawInput: partial.text, inputEncoding: partial.inputEncoding, title: partial.title, toolMetadata: clone(partial.toolMetadata) },
        });
        return;
      }
      case "tool-input-available":
        this.updateTool({
          dynamic: Boolean(chunk.dynamic), name: chunk.toolName, id: chunk.toolCallId, state: "input-available",
          values: {
            input: clone(chunk.input), providerExecuted: present(chunk, "providerExecuted"),
            providerMetadata: present(chunk, "providerMetadata"), title: present(chunk, "title"),
            toolMetadata: present(chunk, "toolMetadata"),
          },
        });
        return;
      case "tool-input-error": {
        const existing = this.findInStep(chunk.toolCallId);
        const dynamic = existing ? existing.type === "dynamic-tool" : Boolean(chunk.dynamic);
        const values = {
          errorText: chunk.errorText, providerExecuted: present(chunk, "providerExecuted"),
          providerMetadata: present(chunk, "providerMetadata"), toolMetadata: present(chunk, "toolMetadata"),
        };
        values[dynamic ? "input" : "rawInput"] = clone(chunk.input);
        this.updateTool({ dynamic, name: chunk.toolName, id: chunk.toolCallId, state: "output-error", values });
        return;
      }
      case "tool-output-available":
      case "tool-output-error": {
        const part = this.invocation(chunk.toolCallId);
        const dynamic = part.type === "dynamic-tool";
        const values = {
          input: clone(part.input), providerExecuted: present(chunk, "providerExecuted"),
          providerMetadata: present(chunk, "providerMetadata"), toolMetadata: present(chunk, "toolMetadata"),
        };
        let state = "output-available";
        if (t === "tool-output-available") {
          values.output = clone(chunk.output);
          values.preliminary = clone(chunk.preliminary);
        } else {
          state = "output-error";
          values.errorText = chunk.errorText;
          if (!dynamic) values.rawInput = part.rawInput;
        }
        this.updateTool({ dynamic, name: toolName(part), id: chunk.toolCallId, state, values, existing: part });
        if (!values.preliminary) this.dropTransient(chunk.toolCallId); // MF-021: completion
        return;
      }
      case "tool-approval-request": {
        const part = this.invocation(chunk.toolCallId);
        const approval = { id: chunk.approvalId };
        if (chunk.approvalDescriptor != null) approval.descriptor = clone(chunk.approvalDescriptor);
        if ("inputSchemaInput" in chunk) approval.inputSchemaInput = clone(chunk.inputSchemaInput);
        if (chunk.reason != null) approval.requestReason = chunk.reason;
        if (chunk.isAutomatic === true) approval.isAutomatic = true;
        if (chunk.signature != null) approval.signature = chunk.signature;
        part.state = "approval-requested";
        part.approval = approval;
        return;
      }
      case "tool-approval-response": {
        const part = m.parts.find((p) => isTool(p) && p.approval?.id === chunk.approvalId);
        if (!part) throw new Error(`No tool invocation found for approval ID "${chunk.approvalId}".`);
        part.state = "approval-responded";
        part.approval = { ...part.approval, approved: chunk.approved };
        if (chunk.reason != null) part.approval.reason = chunk.reason;
        if (chunk.providerExecuted != null) part.providerExecuted = chunk.providerExecuted;
        if (chunk.providerMetadata != null) part.callProviderMetadata = clone(chunk.providerMetadata);
        return;
      }
      case "tool-output-denied":
        this.invocation(chunk.toolCallId).state = "output-denied";
        this.dropTransient(chunk.toolCallId);
        return;
      case "source-url": this.append(chunk, ["sourceId", "url", "title", "providerMetadata"]); return;
      case "source-document": this.append(chunk, ["sourceId", "mediaType", "title", "filename", "providerMetadata"]); return;
      case "file":
      case "reasoning-file": this.append(chunk, ["mediaType", "url", "providerMetadata"]); return;
      case "custom": this.append(chunk, ["kind", "providerMetadata"]); return;
      case "steering-message": this.append(chunk, ["id", "parts"]); return;
      default:
        if (t === TOOL_DATA) this.toolData(chunk);
        else if (t.startsWith("data-") && chunk.transient !== true) {
          const same = chunk.id != null && m.parts.find((p) => p.type === t && p.id === chunk.id);
          if (same) same.data = clone(chunk.data);
          else m.parts.push(clone(chunk));
        }
    }
  }

  /**
   * A ToolData record (MF-021, MF-022). Durable ones fold as the SDK folds data chunks, so
   * the message equals the stored one. Transient ones are live overlays kept only here: in
   * place over a durable record with the same identity (whose value comes back when the
   * overlay goes), else appended. A durable write of the same identity removes the overlay.
   */
  toolData(chunk) {
    const parts = this.message.parts;
    let same = parts.find((p) => p.type === TOOL_DATA && p.id === chunk.id);
    if (chunk.transient === true) {
      if (!same) parts.push({ type: TOOL_DATA, id: chunk.id, data: clone(chunk.data), transient: true });
      else {
        if (!same.transient) Object.assign(same, { transient: true, retained: same.data });
        same.data = clone(chunk.data);
      }
      return;
    }
    if (same?.transient && !("retained" in same)) {
      parts.splice(parts.indexOf(same), 1); // never stored: the durable record goes where the server puts it
      same = undefined;
    }
    if (!same) parts.push(clone(chunk));
    else {
      same.data = clone(chunk.data);
      delete same.transient;
      delete same.retained;
    }
  }

  /** The call completed: its transient overlays go (MF-021). */
  dropTransient(toolCallId) {
    const parts = this.message.parts;
    for (let i = parts.length - 1; i >= 0; i--) {
      const p = parts[i];
      if (p.type !== TOOL_DATA || !p.transient || p.data?.toolCallId !== toolCallId) continue;
      if ("retained" in p) {
        p.data = p.retained;
        delete p.retained;
        delete p.transient;
      } else parts.splice(i, 1);
    }
  }

  append(chunk, fields) {
    const part = { type: chunk.type };
    for (const key of fields) setOrDrop(part, key, clone(chunk[key]));
    this.message.parts.push(part);
  }
}
