// The demo chat page: thread list over the HTTP API, the open thread over the websocket
// client (static/pai/client.js). The selected thread lives in the URL (?thread=<id>), so a
// reload reconnects to it and the running generation is rebuilt from the replay. On a
// narrow screen the thread list is a drawer behind the menu button.
import { connectThread, stepNotes, uploadFile } from "./client.js";
import { renderPart } from "./render.js";

const api = "/api/pai";
const $ = (id) => document.getElementById(id);
const els = {
  threads: $("threads"), agent: $("agent"), newThread: $("new-thread"), title: $("title"),
  connection: $("connection"), runStatus: $("run-status"), messages: $("messages"), empty: $("empty"),
  queue: $("queue"), form: $("composer"), input: $("input"), send: $("send"), cancel: $("cancel"),
  error: $("error"), attach: $("attach"), attached: $("attached"), menu: $("menu"),
  sidebar: $("sidebar"), scrim: $("scrim"), announcer: $("announcer"),
};
let conn = null;
let threads = [];
let titledAgents = new Set(); // agents whose threads get automatic titles (threadTitles)
let toolsByAgent = new Map(); // agent name -> Map(tool name -> manifest, with its schemas)
const rendered = new Map(); // message id -> {meta, message, node}: unchanged ones keep their node
const drafts = new Map(); // pending action id -> a client tool form's raw input
const reasoningOpen = new Map(); // "messageId:partIndex" -> a reader's own toggle
let announced = null; // ids already announced to screen readers (null: not yet synced)

function csrf() {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

async function call(method, path, body) {
  const response = await fetch(api + path, {
    method,
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  const data = response.status === 204 ? null : await response.json();
  if (!response.ok) throw new Error(data?.error?.message ?? response.statusText);
  return data;
}

function showError(error) {
  els.error.hidden = !error;
  els.error.textContent = error ? String(error.message ?? error) : "";
}

// -- thread list ------------------------------------------------------------------------

function setDrawer(isOpen) {
  const wasOpen = els.sidebar.classList.contains("open");
  els.sidebar.classList.toggle("open", isOpen);
  els.scrim.hidden = !isOpen;
  els.menu.setAttribute("aria-expanded", String(isOpen));
  if (isOpen) els.newThread.focus();
  else if (wasOpen) els.menu.focus();
}
els.menu.onclick = () => setDrawer(!els.sidebar.classList.contains("open"));
els.scrim.onclick = () => setDrawer(false);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && els.sidebar.classList.contains("open")) setDrawer(false);
});

async function loadThreads() {
  const listed = (await call("GET", "/threads")).threads;
  // A chat started while the list was loading stays in it.
  threads = [...threads.filter((t) => !listed.some((l) => l.id === t.id)), ...listed];
  renderThreads();
}

function renderThreads() {
  els.threads.replaceChildren(...threads.map((thread) => {
    const link = document.createElement("a");
    link.href = `?thread=${encodeURIComponent(thread.id)}`;
    link.textContent = thread.title || "Untitled chat";
    link.className = conn?.threadId === thread.id ? "active" : "";
    link.dataset.threadId = thread.id;
    link.onclick = (event) => {
      event.preventDefault();
      open(thread.id);
    };
    return link;
  }));
}

// -- the open thread --------------------------------------------------------------------

function open(threadId, { push = true } = {}) {
  if (conn && !conn.closed && conn.threadId === threadId) { // already open: keep its socket
    setDrawer(false);
    return;
  }
  conn?.close();
  if (push) history.pushState({}, "", `?thread=${encodeURIComponent(threadId)}`);
  rendered.clear();
  announced = null;
  conn = connectThread({ threadId, onState: render });
  renderThreads();
  setDrawer(false);
}

const ENDED = new Set(["failed", "cancelled"]);
const textOf = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join(" ").trim();

