// Learning curves as plain SVG: one chart per metric, one line per series (a run), a point per step.
// Hand-drawn instead of a charting library: the whole view is smaller than the smallest library.
import { palette } from "./ui.jsx";

const W = 420;
const H = 220;
const M = { left: 48, right: 12, top: 14, bottom: 30 };

function ticks(min, max, count = 4, integers = false) {
  if (min === max) return [min];
  if (integers && max - min <= count * 2) {
    return Array.from({ length: Math.floor(max) - Math.ceil(min) + 1 }, (_, i) => Math.ceil(min) + i);
  }
  const step = (max - min) / count;
  return Array.from({ length: count + 1 }, (_, i) => min + i * step);
}

function fmt(value) {
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 0.01 || abs >= 10000)) return value.toExponential(1);
  return Number(value.toFixed(abs < 1 ? 3 : 1)).toString();
}

export function Chart({ metric, series }) {
  const all = series.flatMap((s) => s.points.filter((p) => typeof p[metric] === "number"));
  if (!all.length) return null;
  let [x0, x1] = [Math.min(...all.map((p) => p.step)), Math.max(...all.map((p) => p.step))];
  let [y0, y1] = [Math.min(...all.map((p) => p[metric])), Math.max(...all.map((p) => p[metric]))];
  const integerSteps = all.every((p) => Number.isInteger(p.step));
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  if (y0 === y1) [y0, y1] = [y0 - Math.abs(y0 || 1) * 0.1, y1 + Math.abs(y1 || 1) * 0.1];
  const x = (v) => M.left + ((v - x0) / (x1 - x0)) * (W - M.left - M.right);
  const y = (v) => H - M.bottom - ((v - y0) / (y1 - y0)) * (H - M.top - M.bottom);
  return (
    <figure data-testid={`chart-${metric}`} style={{ display: "inline-block", margin: "0 16px 8px 0" }}>
      <svg width={W} height={H} role="img" aria-label={`${metric} vs step`} style={{ overflow: "visible" }}>
        {ticks(y0, y1).map((t) => (
          <g key={`y${t}`}>
            <line x1={M.left} x2={W - M.right} y1={y(t)} y2={y(t)} stroke="currentColor" strokeOpacity="0.12" />
            <text x={M.left - 6} y={y(t) + 4} fontSize="10" textAnchor="end" fill="currentColor">
              {fmt(t)}
            </text>
          </g>
        ))}
        {ticks(x0, x1, 4, integerSteps).map((t) => (
          <text key={`x${t}`} x={x(t)} y={H - M.bottom + 14} fontSize="10" textAnchor="middle" fill="currentColor">
            {fmt(t)}
          </text>
        ))}
        <text x={(W + M.left) / 2} y={H - 2} fontSize="11" textAnchor="middle" fill="currentColor">
          step
        </text>
        {series.map((s, i) => {
          const pts = s.points.filter((p) => typeof p[metric] === "number").sort((a, b) => a.step - b.step);
          const color = palette[i % palette.length];
          return (
            <g key={s.name} data-testid={`series-${metric}`} data-series={s.name}>
              <polyline
                fill="none"
                stroke={color}
                strokeWidth="2"
                points={pts.map((p) => `${x(p.step)},${y(p[metric])}`).join(" ")}
              />
              {pts.map((p) => (
                <circle key={p.step} data-testid="point" cx={x(p.step)} cy={y(p[metric])} r="3" fill={color}>
                  <title>{`${s.name} step ${p.step}: ${metric} ${p[metric]}`}</title>
                </circle>
              ))}
            </g>
          );
        })}
      </svg>
      <figcaption style={{ fontSize: 12, textAlign: "center" }}>
        <strong>{metric}</strong>
        {series.length > 1 &&
          series.map((s, i) => (
            <span key={s.name} style={{ marginLeft: 10, color: palette[i % palette.length] }}>
              ● {s.label || s.name}
            </span>
          ))}
      </figcaption>
    </figure>
  );
}

export function Curves({ names, series }) {
  if (!names.length) return null;
  return (
    <div>
      {names.map((name) => (
        <Chart key={name} metric={name} series={series} />
      ))}
    </div>
  );
}
