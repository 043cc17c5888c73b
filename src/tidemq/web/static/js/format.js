// Numbers and times as people read them.
const numbers = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });
const rates = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });

export function count(value) {
  return value === null || value === undefined ? "–" : numbers.format(value);
}

export function rate(value) {
  return value === null || value === undefined ? "–" : `${rates.format(value)}/s`;
}

export function percent(ratio) {
  return ratio === null || ratio === undefined ? "–" : `${Math.round(ratio * 100)}%`;
}

function pad(n, width = 2) {
  return String(n).padStart(width, "0");
}

export function time(ms) {
  if (!ms || ms <= 0) return "–";
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function duration(ms) {
  const seconds = Math.round(Math.abs(ms) / 1000);
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 120) return `${minutes}m`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours}h`;
  return `${Math.round(hours / 24)}d`;
}

export function relative(ms, now = Date.now()) {
  if (!ms || ms <= 0) return "–";
  const delta = ms - now;
  return delta >= 0 ? `in ${duration(delta)}` : `${duration(delta)} ago`;
}

/** A <input type=datetime-local> value for an epoch millisecond time. */
export function localInput(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** Epoch milliseconds of a datetime-local value (local time), or null. */
export function fromLocalInput(value) {
  if (!value) return null;
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? null : ms;
}
