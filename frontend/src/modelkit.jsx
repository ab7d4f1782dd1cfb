// The "ModelKit" tab of a packaging task: what the registry holds under the pushed reference.
import { useEffect, useState } from "react";
import { apiUrl, getJSON, taskPath, withQuery } from "./api.js";
import { Message, bytes, styles } from "./ui.jsx";

const RETRY_MS = 3000; // while a ModelKit task runs, ask again this often (one database read each)

export function ModelKitView(props) {
  const { base, query } = taskPath(props);
  const [kit, setKit] = useState(null);
  const [absent, setAbsent] = useState(null); // why there is no ModelKit (yet): {detail, waiting, state}
  const [error, setError] = useState(null);
  useEffect(() => {
    let timer = 0;
    let closed = false;
    setKit(null);
    setError(null);
    const load = () =>
      getJSON(withQuery(apiUrl(`${base}/modelkit`), query))
        .then((found) => {
          if (closed) return;
          setAbsent(null);
          setKit(found);
        })
        .catch((e) => {
          if (closed) return;
          if (e.status === 404 && e.body && typeof e.body.waiting === "boolean") {
            setAbsent(e.body);
            if (e.body.waiting) timer = setTimeout(load, RETRY_MS);
          } else {
            setError(e.message);
          }
        });
    load();
    return () => {
      closed = true;
      clearTimeout(timer);
    };
  }, [base, query]);
  if (error) return <Message error>{error}</Message>;
  if (absent && absent.waiting) {
    return (
      <Message testId="waiting">
        Waiting for the ModelKit… The task is {absent.state || "not scheduled yet"}; the ModelKit shows here once it is pushed.
      </Message>
    );
  }
  if (absent) return <Message testId="no-modelkit">No ModelKit here: {absent.detail}.</Message>;
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
