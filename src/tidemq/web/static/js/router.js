// Hash routes (#/topics/Orders?x=1): links work, back works, the server serves one page.
import { useEffect, useState } from "preact/hooks";

export function parse(hash) {
  const raw = (hash || "").replace(/^#/, "") || "/cluster";
  const [path, query = ""] = raw.split("?");
  return { path, parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query) };
}

export function navigate(path) {
  window.location.hash = `#${path}`;
}

export function useRoute() {
  const [route, setRoute] = useState(parse(window.location.hash));
  useEffect(() => {
    const changed = () => setRoute(parse(window.location.hash));
    window.addEventListener("hashchange", changed);
    return () => window.removeEventListener("hashchange", changed);
  }, []);
  return route;
}
