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
      case "tool-output-denied": this.invocation(chunk.toolCallId).state = "output-denied"; return;
      case "source-url": this.append(chunk, ["sourceId", "url", "title", "providerMetadata"]); return;
      case "source-document": this.append(chunk, ["sourceId", "mediaType", "title", "filename", "providerMetadata"]); return;
      case "file":
      case "reasoning-file": this.append(chunk, ["mediaType", "url", "providerMetadata"]); return;
      case "custom": this.append(chunk, ["kind", "providerMetadata"]); return;
      case "steering-message": this.append(chunk, ["id", "parts"]); return;
      default:
        if (t.startsWith("data-") && chunk.transient !== true) {
          const same = chunk.id != null && m.parts.find((p) => p.type === t && p.id === chunk.id);
          if (same) same.data = clone(chunk.data);
          else m.parts.push(clone(chunk));
        }
    }
  }

  append(chunk, fields) {
    const part = { type: chunk.type };
    for (const key of fields) setOrDrop(part, key, clone(chunk[key]));
    this.message.parts.push(part);
  }
}
