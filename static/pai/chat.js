// The demo chat page over the HTTP API. Live token streaming over websockets arrives with
// the realtime layer (static/pai/client.js); until then the page polls the run's status.
const api = "/api/pai";
const els = {
  threads: document.getElementById("threads"),
  messages: document.getElementById("messages"),
  status: document.getElementById("status"),
  form: document.getElementById("composer"),
  input: document.getElementById("input"),
};
let current = null;

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

function renderPart(part) {
  if (part.type === "text") {
    const p = document.createElement("div");
    p.textContent = part.text;
    return p;
  }
  if (part.type.startsWith("tool-") || part.type === "dynamic-tool") {
    const name = part.type === "dynamic-tool" ? part.toolName : part.type.slice(5);
    const div = document.createElement("div");
    div.className = "tool";
    const result = part.state === "output-available" ? JSON.stringify(part.output)
      : part.state === "output-error" ? part.errorText : "";
    div.textContent = `${name}(${JSON.stringify(part.input ?? {})}) ${result ? "→ " + result : ""}`;
    const state = document.createElement("span");
    state.className = "state";
    state.textContent = part.state;
    div.append(state);
    return div;
  }
  return null;
}

function renderMessages(messages) {
  els.messages.replaceChildren(...messages.map((message) => {
    const article = document.createElement("article");
    article.className = `message ${message.role}`;
    article.dataset.messageId = message.id;
    for (const part of message.parts) {
      const node = renderPart(part);
      if (node) article.append(node);
    }
    return article;
  }));
  els.messages.scrollTop = els.messages.scrollHeight;
}

async function loadThreads() {
  const page = await call("GET", "/threads");
  els.threads.replaceChildren(...page.threads.map((thread) => {
    const button = document.createElement("button");
    button.textContent = thread.title || "Untitled thread";
    button.setAttribute("aria-current", String(thread.id === current));
    button.onclick = () => openThread(thread.id);
    return button;
  }));
  return page.threads;
}

async function openThread(id) {
  current = id;
  await loadThreads();
  renderMessages((await call("GET", `/threads/${id}/messages`)).messages);
}

async function waitForRun(runId) {
  for (;;) {
    const run = await call("GET", `/runs/${runId}`);
    els.status.textContent = `run ${run.status}…`;
    renderMessages((await call("GET", `/threads/${current}/messages`)).messages);
    if (!["queued", "running"].includes(run.status)) {
      els.status.textContent = run.status === "completed" ? "" : `run ${run.status}`;
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 400));
  }
}

els.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = els.input.value.trim();
  if (!text) return;
  try {
    if (!current) current = (await call("POST", "/threads", { title: text.slice(0, 60) })).id;
    els.input.value = "";
    const sent = await call("POST", `/threads/${current}/messages`, { text });
    await loadThreads();
    await waitForRun(sent.run.id);
  } catch (error) {
    els.status.textContent = error.message;
  }
});

document.getElementById("new-thread").onclick = async () => {
  current = (await call("POST", "/threads", { title: "New thread" })).id;
  await openThread(current);
};

const threads = await loadThreads();
if (threads.length) await openThread(threads[0].id);
