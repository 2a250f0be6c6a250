// The editor's one script: an answer streaming in, and a publish that turns "published" without a
// reload. Everything works without it too (the forms post and the server answers with a page).
"use strict";

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

// ----- publishing: post, then poll status.json until no version is publishing -----

function setStatus(number, status) {
  const cell = document.querySelector('[data-status-of="' + number + '"]');
  if (!cell) return;
  cell.textContent = status;
  cell.className = "status " + status;
  // A button that no longer applies goes: publish is for drafts, rollback for archived versions.
  for (const form of cell.closest("tr").querySelectorAll("form.js-publish")) {
    const verb = form.action.endsWith("/publish") ? "draft" : "archived";
    form.hidden = status !== verb && status !== "publishing";
  }
}

function say(text, kind) {
  const box = document.getElementById("publish-message");
  if (!box) return;
  box.hidden = false;
  box.textContent = text;
  box.className = "flash " + kind;
  box.setAttribute("role", kind === "error" ? "alert" : "status");
}

async function poll(statusUrl) {
  const deadline = Date.now() + 10 * 60 * 1000;
  while (Date.now() < deadline) {
    await new Promise((done) => setTimeout(done, 400));
    const response = await fetch(statusUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) return;
    const body = await response.json();
    let busy = false;
    for (const v of body.versions) {
      setStatus(v.version_number, v.status);
      busy = busy || v.status === "publishing";
    }
    if (!busy) {
      say("Published: search now finds this version.", "ok");
      return;
    }
  }
}

function enhancePublishing() {
  for (const form of document.querySelectorAll("form.js-publish")) {
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button");
      button.disabled = true;
      const response = await fetch(form.action, {
        method: "POST", credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRF-Token": csrfToken() },
      });
      const body = await response.json().catch(() => ({}));
      button.disabled = false;
      if (!response.ok) {
        say((body.error && body.error.message) || "refused", "error");
        return;
      }
      setStatus(body.version_number, body.status);
      say("Version " + body.version_number + ": " + body.status + "…", "ok");
      const statusUrl = form.action.replace(/\/versions\/\d+\/(publish|rollback)$/, "/status.json");
      poll(statusUrl);
    });
  }
}

// ----- asking: Server-Sent Events over fetch, [n] markers as links -----

function renderAnswer(box, text, sources) {
  const links = new Map(sources.map((s) => [s.number, s.link]));
  box.textContent = "";
  let at = 0;
  for (const match of text.matchAll(/\[(\d{1,4})\]/g)) {
    const link = links.get(Number(match[1]));
    if (!link) continue;
    box.append(text.slice(at, match.index));
    const a = document.createElement("a");
    a.href = link;
    a.className = "cite";
    a.textContent = match[0];
    box.append(a);
    at = match.index + match[0].length;
  }
  box.append(text.slice(at));
}

// The server says which URLs may be links (`original`: http or https only); any other is text.
function originalOf(source) {
  if (!source.original) {
    const text = document.createElement("span");
    text.className = "original";
    text.title = "not an http(s) address, so not a link";
    text.textContent = source.url;
    return text;
  }
  const link = document.createElement("a");
  link.href = source.original;
  link.rel = "noopener noreferrer";
  link.className = "original";
  link.textContent = "Open the original";
  return link;
}

function renderSources(list, sources) {
  list.textContent = "";
  for (const s of sources) {
    const item = document.createElement("li");
    item.value = s.number;
    const a = document.createElement("a");
    a.href = s.link;
    a.textContent = s.title;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = " score " + s.score + " ";
    const lanes = document.createElement("span");
    lanes.className = "lanes";
    lanes.textContent = s.lanes.join(", ");
    item.append(a);
    if (s.url) item.append(" · ", originalOf(s));
    item.append(score, lanes);
    if (s.excerpts.length > 1) {
      const excerpts = document.createElement("ul");
      s.excerpts.forEach((e, i) => {
        const li = document.createElement("li");
        const link = document.createElement("a");
        link.href = e.link;
        link.textContent = "excerpt " + (i + 1) + (e.heading ? ": " + e.heading : "");
        li.append(link);
        excerpts.append(li);
      });
      item.append(excerpts);
    }
    list.append(item);
  }
}

async function ask(form) {
  const box = document.getElementById("answer");
  const list = document.getElementById("sources");
  const declined = document.getElementById("declined");
  const button = form.querySelector("button");
  box.textContent = "";
  list.textContent = "";
  declined.hidden = true;
  box.setAttribute("aria-busy", "true");
  button.disabled = true;
  try {
    const response = await fetch("/ask/stream", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRF-Token": csrfToken() },
      body: JSON.stringify({ query: form.query.value, kb: form.kb.value }),
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      box.textContent = (body.error && body.error.message) || "refused";
      box.className = "answer flash error";
      return;
    }
    box.className = "answer";
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = "message";
        const data = [];
        for (const line of raw.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        const payload = JSON.parse(data.join("\n"));
        if (name === "delta") box.append(payload.text);
        else if (name === "done") {
          renderAnswer(box, payload.answer, payload.sources);
          renderSources(list, payload.sources);
          declined.hidden = !payload.abstained;
          const reason = document.getElementById("declined-reason");
          if (reason) reason.textContent = payload.declined_reason || "";
          box.dataset.done = "true";
        } else if (name === "error") {
          box.textContent = payload.error.message;
          box.className = "answer flash error";
        }
      }
    }
  } finally {
    box.removeAttribute("aria-busy");
    button.disabled = false;
  }
}

function enhanceAsking() {
  const form = document.getElementById("ask-form");
  if (!form) return;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ask(form);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  enhancePublishing();
  enhanceAsking();
});
