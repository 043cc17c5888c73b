// Consumer groups: the list with settings and total lag.
import { useState } from "preact/hooks";
import { html } from "../html.js";
import { usePoll } from "../hooks.js";
import { ErrorBox, Header, Loading, Table } from "../components.js";
import { count } from "../format.js";
import { navigate } from "../router.js";

export function GroupsPage() {
  const poll = usePoll("/api/groups");
  const [system, setSystem] = useState(false);
  const [filter, setFilter] = useState("");
  const groups = poll.data ? poll.data.groups : [];
  const shown = groups.filter((g) => (system || !g.system) && g.group.toLowerCase().includes(filter.toLowerCase()));
  const flag = (on, text) => (on ? html`<span class="tag">${text}</span>` : null);
  const columns = [
    { key: "group", label: "Group", render: (g) => html`<a href=${`#/groups/${encodeURIComponent(g.group)}`}>${g.group}</a>` },
    { key: "mode", label: "Mode", value: (g) => `${g.orderly}${g.broadcast}`, render: (g) => html`${flag(g.orderly, "orderly")}${flag(g.broadcast, "broadcast allowed")}${flag(g.system, "system")}` },
    { key: "consume_enable", label: "Consuming", render: (g) => (g.consume_enable === false ? html`<span class="tag bad">disabled</span>` : "yes") },
    { key: "retry_max_times", label: "Max retries", num: true },
    { key: "brokers", label: "Brokers", value: (g) => g.brokers.join(","), render: (g) => g.brokers.join(", ") },
    { key: "lag", label: "Lag", num: true, render: (g) => html`<span class=${g.lag > 0 ? "tag warn" : ""}>${count(g.lag)}</span>` },
  ];
  return html`
    <${Header} title="Consumer groups" sub="subscription groups of every master broker" poll=${poll} />
    <div class="toolbar">
      <label class="field grow">Filter<input type="search" value=${filter} onInput=${(e) => setFilter(e.target.value)} placeholder="name contains…" /></label>
      <label><input type="checkbox" checked=${system} onChange=${(e) => setSystem(e.target.checked)} /> show system groups</label>
    </div>
    <${ErrorBox} error=${poll.data ? poll.error : null} />
    <${Loading} poll=${poll}>
      <${Table}
        label="Consumer groups"
        columns=${columns}
        rows=${shown}
        rowKey=${(g) => g.group}
        onOpen=${(g) => navigate(`/groups/${encodeURIComponent(g.group)}`)}
        empty="No consumer group yet: a group appears when its first consumer connects (or with tidemq group create)."
      />
    <//>
  `;
}
