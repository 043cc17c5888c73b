// Charts drawn with uPlot: sparklines, time series (lag over time), bars (due-time histogram).
import uPlot from "uplot";
import { useEffect, useRef } from "preact/hooks";
import { html } from "./html.js";

function toColumns(points) {
  return [points.map((p) => p[0] / 1000), points.map((p) => p[1])];
}

function useChart(makeOptions, data, deps, resize = true) {
  const box = useRef(null);
  const chart = useRef(null);
  useEffect(() => {
    const element = box.current;
    if (!element) return undefined;
    const width = Math.max(element.clientWidth || 0, 120);
    chart.current = new uPlot(makeOptions(width), data, element);
    let observer = null;
    if (typeof ResizeObserver !== "undefined") {
      observer = new ResizeObserver(() => {
        const w = Math.max(element.clientWidth || 0, 120);
        if (resize && chart.current && Math.abs(chart.current.width - w) > 2) {
          chart.current.setSize({ width: w, height: chart.current.height });
        }
      });
      observer.observe(element);
    }
    return () => {
      if (observer) observer.disconnect();
      if (chart.current) chart.current.destroy();
      chart.current = null;
    };
  }, deps);
  useEffect(() => {
    if (chart.current) chart.current.setData(data);
  }, [data]);
  return box;
}

/** A tiny line without axes: the last hour of a rate next to its number. */
export function Sparkline({ points, label, width = 120, height = 28 }) {
  const data = toColumns(points || []);
  const options = () => ({
    width,
    height,
    legend: { show: false },
    cursor: { show: false },
    select: { show: false },
    axes: [{ show: false }, { show: false }],
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
    series: [{}, { stroke: "#0f6b78", width: 1.5, fill: "rgba(15,107,120,.12)" }],
  });
  const ready = Boolean(points && points.length >= 2);
  const box = useChart(options, data, [width, height, ready], false);
  if (!ready) {
    return html`<span class="spark muted" aria-label=${`${label}: not enough samples yet`}>·</span>`;
  }
  return html`<span class="spark" ref=${box} role="img" aria-label=${label}></span>`;
}

/** A time series with axes and a legend (one or more series over the same times). */
export function TimeChart({ series, height = 220, label, yLabel }) {
  const times = series.length ? series[0].points.map((p) => p[0] / 1000) : [];
  const data = [times, ...series.map((s) => s.points.map((p) => p[1]))];
  const colors = ["#0f6b78", "#c4572a", "#6b4fbb", "#2f8f4e"];
  const options = (width) => ({
    width,
    height,
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
    axes: [{}, { label: yLabel, size: 60 }],
    series: [
      {},
      ...series.map((s, i) => ({ label: s.label, stroke: colors[i % colors.length], width: 2, fill: i === 0 ? "rgba(15,107,120,.08)" : undefined })),
    ],
  });
  const box = useChart(options, data, [series.length, height]);
  const first = series.length ? series[0].points : [];
  const last = first.length ? first[first.length - 1][1] : "";
  return html`<div class="chart" ref=${box} role="img" aria-label=${label} data-last=${last}></div>`;
}

/** Bars: (bin start ms, count) pairs, e.g. timers by due time. */
export function Bars({ bins, height = 200, label, yLabel }) {
  const data = [bins.map((b) => b[0] / 1000), bins.map((b) => b[1])];
  const options = (width) => ({
    width,
    height,
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
    axes: [{}, { label: yLabel, size: 50 }],
    series: [{}, { label: yLabel, stroke: "#0f6b78", fill: "rgba(15,107,120,.55)", paths: uPlot.paths.bars({ size: [0.8, 60] }), points: { show: false } }],
  });
  const box = useChart(options, data, [height]);
  return html`<div class="chart" ref=${box} role="img" aria-label=${label}></div>`;
}
