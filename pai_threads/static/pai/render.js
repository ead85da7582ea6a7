// Rendering PaiMessages into DOM nodes: every part type, with HTML escaped before the
// light markdown is applied (so model output can never inject markup). A pending action is
// answered on its tool card: Approve/Deny for an approval, a form built from the tool's
// output schema for a client tool (static/pai/schema_form.js).
import { schemaForm } from "./schema_form.js";

const FILES_API = "/api/pai/files";
const fileContentUrl = (part) => `${FILES_API}/${encodeURIComponent(part.fileId)}/content`;

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function emphasis(text) {
  return text
    .replace(/\*\*(\S(?:.*?\S)?)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*\w])\*([^*\s](?:[^*]*[^*\s])?)\*(?![*\w])/g, "$1<em>$2</em>")
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>');
}

/** Inline markdown; code spans are left as they are (a `*` in code is not emphasis). */
function inline(text) {
  return text.split(/(`[^`]+`)/).map((piece, index) => (index % 2
    ? `<code>${piece.slice(1, -1)}</code>` : emphasis(piece))).join("");
}

/** Light markdown: fenced code, headings, lists, paragraphs, inline code/bold/italic/links. */
export function markdown(source) {
  const blocks = escapeHtml(source).split(/```/);
  let html = "";
  blocks.forEach((block, index) => {
    if (index % 2 === 1) {
      html += `<pre><code>${block.replace(/^[\w-]*\n/, "")}</code></pre>`;
      return;
    }
    for (const para of block.split(/\n{2,}/)) {
      const lines = para.split("\n").filter((l) => l.trim());
      if (!lines.length) continue;
      if (lines.every((l) => /^\s*([-*]|\d+\.)\s+/.test(l))) {
        const tag = /^\s*\d+\./.test(lines[0]) ? "ol" : "ul";
        html += `<${tag}>${lines.map((l) => `<li>${inline(l.replace(/^\s*([-*]|\d+\.)\s+/, ""))}</li>`).join("")}</${tag}>`;
      } else if (/^#{1,3}\s/.test(lines[0]) && lines.length === 1) {
        html += `<h4>${inline(lines[0].replace(/^#+\s/, ""))}</h4>`;
      } else {
        html += `<p>${lines.map(inline).join("<br>")}</p>`;
      }
    }
  });
  return html;
}

function el(tag, className, html) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (html !== undefined) node.innerHTML = html;
  return node;
}

const json = (value) => escapeHtml(JSON.stringify(value, null, 2));

const STATE_LABELS = {
  "input-streaming": "preparing", "input-available": "running", "approval-requested": "needs approval",
  "approval-responded": "answered", "output-available": "done", "output-error": "error", "output-denied": "denied",
};

function approvalActions(pendingAction, onAction) {
  const actions = el("div", "tool-actions");
  const approve = el("button", "primary approve", "Approve");
  const deny = el("button", "deny", "Deny");
  approve.type = deny.type = "button";
  const answer = (value) => {
    approve.disabled = deny.disabled = true;
    Promise.resolve(onAction(pendingAction, value)).catch(() => { approve.disabled = deny.disabled = false; });
  };
  approve.onclick = () => answer({ approved: true });
  deny.onclick = () => answer({ approved: false });
  actions.append(approve, deny);
  return actions;
}

/** A client tool's answer (MF-024): a form from its output schema, sent as `{output}`. */
function clientAnswer(pendingAction, { onAction, toolSpec, draft, saveDraft }) {
  const box = el("div", "client-answer");
  box.append(el("div", "client-answer-head", "Your answer"));
  box.append(schemaForm(toolSpec?.outputSchema, {
    draft: draft?.(pendingAction.id),
    onDraft: (value) => saveDraft?.(pendingAction.id, value),
    onSubmit: (output) => onAction(pendingAction, { output }),
    onDecline: () => onAction(pendingAction, { errorText: "The user declined to answer." }),
  }));
  return box;
}

function toolPart(part, context) {
  const { pendingAction, onAction, runActive } = context;
  const name = part.type === "dynamic-tool" ? part.toolName : part.type.slice(5);
  const state = part.state;
  const client = pendingAction?.kind === "client";
  const waiting = state === "input-available" && !runActive ? (client ? "needs your answer" : "waiting") : null;
  const card = el("div", `tool state-${state}${client ? " client-tool" : ""}`);
  card.dataset.toolCallId = part.toolCallId;
  card.dataset.toolName = name;
  card.innerHTML = `<div class="tool-head"><span class="tool-icon" aria-hidden="true">⚙</span><strong>${escapeHtml(name)}</strong>`
    + `<span class="badge tool-state">${escapeHtml(waiting ?? STATE_LABELS[state] ?? state)}</span></div>`;
  if (part.input !== undefined) card.append(el("pre", "tool-input", json(part.input)));
  const records = toolData(part);
  if (records) card.append(records);
  if (state === "output-available") card.append(el("pre", "tool-output", json(part.output)));
  if (state === "output-error") card.append(el("div", "tool-error", escapeHtml(part.errorText ?? "error")));
  if (state === "output-denied") card.append(el("div", "tool-error", escapeHtml(part.approval?.reason ?? "Denied.")));
  if (pendingAction) card.append(client ? clientAnswer(pendingAction, context) : approvalActions(pendingAction, onAction));
  return card;
}

