// Messages: find by topic + key, by id, or by the time they were stored.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { usePoll } from "../hooks.js";
import { enc } from "../api.js";
import { ErrorBox, Header, Table } from "../components.js";
import { fromLocalInput, localInput, time } from "../format.js";
import { navigate } from "../router.js";

function searchPath(query) {
  const topic = query.get("topic");
  if (query.get("id")) {
    return null;
  }
  if (!topic) return null;
  if (query.get("key")) return `/api/messages?topic=${enc(topic)}&key=${enc(query.get("key"))}`;
  const since = query.get("since");
  const begin = query.get("begin") || (since ? String(Date.now() - Number(since)) : null);
  const end = query.get("end");
  if (!begin && !end) return null;
  return `/api/messages?topic=${enc(topic)}${begin ? `&begin=${enc(begin)}` : ""}${end ? `&end=${enc(end)}` : ""}`;
}

function Results({ path }) {
  const poll = usePoll(path, 0);
  if (poll.error) return html`<${ErrorBox} error=${poll.error} />`;
  if (!poll.data) return html`<div class="empty">Searching…</div>`;
  const messages = poll.data.messages;
  const columns = [
    { key: "msg_id", label: "Message id", render: (m) => html`<a class="mono" href=${`#/messages/${enc(m.offset_msg_id)}`}>${m.msg_id}</a>` },
    { key: "queue_id", label: "Queue", num: true, render: (m) => `${m.queue_id}@${m.queue_offset}` },
    { key: "tags", label: "Tags" },
    { key: "keys", label: "Keys", value: (m) => m.keys.join(" "), render: (m) => m.keys.join(" ") },
    { key: "store_timestamp", label: "Stored", render: (m) => time(m.store_timestamp) },
    { key: "preview", label: "Body", render: (m) => html`<span class="mono">${m.preview}</span>` },
  ];
  return html`
    <p class="sub">${messages.length} message${messages.length === 1 ? "" : "s"} in ${poll.data.topic}${poll.data.cut ? " (more matched: showing the first)" : ""}</p>
    <${Table} label="Messages found" columns=${columns} rows=${messages} rowKey=${(m) => m.offset_msg_id}
      onOpen=${(m) => navigate(`/messages/${enc(m.offset_msg_id)}`)}
      empty="No message matches. Keys are indexed as sent (KEYS, space-separated); a time range looks at store times." />
  `;
}

export function MessagesPage({ query }) {
  const initialMode = query.get("id") ? "id" : query.get("key") ? "key" : query.get("begin") || query.get("since") ? "time" : "key";
  const [mode, setMode] = useState(initialMode);
  const path = searchPath(query);
  const submit = (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    const params = new URLSearchParams();
    const topic = (form.get("topic") || "").trim();
    if (topic) params.set("topic", topic);
    if (mode === "id") {
      const id = form.get("id").trim();
      navigate(`/messages/${enc(id)}${topic ? `?topic=${enc(topic)}` : ""}`);
      return;
    }
    if (mode === "key") params.set("key", form.get("key").trim());
    if (mode === "time") {
      const begin = fromLocalInput(form.get("begin"));
      const end = fromLocalInput(form.get("end"));
      if (begin !== null) params.set("begin", String(begin));
      if (end !== null) params.set("end", String(end));
    }
    navigate(`/messages?${params}`);
  };
  const now = Date.now();
  return html`
    <${Header} title="Messages" sub="find a message by key, by id, or by when it was stored" />
    <form class="panel" onSubmit=${submit} aria-label="Search messages">
      <div class="toolbar" role="radiogroup" aria-label="Search by">
        ${[["key", "Topic + key"], ["id", "Message id"], ["time", "Time range"]].map(
          ([value, text]) => html`<label><input type="radio" name="mode" value=${value} checked=${mode === value} onChange=${() => setMode(value)} /> ${text}</label>`,
        )}
      </div>
      <div class="toolbar">
        <label class="field grow">Topic${mode === "id" ? " (for a client id)" : ""}
          <input name="topic" required=${mode !== "id"} value=${query.get("topic") || ""} placeholder="Orders" /></label>
        ${mode === "key" ? html`<label class="field grow">Key<input name="key" required value=${query.get("key") || ""} placeholder="order-1" /></label>` : null}
        ${mode === "id" ? html`<label class="field grow">Message id (offset id, or client id with its topic)<input name="id" required class="mono" /></label>` : null}
        ${mode === "time" ? html`
          <label class="field">From<input name="begin" type="datetime-local" value=${localInput(query.get("begin") ? Number(query.get("begin")) : now - 3600000)} /></label>
          <label class="field">To<input name="end" type="datetime-local" value=${localInput(query.get("end") ? Number(query.get("end")) : now + 60000)} /></label>` : null}
        <button class="primary" type="submit">Search</button>
      </div>
    </form>
    ${path ? html`<${Results} key=${path} path=${path} />` : html`<div class="empty panel">Give a topic and a key, a message id, or a time range.</div>`}
  `;
}