/** The public error of a failed or cancelled run, under the run's last message. */
function runNotice(run) {
  const node = document.createElement("div");
  node.className = `run-notice ${run.status}`;
  node.dataset.runId = run.id;
  node.dataset.status = run.status;
  node.setAttribute("role", "note");
  const title = run.status === "failed" ? "Run failed" : "Run cancelled";
  const detail = run.error?.message ?? (run.status === "cancelled" ? "Stopped before the answer was complete." : "");
  node.innerHTML = `<strong>${title}</strong>${detail ? `<span class="run-error"></span>` : ""}`;
  if (detail) node.querySelector(".run-error").textContent = detail;
  if (run.error?.code) node.dataset.code = run.error.code;
  return node;
}

/** How a stored step ended, when a reader must know (the same live and after a reload). */
function stepNotesNode(notes) {
  const node = document.createElement("div");
  node.className = "step-notes";
  node.setAttribute("role", "note");
  for (const note of notes) {
    const line = document.createElement("p");
    line.className = `step-note ${note.kind}`;
    line.dataset.kind = note.kind;
    line.textContent = note.text;
    node.append(line);
  }
  return node;
}

function bubble(message, run, { showTools, agentTools, notice }) {
  const pai = message.metadata?.pai ?? {};
  const node = document.createElement("article");
  const ended = run && ENDED.has(run.status) && message.role === "assistant" ? ` run-${run.status}` : "";
  node.className = `message ${message.role}${pai.status === "open" ? " open" : ""}${ended}`;
  node.dataset.messageId = message.id;
  if (pai.status === "open") node.setAttribute("aria-busy", "true");
  const runActive = Boolean(run && ["queued", "running"].includes(run.status));
  message.parts.forEach((part, index) => {
    const key = `${message.id}:${index}`;
    const context = () => ({
      pendingAction: conn.getPendingAction(message, part), // MF-024: exactly this pair
      runActive,
      toolSpec: agentTools?.get(part.type === "dynamic-tool" ? part.toolName : part.type.slice(5)),
      onAction: (action, value) => action.submit(value).catch((error) => { showError(error); throw error; }),
      draft: (actionId) => drafts.get(actionId),
      saveDraft: (actionId, value) => drafts.set(actionId, value),
      reasoningOpen: reasoningOpen.get(key),
      onReasoningToggle: (isOpen) => reasoningOpen.set(key, isOpen),
    });
    const child = renderPart(part, context);
    if (child) node.append(child);
  });
  if (pai.status === "open" && !message.parts.some((p) => p.type === "text")) {
    node.append(Object.assign(document.createElement("span"), { className: "typing", textContent: "●●●", ariaHidden: "true" }));
  }
  const notes = stepNotes(message); // a cut-off step, refused calls, max_steps reached
  if (notes.length) node.append(stepNotesNode(notes));
  if (notice) node.append(runNotice(notice));
  if (showTools) {
    const tools = document.createElement("div");
    tools.className = "message-tools";
    const regenerate = document.createElement("button");
    regenerate.type = "button";
    regenerate.className = "link regenerate";
    regenerate.textContent = "↻ Regenerate";
    regenerate.onclick = () => conn.regenerate(message.id).catch(showError);
    tools.append(regenerate);
    node.append(tools);
  }
  return node;
}

/** Put exactly `nodes` into `parent`, moving only what changed (keeps focus and form input). */
function reconcile(parent, nodes) {
  let cursor = parent.firstChild;
  for (const node of nodes) {
    if (node === cursor) cursor = cursor.nextSibling;
    else parent.insertBefore(node, cursor);
  }
  while (cursor) {
    const next = cursor.nextSibling;
    cursor.remove();
    cursor = next;
  }
}

/** Whether a message's node still shows it (the same object, or equal content). */
function unchanged(cached, message, meta) {
  if (!cached || cached.meta !== meta) return false;
  if (cached.message === message) return true;
  cached.json ??= JSON.stringify(cached.message);
  return cached.json === JSON.stringify(message);
}

