// Timers and transactions: parked timer messages by due time (recall one), half messages waiting.
import { html } from "../html.js";
import { usePoll } from "../hooks.js";
import { api } from "../api.js";
import { Card, ErrorBox, Header, Loading, Table } from "../components.js";
import { Bars } from "../charts.js";
import { count, relative, time } from "../format.js";
import { useAction } from "./topic.js";

function Timers() {
  const poll = usePoll("/api/timers?bins=24&limit=100");
  const action = useAction();
  const d = poll.data;
  const recall = async (timer) => {
    if (!window.confirm(`Recall the timer message ${timer.msg_id} of ${timer.topic}? It will not be delivered.`)) return;
    await action.run(
      () => api("/api/timers/recall", { method: "POST", body: { topic: timer.topic, handle: timer.recall_handle } }),
      (r) => `Recalled ${r.msg_id} of ${r.topic}`,
    );
    poll.reload();
  };
  const columns = [
    { key: "deliver_ms", label: "Due", render: (t) => html`${time(t.deliver_ms)} <span class="sub">(${relative(t.deliver_ms, d.now)})</span>` },
    { key: "topic", label: "Topic" },
    { key: "msg_id", label: "Message id", render: (t) => html`<span class="mono">${t.msg_id || "–"}</span>` },
    { key: "parked_ms", label: "Parked", render: (t) => time(t.parked_ms) },
    { key: "body_size", label: "Size", num: true, render: (t) => `${t.body_size} B` },
    { key: "recall", label: "", value: () => null, render: (t) => (t.recall_handle
      ? html`<button class="danger" onClick=${() => recall(t)} disabled=${action.busy} aria-label=${`Recall ${t.msg_id}`}>Recall</button>`
      : html`<span class="sub">no client id</span>`) },
  ];
  return html`
    <${ErrorBox} error=${action.error || (d ? poll.error : null)} />
    <${Loading} poll=${poll}>
      ${d && !d.enabled ? html`<div class="notice">Timer messages are off on this broker (timer_enable=false).</div>` : null}
      ${d ? html`
        <div class="cards">
          <${Card} label="Parked timers" value=${html`<span data-testid="timer-total">${count(d.total)}</span>`} />
          <${Card} label="Next due" value=${d.timers.length ? relative(d.timers[0].deliver_ms, d.now) : "–"} />
          <${Card} label="Being enqueued" value=${count(d.not_enqueued)} />
        </div>
        <div class="panel">
          ${d.histogram.length
            ? html`<${Bars} bins=${d.histogram} label="timer messages by due time" yLabel="timers" />`
            : html`<div class="empty">No timer message is parked: send one with a delivery time (tidemq send --delay 60).</div>`}
        </div>
        <${Table} label="Earliest timers" columns=${columns} rows=${d.timers} rowKey=${(t) => `${t.topic}/${t.msg_id}/${t.deliver_ms}`} empty="Nothing to recall." />
        ${d.total > d.timers.length ? html`<p class="sub">Showing the earliest ${d.timers.length} of ${count(d.total)}.</p>` : null}
      ` : null}
    <//>
  `;
}

function Transactions() {
  const poll = usePoll("/api/transactions");
  const d = poll.data;
  const columns = [
    { key: "transaction_id", label: "Transaction", render: (h) => html`<span class="mono">${h.transaction_id}</span>` },
    { key: "producer_group", label: "Producer group" },
    { key: "topic", label: "Topic" },
    { key: "born_timestamp", label: "Sent", render: (h) => time(h.born_timestamp) },
    { key: "check_times", label: "Checks", num: true },
    { key: "body_size", label: "Size", num: true, render: (h) => `${h.body_size} B` },
  ];
  return html`
    <${ErrorBox} error=${d ? poll.error : null} />
    <${Loading} poll=${poll}>
      ${d && d.enabled ? html`
        <p class="sub">${`A half message waits for its producer's commit or rollback; after ${Math.round(d.timeout_ms / 1000)} s the broker asks the producer, every ${Math.round(d.check_interval_ms / 1000)} s, at most ${d.check_max} times.`}</p>
        <${Table} label="Half messages waiting" columns=${columns} rows=${d.waiting} rowKey=${(h) => h.transaction_id}
          empty="No transaction is waiting for its producer." />` : html`<div class="empty panel">Transactions are off on this broker.</div>`}
    <//>
  `;
}

export function TimersPage() {
  return html`
    <${Header} title="Timers and transactions" sub="what this broker holds back, and until when" />
    <h2>Timer messages</h2>
    <${Timers} />
    <h2>Transactions waiting</h2>
    <${Transactions} />
  `;
}
