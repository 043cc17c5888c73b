// Topics: the list, filters, and the form that creates one.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { usePoll } from "../hooks.js";
import { api } from "../api.js";
import { ErrorBox, Header, Loading, Table, useToast } from "../components.js";
import { count, rate } from "../format.js";
import { navigate } from "../router.js";

const KINDS = [
  ["NORMAL", "User topics"],
  ["RETRY", "Retry topics"],
  ["DLQ", "Dead-letter topics"],
  ["SYSTEM", "System topics"],
  ["", "All topics"],
];

function CreateTopic({ onDone }) {
  const toast = useToast();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    const body = { name: form.get("name").trim(), queues: Number(form.get("queues")), perm: Number(form.get("perm")) };
    if (form.get("type")) body.type = form.get("type");
    setBusy(true);
    setError(null);
    try {
      const result = await api("/api/topics", { method: "POST", body });
      toast({ text: `Topic ${result.topic} ${result.result} on ${result.brokers.join(", ")}` });
      event.target.reset();
      onDone();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <details class="form panel">
      <summary>Create a topic</summary>
      <${ErrorBox} error=${error} />
      <form class="toolbar" onSubmit=${submit} aria-label="Create a topic">
        <label class="field grow">Name<input name="name" required pattern="[%|a-zA-Z0-9_\\-]+" placeholder="Orders" /></label>
        <label class="field">Queues<input name="queues" type="number" min="1" max="1024" value="4" required /></label>
        <label class="field">Permission
          <select name="perm"><option value="6">read + write</option><option value="4">read only</option><option value="2">write only</option></select>
        </label>
        <label class="field">Message type
          <select name="type"><option value="">any (not declared)</option><option>NORMAL</option><option>FIFO</option><option>DELAY</option><option>TRANSACTION</option></select>
        </label>
        <button class="primary" type="submit" disabled=${busy}>Create</button>
      </form>
    </details>
  `;
}

export function TopicsPage() {
  const poll = usePoll("/api/topics", 10000);
  const [kind, setKind] = useState("NORMAL");
  const [filter, setFilter] = useState("");
  const topics = poll.data ? poll.data.topics : [];
  const shown = topics.filter((t) => (!kind || t.kind === kind) && t.topic.toLowerCase().includes(filter.toLowerCase()));
  const columns = [
    { key: "topic", label: "Topic", render: (t) => html`<a href=${`#/topics/${encodeURIComponent(t.topic)}`}>${t.topic}</a>` },
    { key: "kind", label: "Kind", render: (t) => html`<span class="tag">${t.kind}</span>` },
    { key: "type", label: "Message type" },
    { key: "write_queues", label: "Queues (r/w)", num: true, render: (t) => `${t.read_queues}/${t.write_queues}` },
    { key: "perm", label: "Perm", value: (t) => t.perm.bits, render: (t) => html`<span class="mono">${t.perm.text}</span>` },
    { key: "brokers", label: "Brokers", value: (t) => t.brokers.join(","), render: (t) => t.brokers.join(", ") },
    { key: "messages", label: "Messages", num: true, render: (t) => count(t.messages) },
    { key: "put_rate", label: "Put rate", num: true, render: (t) => rate(t.put_rate) },
  ];
  return html`
    <${Header} title="Topics" sub="every topic of every master broker" poll=${poll} />
    <${CreateTopic} onDone=${poll.reload} />
    <div class="toolbar">
      <label class="field">Show
        <select value=${kind} onChange=${(e) => setKind(e.target.value)}>
          ${KINDS.map(([value, text]) => html`<option value=${value}>${text}</option>`)}
        </select>
      </label>
      <label class="field grow">Filter<input type="search" value=${filter} onInput=${(e) => setFilter(e.target.value)} placeholder="name contains…" /></label>
    </div>
    <${ErrorBox} error=${poll.data ? poll.error : null} />
    <${Loading} poll=${poll}>
      <${Table}
        label="Topics"
        columns=${columns}
        rows=${shown}
        rowKey=${(t) => t.topic}
        onOpen=${(t) => navigate(`/topics/${encodeURIComponent(t.topic)}`)}
        empty=${topics.length ? "No topic matches the filter." : "No topics yet: create one above, or send to a new topic (brokers create it on first send)."}
      />
    <//>
  `;
}
