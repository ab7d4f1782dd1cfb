// Short names for DAG runs in legends and tables (the full run id is the hover title).

const GENERATED = /^(manual|scheduled|backfill|asset_triggered|dataset_triggered)__/;
const MAX = 18;

function two(n) {
  return String(n).padStart(2, "0");
}

function stamp(value) {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return "";
  return `${two(date.getMonth() + 1)}-${two(date.getDate())} ${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}`;
}

// Airflow's own run ids ("manual__2026-01-01T09:14:03.123+00:00") become "manual 01-01 09:14:03"
// (the run's run_after, local time); a run id someone chose stays, cut at 18 characters. Labels
// that would still be equal get "#2", "#3"….
export function runLabels(runs) {
  const labels = runs.map(({ run_id: id, run_after: after }) => {
    const generated = GENERATED.exec(id || "");
    if (generated) {
      const when = stamp(after) || id.slice(generated[0].length, generated[0].length + 19).replace("T", " ");
      return `${generated[1].replace("_triggered", "")} ${when}`;
    }
    return id.length > MAX ? `${id.slice(0, MAX - 1)}…` : id;
  });
  const seen = new Map();
  return labels.map((label) => {
    const count = (seen.get(label) || 0) + 1;
    seen.set(label, count);
    return count > 1 ? `${label} #${count}` : label;
  });
}
