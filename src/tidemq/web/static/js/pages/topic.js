// One topic: route, per-queue offsets, put rate over time; send a test message, change, delete.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { usePoll } from "../hooks.js";
import { api, enc } from "../api.js";
import { Card, ErrorBox, Header, Loading, Table, useToast } from "../components.js";
import { TimeChart } from "../charts.js";
import { count, time } from "../format.js";
import { navigate } from "../router.js";

function useAction() {
  const toast = useToast();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const run = async (work, message) => {
    setBusy(true);
    setError(null);
    try {
      const result = await work();
      if (message) toast({ text: message(result) });
      return result;
    } catch (err) {
      setError(err);
      return null;
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}

function SendMessage({ topic, onSent }) {
  const action = useAction();
  const [sent, setSent] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    const body = { body: form.get("body") };
    for (const name of ["tags", "keys"]) if (form.get(name).trim()) body[name] = form.get(name).trim();
    const result = await action.run(
      () => api(`/api/topics/${enc(topic)}/messages`, { method: "POST", body }),
      (r) => `Sent to ${r.broker} queue ${r.queue} at offset ${r.queue_offset}`,
    );
    if (result) {
      setSent(result);
      onSent();
    }
  };
  return html`
    <section class="panel" aria-label="Send a test message">
      <h2>Send a test message</h2>
      <${ErrorBox} error=${action.error} />
      <form onSubmit=${submit}>
        <label class="field">Body<textarea name="body" required placeholder='{"hello": "tidemq"}'></textarea></label>
        <div class="toolbar">
          <label class="field grow">Tags<input name="tags" placeholder="TagA" /></label>
          <label class="field grow">Keys (space-separated)<input name="keys" placeholder="order-1" /></label>
          <button class="primary" type="submit" disabled=${action.busy}>Send</button>
        </div>
      </form>
      ${sent ? html`<p>Sent: <a class="mono" href=${`#/messages/${enc(sent.offset_msg_id)}`}>${sent.msg_id}</a> (${sent.status})</p>` : null}
    </section>
  `;
}

function ChangeTopic({ topic, detail, onDone }) {
  const action = useAction();
  const queues = detail.route.queues[0] || { write_queues: 4, perm: { bits: 6 } };
  const update = async (event) => {
    event.preventDefault();
    const form = new FormData(event.target);
    await action.run(
      () => api(`/api/topics/${enc(topic)}`, { method: "PUT", body: { queues: Number(form.get("queues")), perm: Number(form.get("perm")) } }),
      () => `Topic ${topic} updated`,
    );
    onDone();
  };
  const remove = async () => {
    if (!window.confirm(`Delete topic ${topic} from every broker and name server? Its messages become unreachable.`)) return;
    const result = await action.run(() => api(`/api/topics/${enc(topic)}`, { method: "DELETE" }), (r) => `Topic ${topic} deleted from ${r.deleted_from.join(", ")}`);
    if (result) navigate("/topics");
  };
  return html`
    <section class="panel" aria-label="Change the topic">
      <h2>Change</h2>
      <${ErrorBox} error=${action.error} />
      <form class="toolbar" onSubmit=${update}>
        <label class="field">Queues<input name="queues" type="number" min="1" max="1024" value=${queues.write_queues} required /></label>
        <label class="field">Permission
          <select name="perm" value=${String(queues.perm.bits)}>
            <option value="6">read + write</option><option value="4">read only</option><option value="2">write only</option>
          </select>
        </label>
        <button type="submit" disabled=${action.busy}>Update</button>
        <span class="grow"></span>
        <button type="button" class="danger" onClick=${remove} disabled=${action.busy}>Delete topic</button>
      </form>
    </section>
  `;
}

export function TopicPage({ topic }) {
  const poll = usePoll(`/api/topics/${enc(topic)}`);
  const d = poll.data;
  const queueColumns = [
    { key: "broker", label: "Broker" },
    { key: "queue", label: "Queue", num: true },
    { key: "min_offset", label: "Min offset", num: true, render: (q) => count(q.min_offset) },
    { key: "max_offset", label: "Max offset", num: true, render: (q) => count(q.max_offset) },
    { key: "messages", label: "Messages", num: true, value: (q) => q.max_offset - q.min_offset, render: (q) => count(q.max_offset - q.min_offset) },
    { key: "last_update_timestamp", label: "Last stored", render: (q) => time(q.last_update_timestamp) },
  ];
  const routeColumns = [
    { key: "broker", label: "Broker" },
    { key: "read_queues", label: "Read queues", num: true },
    { key: "write_queues", label: "Write queues", num: true },
    { key: "perm", label: "Perm", value: (q) => q.perm.bits, render: (q) => html`<span class="mono">${q.perm.text}</span>` },
    { key: "address", label: "Master", value: () => null, render: (q) => {
      const broker = d.route.brokers.find((b) => b.broker === q.broker);
      return html`<span class="mono">${broker ? broker.addresses["0"] || "–" : "–"}</span>`;
    } },
  ];
  return html`
    <${Header} title=${`Topic ${topic}`} sub=${html`<a href="#/topics">Topics</a> / ${topic}`} poll=${poll} />
    <${ErrorBox} error=${d ? poll.error : null} />
    <${Loading} poll=${poll}>
      ${d ? html`
        <div class="cards">
          <${Card} label="Messages" value=${count(d.messages)} />
          <${Card} label="Queues" value=${d.queues.length} />
          <${Card} label="Message type" value=${d.type} />
          <${Card} label="Kind" value=${d.kind} />
        </div>
        <div class="row">
          <${SendMessage} topic=${topic} onSent=${poll.reload} />
          <${ChangeTopic} topic=${topic} detail=${d} onDone=${poll.reload} />
        </div>
        <h2>Put rate, last hour</h2>
        <div class="panel">
          ${d.put_rate_history.length > 1
            ? html`<${TimeChart} series=${[{ label: "messages/s", points: d.put_rate_history }]} label=${`put rate of ${topic}`} yLabel="msg/s" />`
            : html`<div class="empty">No samples yet: the rate appears after a few seconds of traffic.</div>`}
        </div>
        <h2>Route</h2>
        <${Table} label="Route" columns=${routeColumns} rows=${d.route.queues} rowKey=${(q) => q.broker} empty="No broker serves this topic." />
        <h2>Queues</h2>
        <${Table} label="Queue offsets" columns=${queueColumns} rows=${d.queues} rowKey=${(q) => `${q.broker}/${q.queue}`} empty="No queues." />
        <p><a href=${`#/messages?topic=${enc(topic)}&since=3600000`}>Browse this topic's messages of the last hour →</a></p>
      ` : null}
    <//>
  `;
}

export { useAction };
