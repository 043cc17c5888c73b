// Shared pieces: keyboard-usable tables, cards, empty and error states, the live marker, toasts.
import { createContext } from "preact";
import { useContext, useMemo, useState } from "preact/hooks";
import { html } from "./html.js";

/**
 * A table whose rows can be reached with Tab, moved through with the arrow
 * keys and opened with Enter (when `onOpen` is given); headers sort.
 * columns: [{ key, label, num, render(row), value(row) }]
 */
export function Table({ columns, rows, rowKey, onOpen, empty, label }) {
  const [sort, setSort] = useState(null);
  const sorted = useMemo(() => {
    if (!sort) return rows;
    const column = columns.find((c) => c.key === sort.key);
    const value = column.value || ((row) => row[column.key]);
    const copy = [...rows];
    copy.sort((a, b) => {
      const x = value(a);
      const y = value(b);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sort.direction;
    });
    return copy;
  }, [rows, sort, columns]);

  if (!rows.length) return html`<div class="empty panel">${empty || "Nothing here yet."}</div>`;

  const onKey = (event, row) => {
    const here = event.currentTarget;
    if (event.key === "ArrowDown" && here.nextElementSibling) {
      here.nextElementSibling.focus();
      event.preventDefault();
    } else if (event.key === "ArrowUp" && here.previousElementSibling) {
      here.previousElementSibling.focus();
      event.preventDefault();
    } else if (event.key === "Enter" && onOpen && event.target === here) {
      onOpen(row);
    }
  };
  const toggle = (key) =>
    setSort((old) => (old && old.key === key ? { key, direction: -old.direction } : { key, direction: 1 }));
  const arrow = (key) => (sort && sort.key === key ? (sort.direction > 0 ? " ▲" : " ▼") : "");

  return html`
    <div class="table-wrap">
      <table aria-label=${label}>
        <thead>
          <tr>
            ${columns.map((c) =>
              c.label
                ? html`<th class=${c.num ? "num" : ""} scope="col">
                    <button class="sort" onClick=${() => toggle(c.key)}>${c.label}${arrow(c.key)}</button>
                  </th>`
                : html`<th scope="col"><span class="visually-hidden">actions</span></th>`,
            )}
          </tr>
        </thead>
        <tbody>
          ${sorted.map(
            (row) => html`<tr
              key=${rowKey(row)}
              tabindex="0"
              class=${onOpen ? "row-link" : ""}
              data-key=${rowKey(row)}
              onKeyDown=${(e) => onKey(e, row)}
              onClick=${onOpen ? (e) => (e.target.closest("button, a, input, select") ? null : onOpen(row)) : null}
            >
              ${columns.map(
                (c) => html`<td class=${c.num ? "num" : ""}>${c.render ? c.render(row) : row[c.key]}</td>`,
              )}
            </tr>`,
          )}
        </tbody>
      </table>
    </div>
  `;
}

export function Card({ label, value, children }) {
  return html`<div class="card"><div class="label">${label}</div><div class="value">${value}</div>${children}</div>`;
}

export function ErrorBox({ error }) {
  if (!error) return null;
  if (error.status === 401) {
    return html`<div class="error" role="alert">
      Access control is on: this needs an access key and secret key. Reload the page and sign in
      when the browser asks (user: access key, password: secret key).
    </div>`;
  }
  return html`<div class="error" role="alert">${error.message}</div>`;
}

export function Live({ updated, error }) {
  if (!updated) return html`<span class="live stale">loading…</span>`;
  const at = new Date(updated).toLocaleTimeString();
  return html`<span class=${`live${error ? " stale" : ""}`} title="refreshed every 5 s">
    ${error ? `not refreshed since ${at}` : `live, updated ${at}`}
  </span>`;
}

export function Header({ title, sub, poll }) {
  return html`<header>
    <h1>${title}</h1>
    <p class="sub">${sub}${poll ? html` · <${Live} updated=${poll.updated} error=${poll.error} />` : null}</p>
  </header>`;
}

export const ToastContext = createContext(() => {});

export function useToast() {
  return useContext(ToastContext);
}

export function Toast({ toast }) {
  if (!toast) return null;
  return html`<div class=${`toast${toast.bad ? " bad" : ""}`} role="status" aria-live="polite">${toast.text}</div>`;
}

export function Loading({ poll, children }) {
  if (poll.data) return children;
  if (poll.error) return html`<${ErrorBox} error=${poll.error} />`;
  return html`<div class="empty">Loading…</div>`;
}