function renderMessages(state, busy) {
  const runs = new Map(state.runs.map((run) => [run.id, run]));
  const lastOfRun = new Map();
  state.messages.forEach((m, index) => { if (m.metadata?.pai?.runId) lastOfRun.set(m.metadata.pai.runId, index); });
  const last = state.messages.findLast((m) => m.role === "assistant");
  const agentTools = toolsByAgent.get(state.thread?.agent);
  const nodes = [];
  const keep = new Map();
  state.messages.forEach((message, index) => {
    const run = runs.get(message.metadata?.pai?.runId);
    const showTools = message === last && !busy;
    const pending = message.parts.map((part) => conn.getPendingAction(message, part)?.id ?? null);
    // A message is rebuilt only when what it shows changed: streaming ones on every chunk,
    // the rest stay as they are (a half-filled client tool form keeps its input and focus).
    const meta = JSON.stringify([pending, run?.status, showTools, Boolean(agentTools)]);
    // A failed or cancelled run is marked under its last message: inside the answer, or
    // on its own when the run ended before answering.
    const ended = run && ENDED.has(run.status) && lastOfRun.get(run.id) === index ? run : null;
    const inside = ended && message.role === "assistant" ? ended : null;
    const cached = rendered.get(message.id);
    const same = unchanged(cached, message, meta);
    const node = same ? cached.node : bubble(message, run, { showTools, agentTools, notice: inside });
    keep.set(message.id, { meta, message, node, json: same ? cached.json : undefined });
    nodes.push(node);
    if (ended && !inside) {
      const noticeKey = `notice:${run.id}`;
      const old = rendered.get(noticeKey);
      const notice = old?.key === run.status ? old.node : runNotice(run);
      keep.set(noticeKey, { key: run.status, node: notice });
      nodes.push(notice);
    }
  });
  rendered.clear();
  for (const [id, entry] of keep) rendered.set(id, entry);
  const box = els.messages;
  const nearBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
  reconcile(box, nodes.length ? nodes : [els.empty]);
  if (nearBottom) box.scrollTop = box.scrollHeight;
  announce(state, runs);
}

/**
 * Screen readers hear each assistant message once, when it has settled, and each failed or
 * cancelled run (the streaming message itself is aria-busy and outside any live region).
 */
function announce(state, runs) {
  if (state.status !== "open" && announced === null) return;
  const settled = state.messages.filter((m) => m.role === "assistant" && m.metadata?.pai?.status !== "open");
  const ended = [...runs.values()].filter((run) => ENDED.has(run.status));
  const ids = [...settled.map((m) => m.id), ...ended.map((run) => `run:${run.id}`)];
  if (announced === null) { // what was there on arrival is not news
    announced = new Set(ids);
    return;
  }
  const fresh = [];
  for (const message of settled) if (!announced.has(message.id) && textOf(message)) fresh.push(textOf(message));
  for (const run of ended) {
    if (!announced.has(`run:${run.id}`)) fresh.push(`Run ${run.status}. ${run.error?.message ?? ""}`.trim());
  }
  ids.forEach((id) => announced.add(id));
  if (fresh.length) els.announcer.textContent = fresh.join(" ").slice(0, 600);
}

function renderQueue(state) {
  const items = state.queue?.items ?? [];
  els.queue.hidden = !items.length;
  els.queue.replaceChildren(...items.flatMap((item) => item.messages.map((message) => {
    const node = document.createElement("div");
    node.className = "queued";
    const files = message.parts.filter((p) => p.type === "attachment").map((p) => `📎 ${p.filename ?? p.mediaType}`);
    node.textContent = `Queued: ${[...message.parts.filter((p) => p.type === "text").map((p) => p.text), ...files].join(" ")}`;
    return node;
  })));
}

