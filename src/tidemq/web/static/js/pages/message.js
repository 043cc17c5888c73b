// One message: ids, where and when, every property, the body (text, pretty JSON, hex), its trace.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { usePoll } from "../hooks.js";
import { enc } from "../api.js";
import { ErrorBox, Header, Loading, Table } from "../components.js";
import { time } from "../format.js";

function Body({ body }) {
  const views = [];
  if (body.encoding === "json") views.push(["pretty", "JSON"]);
  if (body.text !== null) views.push(["text", "Text"]);
  if (body.encoding === "binary") views.push(["hex", "Hex"]);
  const [view, setView] = useState(views[0][0]);
  const shown = view === "pretty" ? body.pretty : view === "text" ? body.text : body.hex;
  return html`
    <div class="toolbar" role="tablist" aria-label="Body view">
      ${views.map(([value, text]) => html`<button role="tab" aria-selected=${view === value} class=${view === value ? "primary" : ""} onClick=${() => setView(value)}>${text}</button>`)}
      <span class="sub">${body.size} bytes${body.hex_cut ? " (hex cut at 64 KiB)" : ""}</span>
    </div>
    <pre class="body" data-testid="message-body">${shown}</pre>
  `;
}

function Trace({ msgId, topic }) {
  const poll = usePoll(`/api/messages/${enc(msgId)}/trace${topic ? `?topic=${enc(topic)}` : ""}`, 0);
  if (poll.error && poll.error.status === 404) {
    return html`<div class="empty panel" data-testid="no-trace">
      No trace for this message. Traces are written by clients with message trace on
      (<span class="mono">enable_trace=True</span>) and by brokers with <span class="mono">trace_topic_enable</span>.
    </div>`;
  }
  if (poll.error) return html`<${ErrorBox} error=${poll.error} />`;
  if (!poll.data) return html`<div class="empty">Loading the trace…</div>`;
  const events = poll.data.events || [];
  if (!events.length) return html`<div class="empty panel" data-testid="no-trace">The trace of this message has no events yet.</div>`;
  return html`<ol class="timeline panel" aria-label="Trace">
    ${events.map((e) => html`<li>
      <strong>${e.type}</strong> ${e.status ? html`<span class=${`tag ${e.status === "SUCCESS" ? "ok" : "warn"}`}>${e.status}</span>` : null}
      <span class="sub"> ${time(e.time)}</span><br />
      ${e.group ? html`group <span class="mono">${e.group}</span> ` : null}
      ${e.client_host ? html`from <span class="mono">${e.client_host}</span> ` : null}
      ${e.cost_ms !== null && e.cost_ms !== undefined ? html`· ${e.cost_ms} ms ` : null}
      ${e.retry_times ? html`· retry ${e.retry_times}` : null}
    </li>`)}
  </ol>`;
}

export function MessagePage({ msgId, query }) {
  const topic = query.get("topic");
  const poll = usePoll(`/api/messages/${enc(msgId)}${topic ? `?topic=${enc(topic)}` : ""}`, 0);
  const m = poll.data;
  const props = m ? Object.entries(m.properties).map(([name, value]) => ({ name, value })) : [];
  return html`
    <${Header} title="Message" sub=${html`<a href="#/messages">Messages</a> / <span class="mono">${msgId}</span>`} />
    <${Loading} poll=${poll}>
      ${m ? html`
        <div class="row">
          <section class="panel" aria-label="Summary">
            <dl class="props">
              <dt>Message id</dt><dd class="mono" data-testid="msg-id">${m.msg_id}</dd>
              <dt>Offset id</dt><dd class="mono">${m.offset_msg_id}</dd>
              <dt>Topic</dt><dd><a href=${`#/topics/${enc(m.topic)}`}>${m.topic}</a></dd>
              <dt>Queue</dt><dd>${m.queue_id} at offset ${m.queue_offset}</dd>
              <dt>Tags</dt><dd>${m.tags || "–"}</dd>
              <dt>Keys</dt><dd>${m.keys.join(" ") || "–"}</dd>
              <dt>Born</dt><dd>${time(m.born_timestamp)} <span class="mono">${m.born_host}</span></dd>
              <dt>Stored</dt><dd>${time(m.store_timestamp)} <span class="mono">${m.store_host}</span></dd>
              <dt>Reconsumed</dt><dd>${m.reconsume_times} times</dd>
            </dl>
          </section>
          <section aria-label="Properties">
            <${Table} label="Properties" columns=${[{ key: "name", label: "Property" }, { key: "value", label: "Value", render: (p) => html`<span class="mono">${p.value}</span>` }]}
              rows=${props} rowKey=${(p) => p.name} empty="No properties." />
          </section>
        </div>
        <h2>Body</h2>
        <${Body} body=${m.body} />
        <h2>Trace</h2>
        <${Trace} msgId=${m.msg_id} topic=${m.topic} />
      ` : null}
    <//>
  `;
}
