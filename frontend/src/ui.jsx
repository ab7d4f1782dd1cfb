// Small presentational pieces shared by the views (inline styles: no CSS file, no host coupling).

export const styles = {
  page: { padding: "12px 4px", fontSize: 14, lineHeight: 1.45 },
  section: { marginTop: 18 },
  h: { fontSize: 15, fontWeight: 600, margin: "0 0 6px 0" },
  table: { borderCollapse: "collapse", width: "100%", fontSize: 13 },
  th: { textAlign: "left", borderBottom: "1px solid rgba(128,128,128,.5)", padding: "4px 8px", whiteSpace: "nowrap" },
  td: { borderBottom: "1px solid rgba(128,128,128,.2)", padding: "4px 8px", verticalAlign: "top" },
  mono: { fontFamily: "ui-monospace, SFMono-Regular, Menlo, monospace", fontSize: 12 },
  pre: {
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, monospace",
    fontSize: 12,
    background: "rgba(128,128,128,.1)",
    padding: 8,
    borderRadius: 4,
    overflow: "auto",
    maxHeight: 360,
    whiteSpace: "pre-wrap",
    margin: 0,
  },
  error: { color: "#dc2626" },
  muted: { opacity: 0.7 },
  button: {
    border: "1px solid rgba(128,128,128,.5)",
    background: "transparent",
    color: "inherit",
    borderRadius: 4,
    padding: "2px 8px",
    marginRight: 4,
    marginBottom: 4,
    cursor: "pointer",
    fontSize: 12,
  },
};

const phaseColors = {
  Succeeded: "#16a34a",
  Running: "#2563eb",
  Created: "#6b7280",
  Pending: "#6b7280",
  Restarting: "#d97706",
  Failed: "#dc2626",
  Suspended: "#6b7280",
  Deleted: "#6b7280",
};

export function Phase({ phase, testId }) {
  const color = phaseColors[phase] || "#6b7280";
  return (
    <span
      data-testid={testId}
      style={{ color: "white", background: color, borderRadius: 10, padding: "1px 8px", fontSize: 12, fontWeight: 600 }}
    >
      {phase || "—"}
    </span>
  );
}

export function when(value) {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

export function bytes(size) {
  if (typeof size !== "number") return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = size;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
}

// Red only for what went wrong; a tab with nothing (yet) to show says so in the page's own colour.
export function Message({ error, testId, children }) {
  return (
    <div data-testid={testId || (error ? "error" : "message")} style={{ ...styles.page, ...(error ? styles.error : styles.muted) }}>
      {children}
    </div>
  );
}

// A DAG run's state as Airflow names it (success, failed, running, queued).
const outcomeColors = { success: "#16a34a", failed: "#dc2626", running: "#2563eb", queued: "#6b7280" };

export function Outcome({ state }) {
  return (
    <span
      data-state={state || ""}
      style={{ color: "white", background: outcomeColors[state] || "#6b7280", borderRadius: 10, padding: "1px 8px", fontSize: 12, fontWeight: 600 }}
    >
      {state || "—"}
    </span>
  );
}