function render(state) {
  const activeRun = conn?.activeRun;
  els.connection.dataset.status = state.status;
  els.connection.textContent = state.status === "open" ? "live" : state.status;
  if (state.thread) {
    els.title.textContent = state.thread.title || "Untitled chat";
    document.title = `${els.title.textContent} · PAI`;
    const known = threads.find((t) => t.id === state.thread.id);
    if (known && known.title !== state.thread.title) {
      known.title = state.thread.title;
      renderThreads();
    }
  }
  const lastRun = state.runs.at(-1);
  els.runStatus.hidden = !lastRun;
  if (lastRun) {
    els.runStatus.textContent = lastRun.status;
    els.runStatus.dataset.status = lastRun.status;
    els.runStatus.dataset.runId = lastRun.id;
  }
  els.cancel.hidden = !activeRun;
  renderMessages(state, Boolean(activeRun) || lastRun?.status === "waiting");
  renderQueue(state);
  if (state.error) showError(state.error);
}

// -- actions ----------------------------------------------------------------------------

async function newThread() {
  const thread = await call("POST", "/threads", { agent: els.agent.value || undefined });
  threads.unshift(thread);
  open(thread.id);
  els.input.focus();
}

// The empty state's hints put their phrase into the composer.
for (const hint of document.querySelectorAll("#empty [data-prompt]")) {
  hint.onclick = () => {
    els.input.value = hint.dataset.prompt;
    grow();
    els.input.focus();
  };
}

function grow() {
  els.input.style.height = "auto";
  els.input.style.height = `${Math.min(els.input.scrollHeight + 2, 200)}px`;
}
els.input.addEventListener("input", grow);

els.newThread.onclick = () => newThread().catch(showError);

function showAttached() {
  const names = [...els.attach.files].map((file) => file.name);
  els.attached.hidden = !names.length;
  els.attached.textContent = names.length ? `📎 ${names.join(", ")}` : "";
}
els.attach.onchange = showAttached;

/** The files chosen in the composer, uploaded to this thread: attachment parts (MF-038). */
function uploadAttached(threadId) {
  return Promise.all([...els.attach.files].map((file) => uploadFile(file, { threadId })));
}

els.form.onsubmit = async (event) => {
  event.preventDefault();
  const text = els.input.value.trim();
  if (!text && !els.attach.files.length) return;
  showError(null);
  try {
    if (!conn) await newThread();
    const target = conn; // the thread on screen when Enter was pressed
    await target.ready;
    const thread = target.state.thread;
    const title = text || els.attach.files[0]?.name || "";
    if (!thread?.title && !titledAgents.has(thread?.agent)) {
      target.rename(title.slice(0, 60)).catch(() => {}); // no generated title coming
    }
    const attachments = await uploadAttached(target.threadId);
    els.input.value = "";
    grow();
    els.attach.value = "";
    showAttached();
    const parts = [...(text ? [{ type: "text", text }] : []), ...attachments];
    await target.send(attachments.length ? { role: "user", parts } : text);
  } catch (error) {
    els.input.value = text;
    showError(error);
  }
};

els.input.onkeydown = (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    els.form.requestSubmit();
  }
};

els.cancel.onclick = () => conn?.cancel(conn.activeRun?.id).catch(showError);

function rename() {
  if (!conn) return;
  const title = prompt("Rename this chat", conn.state.thread?.title ?? "");
  if (title != null) conn.rename(title).catch(showError);
}
els.title.onclick = rename;
els.title.onkeydown = (event) => { if (event.key === "Enter") rename(); };

window.onpopstate = () => {
  const id = new URLSearchParams(location.search).get("thread");
  if (id) open(id, { push: false });
};

async function start() {
  await call("GET", "/session"); // creates the session the websocket identifies us by
  const agents = await call("GET", "/agents");
  titledAgents = new Set(agents.filter((agent) => agent.threadTitles).map((agent) => agent.name));
  toolsByAgent = new Map(agents.map((agent) => [agent.name, new Map(agent.tools.map((t) => [t.name, t]))]));
  els.agent.replaceChildren(...agents.map((agent) => new Option(agent.name, agent.name)));
  await loadThreads();
  const id = new URLSearchParams(location.search).get("thread");
  if (id && !conn) open(id, { push: false }); // a chat started meanwhile is already open
}

start().catch(showError);
