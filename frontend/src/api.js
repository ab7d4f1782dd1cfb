// Talking to the cockpit's backend (mounted by Airflow's API server at /training). Relative to the
// UI's <base href>, so Airflow behind a proxy path works; the session cookie authenticates.
export function apiUrl(path) {
  return new URL(`training/api/${path}`, document.baseURI).href;
}

export function taskPath({ dagId, runId, taskId, mapIndex }) {
  const base = `dags/${encodeURIComponent(dagId)}/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(taskId)}`;
  return { base, query: mapIndex !== undefined && mapIndex !== null && `${mapIndex}` !== "-1" ? `map_index=${mapIndex}` : "" };
}

export function withQuery(url, ...parts) {
  const query = parts.filter(Boolean).join("&");
  return query ? `${url}${url.includes("?") ? "&" : "?"}${query}` : url;
}

export async function getJSON(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const detail = body && body.detail ? (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)) : response.statusText;
    const error = new Error(detail);
    error.status = response.status;
    error.body = body;
    throw error;
  }
  return body;
}

// Same rule as the backend's ui/metrics.py: "METRIC {json}" with a numeric step (or epoch).
const METRIC_LINE = /(?:^|[\s\]:])METRIC\s+(\{.*\})\s*$/;

export function parseMetric(line) {
  const match = METRIC_LINE.exec(line);
  if (!match) return null;
  let data;
  try {
    data = JSON.parse(match[1]);
  } catch {
    return null;
  }
  if (!data || typeof data !== "object" || Array.isArray(data)) return null;
  const point = {};
  for (const [key, value] of Object.entries(data)) {
    if (typeof value === "number" && Number.isFinite(value)) point[key] = value;
  }
  if (point.step === undefined && point.epoch !== undefined) point.step = point.epoch;
  return point.step === undefined ? null : point;
}

export function metricNames(points) {
  const names = [];
  for (const point of points) {
    for (const key of Object.keys(point)) {
      if (key !== "step" && key !== "epoch" && !names.includes(key)) names.push(key);
    }
  }
  return names;
}

// Points by step, the newer list winning: what the backend parsed from the whole log, merged with
// what arrived line by line meanwhile (neither is dropped).
export function mergePoints(older, newer) {
  const byStep = new Map();
  for (const point of older) byStep.set(point.step, point);
  for (const point of newer) byStep.set(point.step, { ...byStep.get(point.step), ...point });
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}
