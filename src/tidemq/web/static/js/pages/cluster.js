// Cluster: every broker the name servers know, with live rates and disk use.
import { html } from "../html.js";
import { usePoll } from "../hooks.js";
import { Card, ErrorBox, Header, Loading, Table } from "../components.js";
import { Sparkline } from "../charts.js";
import { count, percent, rate, relative } from "../format.js";

export function ClusterPage() {
  const cluster = usePoll("/api/cluster");
  const history = usePoll("/api/cluster/history");
  const series = (history.data && history.data.brokers) || {};
  const data = cluster.data;
  const brokers = data ? data.brokers : [];
  const sum = (key) => brokers.reduce((total, b) => total + (b[key] || 0), 0);

  const columns = [
    { key: "cluster", label: "Cluster" },
    { key: "broker", label: "Broker", render: (b) => html`<strong>${b.broker}</strong>` },
    { key: "role", label: "Role", render: (b) => html`<span class=${`tag${b.role === "MASTER" ? " ok" : ""}`}>${b.role}</span> <span class="muted">#${b.id}</span>` },
    { key: "address", label: "Address", render: (b) => html`<span class="mono">${b.address}</span>` },
    { key: "version", label: "Version", render: (b) => (b.error ? html`<span class="tag bad" title=${b.error}>unreachable</span>` : b.version) },
    {
      key: "put_tps", label: "Put rate", num: true,
      render: (b) => html`${rate(b.put_tps)} <${Sparkline} points=${(series[b.broker] || {}).put} label=${`put rate of ${b.broker}, last hour`} />`,
    },
    {
      key: "get_tps", label: "Get rate", num: true,
      render: (b) => html`${rate(b.get_tps)} <${Sparkline} points=${(series[b.broker] || {}).get} label=${`get rate of ${b.broker}, last hour`} />`,
    },
    {
      key: "disk_ratio", label: "Disk", num: true,
      render: (b) => html`${percent(b.disk_ratio)}${b.disk_full ? html` <span class="tag bad">FULL</span>` : null}`,
    },
    { key: "topics", label: "Topics", num: true, render: (b) => count(b.topics) },
    { key: "boot_timestamp", label: "Up since", render: (b) => relative(b.boot_timestamp) },
  ];

  return html`
    <${Header} title="Cluster" sub=${data ? `name servers ${data.namesrv.join(", ")}` : "brokers and their figures"} poll=${cluster} />
    <${ErrorBox} error=${cluster.data ? cluster.error : null} />
    <${Loading} poll=${cluster}>
      <div class="cards">
        <${Card} label="Brokers" value=${brokers.length} />
        <${Card} label="Clusters" value=${data ? Object.keys(data.clusters).length : "–"} />
        <${Card} label="Put rate" value=${rate(sum("put_tps"))} />
        <${Card} label="Get rate" value=${rate(sum("get_tps"))} />
        <${Card} label="Access control" value=${data && data.access_control ? "on" : "off"} />
      </div>
      <${Table}
        label="Brokers"
        columns=${columns}
        rows=${brokers}
        rowKey=${(b) => `${b.broker}/${b.id}`}
        empty="No broker is registered with the name servers."
      />
      <p class="sub">
        ${`Rates are each broker's last minute (GET_BROKER_RUNTIME_INFO); the sparklines are the last hour as broker ${history.data ? history.data.broker : ""} sampled it (every ${history.data ? history.data.interval_s : 5} s).`}
      </p>
    <//>
  `;
}
