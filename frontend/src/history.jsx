// The DAG's "Training history" tab: the metrics of the last runs' training jobs side by side.
import { useEffect, useState } from "react";
import { apiUrl, getJSON, metricNames } from "./api.js";
import { Curves } from "./chart.jsx";
import { Message, Phase, styles, when } from "./ui.jsx";

function last(points, name) {
  for (let i = points.length - 1; i >= 0; i -= 1) if (typeof points[i][name] === "number") return points[i][name];
  return undefined;
}

export function HistoryView({ dagId }) {
  const [rows, setRows] = useState(null);
  const [error, setError] = useState(null);
  const [limit, setLimit] = useState(10);
  useEffect(() => {
    setError(null);
    getJSON(apiUrl(`dags/${encodeURIComponent(dagId)}/history?limit=${limit}`))
      .then(setRows)
      .catch((e) => setError(e.message));
  }, [dagId, limit]);
  if (error) return <Message error>{error}</Message>;
  if (!rows) return <Message>Loading the training history…</Message>;
  if (!rows.length) return <Message>No run of this DAG has submitted a training job yet.</Message>;
  const withPoints = rows.filter((r) => r.points.length);
  const names = metricNames(withPoints.flatMap((r) => r.points));
  const series = withPoints
    .slice()
    .reverse()
    .map((r) => ({ name: `${r.run_id}/${r.task_id}`, label: r.run_id, points: r.points }));
  return (
    <div style={styles.page} data-testid="training-history">
      <div style={{ fontSize: 12 }}>
        Last{" "}
        <select value={limit} onChange={(e) => setLimit(Number(e.target.value))}>
          {[5, 10, 20, 50].map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>{" "}
        runs
      </div>
      <div style={styles.section}>
        <Curves names={names} series={series} />
      </div>
      <table style={styles.table} data-testid="history-runs">
        <thead>
          <tr>
            {["Run", "Run after", "Task", "Job", "Phase", ...names.map((n) => `final ${n}`)].map((h) => (
              <th key={h} style={styles.th}>
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={`${r.run_id}-${r.task_id}`} data-testid="history-run">
              <td style={{ ...styles.td, ...styles.mono }}>{r.run_id}</td>
              <td style={styles.td}>{when(r.run_after)}</td>
              <td style={styles.td}>{r.task_id}</td>
              <td style={{ ...styles.td, ...styles.mono }}>{r.job}</td>
              <td style={styles.td}>
                <Phase phase={r.phase} />
                {r.error && <div style={{ ...styles.error, fontSize: 12 }}>{r.error}</div>}
              </td>
              {names.map((n) => (
                <td key={n} style={styles.td}>
                  {last(r.points, n)?.toFixed(4) ?? ""}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
