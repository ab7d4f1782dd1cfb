// The "ModelKit" tab of a packaging task: what the registry holds under the pushed reference.
import { useEffect, useState } from "react";
import { apiUrl, getJSON, taskPath, withQuery } from "./api.js";
import { Message, bytes, styles } from "./ui.jsx";

export function ModelKitView(props) {
  const { base, query } = taskPath(props);
  const [kit, setKit] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    setKit(null);
    setError(null);
    getJSON(withQuery(apiUrl(`${base}/modelkit`), query))
      .then(setKit)
      .catch((e) => setError(e.status === 404 ? `No ModelKit: ${e.message}` : e.message));
  }, [base, query]);
  if (error) return <Message error>{error}</Message>;
  if (!kit) return <Message>Loading the ModelKit…</Message>;
  return (
    <div style={styles.page} data-testid="modelkit">
      <div>
        <strong style={{ fontSize: 16 }} data-testid="modelkit-reference">
          {kit.reference}
        </strong>
      </div>
      <div style={{ fontSize: 12, marginTop: 4 }}>
        digest <span style={styles.mono} data-testid="modelkit-digest">{kit.digest}</span>
        {kit.pushed_digest && kit.pushed_digest !== kit.digest && (
          <span style={styles.error}> (the task pushed {kit.pushed_digest})</span>
        )}
        {typeof kit.size === "number" && ` · ${bytes(kit.size)}`}
        {kit.artifact_type && <span style={styles.muted}> · {kit.artifact_type}</span>}
      </div>
      <div style={styles.section}>
        <h3 style={styles.h}>Layers</h3>
        <table style={styles.table} data-testid="modelkit-layers">
          <thead>
            <tr>
              {["Kind", "Path", "Media type", "Size", "Digest"].map((h) => (
                <th key={h} style={styles.th}>
                  {h}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {kit.layers.map((l) => (
              <tr key={l.digest} data-testid="layer">
                <td style={styles.td}>{l.kind}</td>
                <td style={{ ...styles.td, ...styles.mono }}>{l.path}</td>
                <td style={{ ...styles.td, ...styles.mono }}>{l.media_type}</td>
                <td style={styles.td}>{bytes(l.size)}</td>
                <td style={{ ...styles.td, ...styles.mono }} data-testid="layer-digest">
                  {l.digest}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div style={styles.section}>
        <h3 style={styles.h}>Kitfile</h3>
        {kit.kitfile_error ? <div style={styles.error}>{kit.kitfile_error}</div> : <pre style={styles.pre} data-testid="kitfile">{kit.kitfile}</pre>}
      </div>
      {kit.metrics !== null && kit.metrics !== undefined && (
        <div style={styles.section}>
          <h3 style={styles.h}>Metrics file</h3>
          <pre style={styles.pre} data-testid="modelkit-metrics">
            {JSON.stringify(kit.metrics, null, 2)}
          </pre>
        </div>
      )}
    </div>
  );
}
