// One consumer group: members, subscriptions, per-queue lag, lag over time, offset reset, dead letters.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { usePoll } from "../hooks.js";
import { api, enc } from "../api.js";
import { Card, ErrorBox, Header, Loading, Table } from "../components.js";
import { TimeChart } from "../charts.js";
import { count, fromLocalInput, localInput, time } from "../format.js";
import { useAction } from "./topic.js";

function ResetOffset({ group, topics, onDone }) {
  const action = useAction();
  const [mode, setMode] = useState("earliest");
  const submit = async (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    const topic = form.get("topic");
    const body = { topic };
    if (mode === "earliest" || mode === "latest") body.to = mode;
    else if (mode === "time") body.timestamp = fromLocalInput(form.get("time"));
    else body.offset = Number(form.get("offset"));
    if (!window.confirm(`Move ${group}'s offsets on ${topic}? Consumers then read from there.`)) return;
    await action.run(
      () => api(`/api/groups/${enc(group)}/reset`, { method: "POST", body }),
      (r) => `Offsets of ${group} on ${topic} reset to ${r.reset_to} (${r.offsets.length} queues)`,
    );
    onDone();
  };
  if (!topics.length) return html`<div class="empty panel">No topic to reset: the group has consumed nothing yet.</div>`;
  return html`
    <section class="panel" aria-label="Reset offsets">
      <${ErrorBox} error=${action.error} />
      <form class="toolbar" onSubmit=${submit}>
        <label class="field">Topic<select name="topic">${topics.map((t) => html`<option>${t}</option>`)}</select></label>
        <label class="field">Move to
          <select name="mode" value=${mode} onChange=${(e) => setMode(e.target.value)}>
            <option value="earliest">the earliest message</option>
            <option value="latest">the end (skip everything stored)</option>
            <option value="time">the first message stored at a time</option>
            <option value="offset">a queue offset</option>
          </select>
        </label>
        ${mode === "time" ? html`<label class="field">Time<input name="time" type="datetime-local" required value=${localInput(Date.now() - 3600000)} /></label>` : null}
        ${mode === "offset" ? html`<label class="field">Offset<input name="offset" type="number" min="0" required value="0" /></label>` : null}
        <button class="primary" type="submit" disabled=${action.busy}>Reset offset</button>
      </form>
    </section>
  `;
}

