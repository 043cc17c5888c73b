// The dashboard: navigation, routes, toasts. Pages live in pages/, one per area.
import { render } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { useRoute } from "./router.js";
import { Toast, ToastContext } from "./components.js";
import { ClusterPage } from "./pages/cluster.js";
import { TopicsPage } from "./pages/topics.js";
import { TopicPage } from "./pages/topic.js";
import { GroupsPage } from "./pages/groups.js";
import { GroupPage } from "./pages/group.js";
import { MessagesPage } from "./pages/messages.js";
import { MessagePage } from "./pages/message.js";
import { TimersPage } from "./pages/timers.js";

const SECTIONS = [
  ["cluster", "Cluster"],
  ["topics", "Topics"],
  ["groups", "Consumer groups"],
  ["messages", "Messages"],
  ["timers", "Timers & transactions"],
];

function page(route) {
  const [section, name] = route.parts;
  switch (section) {
    case "topics":
      return name ? html`<${TopicPage} key=${name} topic=${name} />` : html`<${TopicsPage} />`;
    case "groups":
      return name ? html`<${GroupPage} key=${name} group=${name} />` : html`<${GroupsPage} />`;
    case "messages":
      return name
        ? html`<${MessagePage} key=${name + route.query} msgId=${name} query=${route.query} />`
        : html`<${MessagesPage} key=${String(route.query)} query=${route.query} />`;
    case "timers":
      return html`<${TimersPage} />`;
    case "cluster":
      return html`<${ClusterPage} />`;
    default:
      return html`<div class="empty">No page at #${route.path}. <a href="#/cluster">Go to the cluster</a>.</div>`;
  }
}

function App() {
  const route = useRoute();
  const [toast, setToast] = useState(null);
  const timer = useRef(null);
  const notify = useCallback((next) => {
    setToast(next);
    clearTimeout(timer.current);
    timer.current = setTimeout(() => setToast(null), 6000);
  }, []);
  const section = route.parts[0] || "cluster";
  useEffect(() => {
    const title = SECTIONS.find(([key]) => key === section);
    document.title = `${title ? title[1] : "tidemq"} · tidemq dashboard`;
  }, [section]);
  return html`
    <${ToastContext.Provider} value=${notify}>
      <div class="layout">
        <nav class="side" aria-label="Sections">
          <div class="brand">tidemq<small>dashboard</small></div>
          ${SECTIONS.map(
            ([key, text]) => html`<a href=${`#/${key}`} aria-current=${section === key ? "page" : null}>${text}</a>`,
          )}
        </nav>
        <main id="main">${page(route)}</main>
      </div>
      <${Toast} toast=${toast} />
    <//>
  `;
}

const root = document.getElementById("app");
root.textContent = "";
render(html`<${App} />`, root);
