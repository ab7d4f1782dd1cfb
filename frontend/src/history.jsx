// The DAG's "Training history" tab: the metrics of the last runs' training jobs side by side.
import { useEffect, useState } from "react";
import { apiUrl, getJSON, metricNames } from "./api.js";
import { Curves, seriesStyle } from "./chart.jsx";
import { runLabels } from "./runs.js";
import { formatValue } from "./scales.js";
import { Message, Outcome, styles, when } from "./ui.jsx";

function last(points, name) {
  for (let i = points.length - 1; i >= 0; i -= 1) if (typeof points[i][name] === "number") return points[i][name];
  return undefined;
}

const X_MODES = [
  ["step", "step"],
  ["progress", "% of run"],
];

export function HistoryView({ dagId }) {
  const [rows, setRows] = useState(null);
  const [error, setError] = useState(null);
  const [limit, setLimit] = useState(10);
  // By step by default: the same x is the same amount of training in every run. "% of run" lines
  // up the shapes of runs of different lengths.
  const [xMode, setXMode] = useState("step");
  useEffect(() => {
    setError(null);
    getJSON(apiUrl(`dags/${encodeURIComponent(dagId)}/history?limit=${limit}`))
      .then(setRows)
      .catch((e) => setError(e.message));
  }, [dagId, limit]);
  if (error) return <Message error>{error}</Message>;
  if (!rows) return <Message>Loading the training history…</Message>;
  if (!rows.length) return <Message>No run of this DAG has submitted a training job yet.</Message>;
  // Oldest first: the first run gets the first colour, and keeps it as newer runs come.
  const chronological = rows.slice().reverse();
  const labels = runLabels(chronological);
  const keyed = chronological.map((r, i) => ({ ...r, key: `${r.run_id}/${r.task_id}`, label: labels[i] }));
  const withPoints = keyed.filter((r) => r.points.length);
  const names = metricNames(withPoints.flatMap((r) => r.points));
  const series = withPoints.map((r) => ({
    name: r.key,
    label: chronological.filter((o) => o.run_id === r.run_id).length > 1 ? `${r.label} ${r.task_id}` : r.label,
    title: `${r.run_id} · ${r.task_id}`,
    points: r.points,
  }));
  const styleOf = new Map(withPoints.map((r, i) => [r.key, seriesStyle(i)]));
  return (
    <div style={styles.page} data-testid="training-history">
      <div style={{ fontSize: 12, display: "flex", gap: 16, alignItems: "center" }}>
        <span>
          Last{" "}
          <select value={limit} onChange={(e) => setLimit(Number(e.target.value))}>
            {[5, 10, 20, 50].map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>{" "}
          runs
        </span>
        <span data-testid="x-mode">
          x:{" "}
          {X_MODES.map(([value, text]) => (
            <label key={value} style={{ marginRight: 8, cursor: "pointer" }}>
              <input type="radio" name="x-mode" value={value} checked={xMode === value} onChange={() => setXMode(value)} /> {text}
            </label>
          ))}
        </span>
      </div>
      <div style={styles.section}>
        <Curves names={names} series={series} xMode={xMode} />
      </div>
      <table style={styles.table} data-testid="history-runs">
        <thead>
          <tr>
            {["Run", "Run after", "Task", "Training job", "Run outcome", ...names.map((n) => `final ${n}`)].map((h) => (
              <th key={h} style={styles.th}>
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {keyed
            .slice()
            .reverse()
            .map((r) => {
              const style = styleOf.get(r.key);
              return (
                <tr key={r.key} data-testid="history-run" data-run={r.run_id}>
                  <td style={{ ...styles.td, whiteSpace: "nowrap" }} title={r.run_id} data-testid="run-label">
                    {style && (
                      <svg width="18" height="8" aria-hidden="true" style={{ display: "inline-block", verticalAlign: "middle", marginRight: 6 }}>
                        <line x1="0" x2="18" y1="4" y2="4" stroke={style.color} strokeWidth="2.5" strokeDasharray={style.dash || undefined} />
                      </svg>
                    )}
                    {r.label}
                  </td>
                  <td style={styles.td}>{when(r.run_after)}</td>
                  <td style={styles.td}>{r.task_id}</td>
                  <td style={styles.td}>
                    <span style={styles.mono}>{r.job}</span>{" "}
                    <span style={styles.muted} data-testid="job-phase-cell">
                      {r.phase && `(${r.kind} ${r.phase})`}
                    </span>
                    {r.error && <div style={{ ...styles.error, fontSize: 12 }}>{r.error}</div>}
                  </td>
                  <td style={styles.td} data-testid="run-outcome">
                    <Outcome state={r.run_state} />
                  </td>
                  {names.map((n) => (
                    <td key={n} style={styles.td} data-testid={`final-${n}`}>
                      {formatValue(last(r.points, n))}
                    </td>
                  ))}
                </tr>
              );
            })}
        </tbody>
      </table>
    </div>
  );
}
