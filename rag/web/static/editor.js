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

// The blocks of an answer, as rag/web/answers.py reads them: paragraphs apart by a blank line,
// `- item` lists, and fenced code blocks (a fence left open, while it streams, runs to the end).
const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const BULLET = /^ {0,3}[-*+][ \t]+/;
const INFO = /^[A-Za-z0-9_+#.-]{1,40}$/;

function opening(line) {
  const fence = FENCE.exec(line);
  if (!fence || (fence[2][0] === "`" && fence[3].includes("`"))) return null;
  return fence;
}

function closes(line, marker) {
  const stripped = line.trim();
  return line.length - line.replace(/^ +/, "").length <= 3 && stripped.length >= marker.length
    && stripped === marker[0].repeat(stripped.length);
}

function answerBlocks(text) {
  const found = [];
  let current = null;
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    i += 1;
    const fence = opening(line);
    const bullet = BULLET.exec(line);
    if (fence) {
      const indent = fence[1].length;
      const marker = fence[2];
      const word = fence[3].trim().split(" ")[0];
      const code = { kind: "code", lines: [], info: INFO.test(word) ? word : "" };
      while (i < lines.length && !closes(lines[i], marker)) {
        const body = lines[i];
        code.lines.push(body.slice(Math.min(indent, body.length - body.replace(/^ +/, "").length)));
        i += 1;
      }
      i += 1; // the closing fence
      found.push(code);
      current = null;
    } else if (!line.trim()) {
      current = null;
    } else if (bullet) {
      if (!current || current.kind !== "ul") {
        current = { kind: "ul", items: [] };
        found.push(current);
      }
      current.items.push([line.slice(bullet[0].length)]);
    } else if (current && current.kind === "ul") {
      current.items[current.items.length - 1].push(line.trim()); // a list item's next line
    } else {
      if (!current) {
        current = { kind: "p", lines: [] };
        found.push(current);
      }
      current.lines.push(line);
    }
  }
  return found;
}

// Text into `parent`: each [n] of a known source a link (class "cite"), the rest text nodes.
function appendCited(parent, text, links) {
  let at = 0;
  for (const match of text.matchAll(/\[(\d{1,4})\]/g)) {
    const link = links.get(Number(match[1]));
    if (!link) continue;
    parent.append(text.slice(at, match.index));
    const a = document.createElement("a");
    a.href = link;
    a.className = "cite";
    a.textContent = match[0];
    parent.append(a);
    at = match.index + match[0].length;
  }
  parent.append(text.slice(at));
}

// A closing run of exactly `size` backticks at or after `from`, or -1.
function closingTicks(text, from, size) {
  for (let at = text.indexOf("`", from); at >= 0; at = text.indexOf("`", at)) {
    let end = at;
    while (end < text.length && text[end] === "`") end += 1;
    if (end - at === size) return at;
    at = end;
  }
  return -1;
}

// `code` spans as <code> (a marker inside one stays text), the rest through appendCited.
function appendInline(parent, text, links) {
  let at = 0;
  while (at < text.length) {
    const tick = text.indexOf("`", at);
    if (tick < 0) {
      appendCited(parent, text.slice(at), links);
      break;
    }
    let run = tick;
    while (run < text.length && text[run] === "`") run += 1;
    const close = closingTicks(text, run, run - tick);
    if (close < 0) { // no closing run of the same length: the backticks are text
      appendCited(parent, text.slice(at, run), links);
      at = run;
      continue;
    }
    let code = text.slice(run, close);
    if (code.length > 2 && code[0] === " " && code[code.length - 1] === " " && code.trim()) code = code.slice(1, -1);
    appendCited(parent, text.slice(at, tick), links);
    const element = document.createElement("code");
    element.textContent = code;
    parent.append(element);
    at = close + (run - tick);
  }
}

// The answer's text is untrusted (it quotes documents): nodes and textContent only, never innerHTML.
function renderAnswer(box, text, sources) {
  const links = new Map(sources.map((s) => [s.number, s.link]));
  box.textContent = "";
  for (const block of answerBlocks(text)) {
    if (block.kind === "code") {
      const pre = document.createElement("pre");
      const code = document.createElement("code");
      if (block.info) code.className = "language-" + block.info;
      code.textContent = block.lines.join("\n");
      pre.append(code);
      box.append(pre);
    } else if (block.kind === "ul") {
      const list = document.createElement("ul");
      for (const item of block.items) {
        const li = document.createElement("li");
        appendInline(li, item.join("\n"), links);
        list.append(li);
      }
      box.append(list);
    } else {
      const p = document.createElement("p");
      appendInline(p, block.lines.join("\n"), links);
      box.append(p);
    }
  }
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
    let text = "";
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
        if (name === "delta") {
          text += payload.text;
          renderAnswer(box, text, []); // drawn as it comes: code as code; the links come with "done"
        }
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
