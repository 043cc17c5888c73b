// Live data: poll an API path while the page is visible, keep the last good answer.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api } from "./api.js";

export const POLL_MS = 5000;

export function usePoll(path, intervalMs = POLL_MS) {
  const [state, setState] = useState({ data: null, error: null, loading: true, updated: 0 });
  const timer = useRef(null);
  const alive = useRef(true);
  const generation = useRef(0);

  const load = useCallback(async () => {
    if (!path) return;
    const mine = ++generation.current;
    try {
      const data = await api(path);
      if (alive.current && mine === generation.current) {
        setState({ data, error: null, loading: false, updated: Date.now() });
      }
    } catch (error) {
      if (alive.current && mine === generation.current) {
        setState((old) => ({ ...old, error, loading: false }));
      }
    }
  }, [path]);

  useEffect(() => {
    alive.current = true;
    setState({ data: null, error: null, loading: true, updated: 0 });
    let stopped = false;
    const tick = async () => {
      if (!document.hidden) await load();
      if (!stopped && intervalMs > 0) timer.current = setTimeout(tick, intervalMs);
    };
    tick();
    return () => {
      stopped = true;
      alive.current = false;
      clearTimeout(timer.current);
    };
  }, [path, intervalMs, load]);

  return { ...state, reload: load };
}
