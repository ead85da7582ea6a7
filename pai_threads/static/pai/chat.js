// The demo chat page: thread list over the HTTP API, the open thread over the websocket
// client (static/pai/client.js). The selected thread lives in the URL (?thread=<id>), so a
// reload reconnects to it and the running generation is rebuilt from the replay.
import { connectThread, uploadFile } from "./client.js";
import { renderPart } from "./render.js";

const api = "/api/pai";
const $ = (id) => document.getElementById(id);
const els = {
  threads: $("threads"), agent: $("agent"), newThread: $("new-thread"), title: $("title"),
  connection: $("connection"), runStatus: $("run-status"), messages: $("messages"), empty: $("empty"),
  queue: $("queue"), form: $("composer"), input: $("input"), send: $("send"), cancel: $("cancel"),
  error: $("error"), attach: $("attach"), attached: $("attached"),
};
let conn = null;
let threads = [];
let titledAgents = new Set(); // agents whose threads get automatic titles (threadTitles)

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

async function loadThreads() {
  threads = (await call("GET", "/threads")).threads;
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
  conn?.close();
  if (push) history.pushState({}, "", `?thread=${encodeURIComponent(threadId)}`);
  conn = connectThread({ threadId, onState: render });
  renderThreads();
}

function renderMessages(state, activeRun) {
  const nodes = [];
  const last = state.messages.findLast((m) => m.role === "assistant");
  for (const message of state.messages) {
    const pai = message.metadata?.pai ?? {};
    const bubble = document.createElement("article");
    bubble.className = `message ${message.role}${pai.status === "open" ? " open" : ""}`;
    bubble.dataset.messageId = message.id;
    const run = state.runs.find((r) => r.id === pai.runId);
    const context = (part) => ({
      pendingAction: conn.getPendingAction(message, part), // MF-024: exactly this pair
      runActive: Boolean(run && ["queued", "running"].includes(run.status)),
      onAction: (action, value) => action.submit(value).catch(showError),
    });
    for (const part of message.parts) {
      const node = renderPart(part, context);
      if (node) bubble.append(node);
    }
    if (pai.status === "open" && !message.parts.some((p) => p.type === "text")) {
      bubble.append(Object.assign(document.createElement("span"), { className: "typing", textContent: "●●●" }));
    }
    if (message === last && !activeRun) {
      const tools = document.createElement("div");
      tools.className = "message-tools";
      const regenerate = document.createElement("button");
      regenerate.type = "button";
      regenerate.className = "link regenerate";
      regenerate.textContent = "↻ Regenerate";
      regenerate.onclick = () => conn.regenerate(message.id).catch(showError);
      tools.append(regenerate);
      bubble.append(tools);
    }
    nodes.push(bubble);
  }
  const nearBottom = els.messages.scrollHeight - els.messages.scrollTop - els.messages.clientHeight < 80;
  els.messages.replaceChildren(...(nodes.length ? nodes : [els.empty]));
  if (nearBottom) els.messages.scrollTop = els.messages.scrollHeight;
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
  }
  els.cancel.hidden = !activeRun;
  renderMessages(state, activeRun);
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
    await conn.ready;
    const thread = conn.state.thread;
    const title = text || els.attach.files[0]?.name || "";
    if (!thread?.title && !titledAgents.has(thread?.agent)) {
      conn.rename(title.slice(0, 60)).catch(() => {}); // no generated title coming
    }
    const attachments = await uploadAttached(conn.threadId);
    els.input.value = "";
    els.attach.value = "";
    showAttached();
    const parts = [...(text ? [{ type: "text", text }] : []), ...attachments];
    await conn.send(attachments.length ? { role: "user", parts } : text);
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
  els.agent.replaceChildren(...agents.map((agent) => new Option(agent.name, agent.name)));
  await loadThreads();
  const id = new URLSearchParams(location.search).get("thread");
  if (id) open(id, { push: false });
}

start().catch(showError);