function progress(data, className) {
  const value = Number(data.value ?? data.percent ?? data.pct ?? 0);
  const max = Number(data.max ?? 100) || 100;
  const label = String(data.label ?? "Progress");
  const node = el("div", className, `<span class="progress-label">${escapeHtml(label)}</span>`);
  const bar = document.createElement("progress");
  bar.max = max;
  bar.value = value;
  bar.setAttribute("aria-label", label);
  node.append(bar, el("span", "progress-pct", `${Math.round((100 * value) / max)}%`));
  return node;
}

const recordValue = (value) => (value && typeof value === "object" && !Array.isArray(value)
  ? Object.entries(value).map(([k, v]) => `${escapeHtml(k)} <code>${escapeHtml(JSON.stringify(v))}</code>`).join(" ")
  : `<code>${escapeHtml(JSON.stringify(value))}</code>`);

/** A tool's ToolData (`part.data[channel]`, MF-019): the latest record of each channel. */
function toolData(part) {
  if (!part.data || typeof part.data !== "object") return null;
  const node = el("div", "tool-data");
  for (const [channel, records] of Object.entries(part.data)) {
    const latest = records.at(-1);
    if (!latest) continue;
    const value = latest.value;
    if (channel === "progress" && value && typeof value === "object") node.append(progress(value, "tool-progress"));
    else {
      const record = el("div", `tool-data-record${latest.transient ? " transient" : ""}`, `<span class="channel">${escapeHtml(channel)}</span> ${recordValue(value)}`);
      record.dataset.channel = channel;
      node.append(record);
    }
  }
  return node.childElementCount ? node : null;
}

function dataPart(part) {
  const name = part.type.slice(5);
  const data = part.data;
  if (name === "progress" && data && typeof data === "object") return progress(data, "data-progress");
  return el("details", "data-part", `<summary>${escapeHtml(name)}</summary><pre>${json(data)}</pre>`);
}

function filePart(part) {
  const url = /^(https?:|data:)/.test(part.url) ? part.url : "#";
  if (String(part.mediaType).startsWith("image/")) {
    const img = document.createElement("img");
    img.src = url;
    img.alt = part.filename ?? "image";
    img.className = "file-image";
    return img;
  }
  const link = el("a", "file-link", `📎 ${escapeHtml(part.filename ?? part.mediaType)}`);
  link.href = url;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  return link;
}

/** A PAI-managed file (MF-038): images as a thumbnail, other files as a link to the bytes. */
function attachmentPart(part) {
  const url = fileContentUrl(part);
  const label = part.filename ?? part.mediaType;
  const link = el("a", "file-link attachment");
  link.href = url;
  link.target = "_blank";
  link.rel = "noopener noreferrer";
  link.dataset.fileId = part.fileId;
  if (/^image\/(png|jpeg|gif|webp)$/.test(String(part.mediaType))) {
    const img = document.createElement("img");
    img.src = url;
    img.alt = label;
    img.className = "file-image";
    link.className = "attachment";
    link.append(img);
  } else {
    link.innerHTML = `📎 ${escapeHtml(label)}`;
  }
  return link;
}

/** One part as a node, or null for parts with nothing to show (step-start, metadata-only). */
export function renderPart(part, context) {
  const type = part.type;
  if (type === "text") return el("div", `text${part.state === "streaming" ? " streaming" : ""}`, markdown(part.text));
  if (type === "reasoning") {
    // Open while it streams, collapsed once settled; a reader's own toggle is kept.
    const { reasoningOpen, onReasoningToggle } = context(part);
    const streaming = part.state === "streaming";
    const node = el("details", `reasoning${streaming ? " streaming" : ""}`);
    node.open = reasoningOpen ?? streaming;
    const label = streaming ? "Thinking…" : escapeHtml(part.summary ?? "Reasoning");
    node.innerHTML = `<summary>${label}</summary><div>${markdown(part.text)}</div>`;
    // Only a reader's click counts (a "toggle" event also fires when the page sets `open`).
    node.querySelector("summary").onclick = () => onReasoningToggle?.(!node.open);
    return node;
  }
  if (type === "dynamic-tool" || type.startsWith("tool-")) return toolPart(part, context(part));
  if (type === "source-url") {
    const url = /^https?:/.test(part.url) ? part.url : "#";
    const node = el("a", "source", `🔗 ${escapeHtml(part.title ?? part.url)}`);
    node.href = url;
    node.target = "_blank";
    node.rel = "noopener noreferrer";
    return node;
  }
  if (type === "source-document") return el("span", "source", `📄 ${escapeHtml(part.title)}`);
  if (type === "file" || type === "reasoning-file") return filePart(part);
  if (type === "attachment") return attachmentPart(part);
  if (type.startsWith("data-pai-")) return null; // reserved: never shown raw (MF-011)
  if (type.startsWith("data-")) return dataPart(part);
  return null;
}
