// Learning curves as SVG: one chart per metric, one line per series (a run), a point per step.
// Scales, ticks and labels come from d3 (scales.js); drawing stays plain SVG with React.
import { useState } from "react";
import { formatValue, logPossible, progressAxis, stepAxis, valueAxis } from "./scales.js";

const W = 440;
const H = 230;
const M = { left: 56, right: 14, top: 14, bottom: 32 };
// Colour and dash both change from one series to the next: two runs that drew the same curve show
// as one line of two colours, not as one run.
const DASHES = ["", "7 4", "2 3", "9 3 2 3"];
// Tableau 10 (d3-scale-chromatic's schemeTableau10), a categorical palette made for telling lines
// apart; written out because importing it pulled all of d3-scale-chromatic's schemes (+16 kB).
const COLORS = ["#4e79a7", "#f28e2c", "#e15759", "#76b7b2", "#59a14f", "#edc949", "#af7aa1", "#ff9da7", "#9c755f", "#bab0ab"];
// The log-scale choice per metric outlives a re-mount of the tab (Airflow re-mounts it on a state change).
const logChoice = new Map();

export function seriesStyle(index) {
  return { color: COLORS[index % COLORS.length], dash: DASHES[index % DASHES.length] };
}

function xOf(point, series, mode) {
  if (mode !== "progress") return point.step;
  const first = series.first;
  const span = series.last - first;
  return span > 0 ? ((point.step - first) / span) * 100 : 100;
}

export function Chart({ metric, series, xMode = "step", highlight, onHighlight }) {
  const [log, setLog] = useState(() => logChoice.get(metric) ?? false);
  const drawn = series.map((s, i) => {
    const pts = s.points.filter((p) => typeof p[metric] === "number").sort((a, b) => a.step - b.step);
    return { ...s, index: i, pts, first: pts.length ? pts[0].step : 0, last: pts.length ? pts[pts.length - 1].step : 0 };
  });
  const all = drawn.flatMap((s) => s.pts);
  if (!all.length) return null;
  const values = all.map((p) => p[metric]);
  const canLog = logPossible(values);
  const useLog = log && canLog;
  const steps = all.map((p) => p.step);
  const xAxis =
    xMode === "progress"
      ? progressAxis()
      : stepAxis(Math.min(...steps), Math.max(...steps), { integer: steps.every(Number.isInteger) });
  const yAxis = valueAxis(Math.min(...values), Math.max(...values), { log: useLog });
  const x = xAxis.scale.copy().range([M.left, W - M.right]);
  const y = yAxis.scale.copy().range([H - M.bottom, M.top]);
  const toggle = () => {
    logChoice.set(metric, !log);
    setLog(!log);
  };
  return (
    <figure data-testid={`chart-${metric}`} data-scale={useLog ? "log" : "linear"} style={{ display: "inline-block", margin: "0 16px 8px 0" }}>
      <svg width={W} height={H} role="img" aria-label={`${metric} vs ${xMode === "progress" ? "progress" : "step"}`} style={{ overflow: "visible" }}>
        {yAxis.ticks.map((t, i) => (
          <g key={`y${t}`}>
            <line x1={M.left} x2={W - M.right} y1={y(t)} y2={y(t)} stroke="currentColor" strokeOpacity="0.12" />
            <text data-testid="y-tick" x={M.left - 6} y={y(t) + 4} fontSize="10" textAnchor="end" fill="currentColor">
              {yAxis.labels[i]}
            </text>
          </g>
        ))}
        {xAxis.ticks.map((t, i) => (
          <g key={`x${t}`}>
            <line x1={x(t)} x2={x(t)} y1={H - M.bottom} y2={H - M.bottom + 4} stroke="currentColor" strokeOpacity="0.5" />
            <text data-testid="x-tick" x={x(t)} y={H - M.bottom + 15} fontSize="10" textAnchor="middle" fill="currentColor">
              {xAxis.labels[i]}
            </text>
          </g>
        ))}
        <line x1={M.left} x2={W - M.right} y1={H - M.bottom} y2={H - M.bottom} stroke="currentColor" strokeOpacity="0.4" />
        <text x={(W + M.left) / 2} y={H - 2} fontSize="11" textAnchor="middle" fill="currentColor">
          {xMode === "progress" ? "% of the run's steps" : "step"}
        </text>
        {drawn
          .filter((s) => s.pts.length)
          .sort((a, b) => (a.name === highlight) - (b.name === highlight))
          .map((s) => {
            const { color, dash } = seriesStyle(s.index);
            const faded = highlight && highlight !== s.name;
            return (
              <g key={s.name} data-testid={`series-${metric}`} data-series={s.name} data-color={color} opacity={faded ? 0.15 : 1}>
                <polyline
                  fill="none"
                  stroke={color}
                  strokeWidth={highlight === s.name ? 3 : 2}
                  strokeDasharray={dash || undefined}
                  points={s.pts.map((p) => `${x(xOf(p, s, xMode))},${y(p[metric])}`).join(" ")}
                />
                {s.pts.map((p) => (
                  <circle key={p.step} data-testid="point" cx={x(xOf(p, s, xMode))} cy={y(p[metric])} r={s.pts.length > 60 ? 1.5 : 3} fill={color}>
                    <title>{`${s.title || s.label || s.name}\nstep ${p.step}: ${metric} ${formatValue(p[metric])}`}</title>
                  </circle>
                ))}
              </g>
            );
          })}
      </svg>
      <figcaption style={{ fontSize: 12, textAlign: "center" }}>
        <strong>{metric}</strong>
        {canLog && (
          <label style={{ marginLeft: 10, cursor: "pointer" }}>
            <input type="checkbox" data-testid={`log-${metric}`} checked={useLog} onChange={toggle} /> log scale
          </label>
        )}
        {series.length > 1 && (
          <div>
            {drawn.map((s) => {
              const { color, dash } = seriesStyle(s.index);
              return (
                <span
                  key={s.name}
                  data-testid="legend-item"
                  title={s.title || s.name}
                  onMouseEnter={() => onHighlight && onHighlight(s.name)}
                  onMouseLeave={() => onHighlight && onHighlight(null)}
                  style={{ marginLeft: 10, whiteSpace: "nowrap", cursor: "default", display: "inline-flex", alignItems: "center", gap: 4 }}
                >
                  <svg width="22" height="8" aria-hidden="true" style={{ display: "inline-block" }}>
                    <line x1="0" x2="22" y1="4" y2="4" stroke={color} strokeWidth="2.5" strokeDasharray={dash || undefined} />
                  </svg>
                  {s.label || s.name}
                </span>
              );
            })}
          </div>
        )}
      </figcaption>
    </figure>
  );
}

export function Curves({ names, series, xMode }) {
  const [highlight, setHighlight] = useState(null);
  if (!names.length) return null;
  return (
    <div>
      {names.map((name) => (
        <Chart key={name} metric={name} series={series} xMode={xMode} highlight={highlight} onHighlight={setHighlight} />
      ))}
    </div>
  );
}