function DeadLetters({ group, onChange }) {
  const poll = usePoll(`/api/groups/${enc(group)}/dlq`, 10000);
  const action = useAction();
  const resend = async (letter) => {
    const result = await action.run(
      () => api(`/api/groups/${enc(group)}/dlq/${enc(letter.offset_msg_id)}/resend`, { method: "POST" }),
      (r) => `Message ${letter.msg_id} given back to ${group} (stored in ${r.topic})`,
    );
    if (result) {
      poll.reload();
      onChange();
    }
  };
  const letters = poll.data ? poll.data.messages : [];
  const columns = [
    { key: "msg_id", label: "Message id", render: (m) => html`<a class="mono" href=${`#/messages/${enc(m.offset_msg_id)}`}>${m.msg_id}</a>` },
    { key: "origin_topic", label: "From topic" },
    { key: "keys", label: "Keys", value: (m) => m.keys.join(" "), render: (m) => m.keys.join(" ") },
    { key: "store_timestamp", label: "Dead since", render: (m) => time(m.store_timestamp) },
    { key: "preview", label: "Body", render: (m) => html`<span class="mono">${m.preview}</span>` },
    { key: "action", label: "", value: () => null, render: (m) => html`<button onClick=${() => resend(m)} disabled=${action.busy} aria-label=${`Resend ${m.msg_id}`}>Resend</button>` },
  ];
  return html`
    <${ErrorBox} error=${action.error || (poll.data ? poll.error : null)} />
    <${Loading} poll=${poll}>
      <${Table} label="Dead letters" columns=${columns} rows=${letters} rowKey=${(m) => m.offset_msg_id}
        empty="No dead letters: every message this group failed was retried successfully (or none failed)." />
      ${poll.data && poll.data.cut ? html`<p class="sub">Showing the oldest ${letters.length}; more are stored.</p>` : null}
    <//>
  `;
}

export function GroupPage({ group }) {
  const poll = usePoll(`/api/groups/${enc(group)}`);
  const history = usePoll(`/api/groups/${enc(group)}/history`);
  const d = poll.data;
  const lag = history.data ? history.data.lag : [];
  const topics = d ? [...new Set([...d.subscriptions.map((s) => s.topic), ...d.queues.map((q) => q.topic)])].filter((t) => !t.startsWith("%RETRY%")) : [];
  const memberColumns = [
    { key: "client_id", label: "Client id", render: (c) => html`<span class="mono">${c.client_id}</span>` },
    { key: "address", label: "Address", render: (c) => html`<span class="mono">${c.address}</span>` },
    { key: "language", label: "Language" },
    { key: "version", label: "Version", num: true },
  ];
  const subColumns = [
    { key: "topic", label: "Topic" },
    { key: "expression", label: "Filter", render: (s) => html`<span class="mono">${s.expression}</span>` },
    { key: "type", label: "Type" },
  ];
  const queueColumns = [
    { key: "topic", label: "Topic" },
    { key: "broker", label: "Broker" },
    { key: "queue", label: "Queue", num: true },
    { key: "broker_offset", label: "Broker offset", num: true, render: (q) => count(q.broker_offset) },
    { key: "consumer_offset", label: "Consumer offset", num: true, render: (q) => count(q.consumer_offset) },
    { key: "lag", label: "Lag", num: true, render: (q) => html`<span class=${q.lag > 0 ? "tag warn" : ""}>${count(q.lag)}</span>` },
    { key: "last_timestamp", label: "Last consumed", render: (q) => time(q.last_timestamp) },
  ];
  return html`
    <${Header} title=${`Group ${group}`} sub=${html`<a href="#/groups">Consumer groups</a> / ${group}`} poll=${poll} />
    <${ErrorBox} error=${d ? poll.error : null} />
    <${Loading} poll=${poll}>
      ${d ? html`
        <div class="cards">
          <${Card} label="Total lag" value=${html`<span data-testid="total-lag">${count(d.total_lag)}</span>`} />
          <${Card} label="Members online" value=${d.connections.length} />
          <${Card} label="Retry messages" value=${count(d.retry.messages)} />
          <${Card} label="Dead letters" value=${html`<span data-testid="dlq-count">${count(d.dlq.messages)}</span>`} />
          <${Card} label="Model" value=${d.message_model || "–"} />
        </div>
        <h2>Lag over time</h2>
        <div class="panel">
          ${lag.length > 1
            ? html`<${TimeChart} series=${[{ label: "lag (messages)", points: lag }]} label=${`lag of ${group} over time`} yLabel="messages" />`
            : html`<div class="empty">Collecting: the chart appears after two samples (every ${history.data ? history.data.interval_s : 5} s).</div>`}
        </div>
        <h2>Queues</h2>
        <${Table} label="Queue progress" columns=${queueColumns} rows=${d.queues} rowKey=${(q) => `${q.topic}/${q.broker}/${q.queue}`} empty="No consume progress yet: nothing committed." />
        <h2>Reset offsets</h2>
        <${ResetOffset} group=${group} topics=${topics} onDone=${poll.reload} />
        <div class="row">
          <section>
            <h2>Members</h2>
            <${Table} label="Members" columns=${memberColumns} rows=${d.connections} rowKey=${(c) => c.client_id} empty="No consumer of this group is online." />
          </section>
          <section>
            <h2>Subscriptions</h2>
            <${Table} label="Subscriptions" columns=${subColumns} rows=${d.subscriptions} rowKey=${(s) => s.topic} empty="No online consumer, so no subscription to show." />
          </section>
        </div>
        <h2>Dead letters <span class="sub mono">${d.dlq.topic}</span></h2>
        <${DeadLetters} group=${group} onChange=${poll.reload} />
      ` : null}
    <//>
  `;
}
