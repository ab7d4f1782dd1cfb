// The "Training job" tab of a task instance: header, conditions, replicas (live), events, a log
// pane per replica with follow, and the learning curves of the run.
import { useCallback, useEffect, useRef, useState } from "react";
import { apiUrl, getJSON, mergePoints, metricNames, parseMetric, taskPath, withQuery } from "./api.js";
import { Curves } from "./chart.jsx";
import { LogPane } from "./logpane.jsx";
import { Message, Phase, styles, when } from "./ui.jsx";


function Header({ job }) {
  const spec = job.spec || { replicas: [] };
  return (
    <div data-testid="job-header">
      <div style={{ display: "flex", gap: 12, alignItems: "center", flexWrap: "wrap" }}>
        <strong style={{ fontSize: 16 }}>
          {job.kind} {job.namespace}/{job.name}
        </strong>
        <Phase phase={job.phase} testId="job-phase" />
        {job.message && <span style={job.phase === "Failed" ? styles.error : styles.muted}>{job.message}</span>}
      </div>
      <div style={{ ...styles.muted, fontSize: 12, marginTop: 4 }}>
        uid <span style={styles.mono}>{job.uid}</span> · created {when(job.created)}
        {job.started && ` · started ${when(job.started)}`}
        {job.completed && ` · completed ${when(job.completed)}`}
      </div>
      <div style={{ fontSize: 12, marginTop: 4 }}>
        {spec.replicas.map((r) => (
          <span key={r.type} style={{ marginRight: 14 }}>
            {r.type} × {r.replicas} <span style={styles.muted}>({r.image || "no image"}{r.gpus ? `, ${r.gpus} GPU` : ""}, restart {r.restart_policy || "—"})</span>
          </span>
        ))}
      </div>
      {job.trainer_status && <TrainerStatus status={job.trainer_status} />}
    </div>
  );
}

function TrainerStatus({ status }) {
  // Kubeflow Trainer v2 TrainJob status.trainerStatus: {progressPercentage, estimatedRemainingSeconds,
  // metrics: [{name, value}], lastUpdatedTime}, shown as the trainer reported it.
  const progress = status.progressPercentage;
  const metrics = Array.isArray(status.metrics) ? status.metrics : [];
  return (
    <div data-testid="trainer-status" style={{ fontSize: 12, marginTop: 6 }}>
      {typeof progress === "number" && (
        <span data-testid="trainer-progress" data-value={progress} style={{ display: "inline-flex", alignItems: "center", gap: 6, marginRight: 12 }}>
          <span style={{ width: 160, height: 8, background: "rgba(128,128,128,.25)", borderRadius: 4, display: "inline-block" }}>
            <span style={{ width: `${Math.max(0, Math.min(100, progress))}%`, height: 8, background: "#2563eb", borderRadius: 4, display: "block" }} />
          </span>
          {progress}%
        </span>
      )}
      {typeof status.estimatedRemainingSeconds === "number" && <span style={{ marginRight: 12 }}>ETA {status.estimatedRemainingSeconds} s</span>}
      {metrics.map((m) => (
        <span key={m.name} style={{ marginRight: 10 }}>
          {m.name} <strong>{m.value}</strong>
        </span>
      ))}
      {status.lastUpdatedTime && <span style={styles.muted}>updated {when(status.lastUpdatedTime)}</span>}
    </div>
  );
}

function Conditions({ conditions }) {
  if (!conditions.length) return null;
  return (
    <div style={styles.section}>
      <h3 style={styles.h}>Conditions</h3>
      <ol data-testid="conditions" style={{ margin: 0, paddingLeft: 18, fontSize: 13 }}>
        {conditions.map((c) => (
          <li key={`${c.type}-${c.time}`} style={c.type === "Failed" && c.status === "True" ? styles.error : undefined}>
            <strong>{c.type}</strong> {c.status !== "True" && `(${c.status}) `}
            <span style={styles.muted}>{when(c.time)}</span> {c.reason && `· ${c.reason}`} {c.message && `— ${c.message}`}
          </li>
        ))}
      </ol>
    </div>
  );
}

function Replicas({ replicas, selected, onSelect }) {
  return (
    <div style={styles.section}>
      <h3 style={styles.h}>Replicas</h3>
      <table style={styles.table} data-testid="replicas">
        <thead>
          <tr>
            {["Replica", "Pod", "Phase", "State", "Restarts", "Exit code", "Started", "Finished", "Node", "GPUs"].map((h) => (
              <th key={h} style={styles.th}>
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {replicas.map((r) => (
            <tr
              key={r.pod}
              data-testid={`replica-${r.pod}`}
              data-phase={r.phase}
              data-failed={r.failed ? "true" : "false"}
              onClick={() => onSelect(r.pod)}
              style={{
                cursor: "pointer",
                ...(r.failed ? styles.error : {}),
                ...(selected === r.pod ? { background: "rgba(37,99,235,.08)" } : {}),
              }}
            >
              <td style={styles.td}>
                {r.type}-{r.index}
              </td>
              <td style={{ ...styles.td, ...styles.mono }}>{r.pod}</td>
              <td style={styles.td}>
                <Phase phase={r.phase} testId={`phase-${r.pod}`} />
              </td>
              <td style={styles.td}>
                {r.state}
                {r.reason && ` (${r.reason})`}
              </td>
              <td style={styles.td}>{r.restarts}</td>
              <td style={styles.td} data-testid={`exit-${r.pod}`}>
                {r.exit_code ?? ""}
                {r.exit_reason && ` ${r.exit_reason}`}
              </td>
              <td style={styles.td}>{when(r.started)}</td>
              <td style={styles.td}>{when(r.finished)}</td>
              <td style={styles.td}>{r.node}</td>
              <td style={styles.td}>{r.gpus || ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Events({ events }) {
  if (!events.length) return null;
  return (
    <div style={styles.section}>
      <h3 style={styles.h}>Events</h3>
      <table style={styles.table} data-testid="events">
        <thead>
          <tr>
            {["Last seen", "Type", "Reason", "Object", "Message"].map((h) => (
              <th key={h} style={styles.th}>
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {events
            .slice()
            .reverse()
            .slice(0, 100)
            .map((e, i) => (
              <tr key={`${e.object}-${e.reason}-${e.last}-${i}`} style={e.type === "Warning" ? styles.error : undefined}>
                <td style={styles.td}>{when(e.last)}</td>
                <td style={styles.td}>{e.type}</td>
                <td style={styles.td}>{e.reason}</td>
                <td style={{ ...styles.td, ...styles.mono }}>{e.object}</td>
                <td style={styles.td}>
                  {e.message}
                  {e.count > 1 && <span style={styles.muted}> (×{e.count})</span>}
                </td>
              </tr>
            ))}
        </tbody>
      </table>
    </div>
  );
}

function Failures({ replicas, base, query }) {
  const failed = replicas.filter((r) => r.failed);
  const [tails, setTails] = useState({});
  const names = failed.map((r) => r.pod).join(",");
  useEffect(() => {
    failed.forEach((r) => {
      getJSON(withQuery(apiUrl(`${base}/job/logs/${encodeURIComponent(r.pod)}`), query, "tail=30"))
        .then((body) => setTails((old) => ({ ...old, [r.pod]: body.lines.length ? body.lines : body.previous })))
        .catch(() => undefined);
    });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [names, base, query]);
  if (!failed.length) return null;
  return (
    <div style={{ ...styles.section, ...styles.error }} data-testid="failures">
      <h3 style={styles.h}>Failed replicas</h3>
      {failed.map((r) => (
        <div key={r.pod} data-testid={`failure-${r.pod}`} style={{ marginBottom: 10 }}>
          <div>
            <strong>{r.pod}</strong> exited with code <strong data-testid={`failure-exit-${r.pod}`}>{r.exit_code ?? "?"}</strong>
            {r.exit_reason && ` (${r.exit_reason})`}
          </div>
          <pre style={{ ...styles.pre, color: "#dc2626" }} data-testid={`failure-log-${r.pod}`}>
            {(tails[r.pod] || []).join("\n")}
          </pre>
        </div>
      ))}
    </div>
  );
}

// The last snapshot of each tab, kept across re-mounts: Airflow's UI mounts the plugin anew when the
// task's state changes, and the replicas must not vanish until the next answer comes.
const remembered = new Map();
const REMEMBERED = 20;

function remember(key, value) {
  remembered.delete(key);
  remembered.set(key, value);
  if (remembered.size > REMEMBERED) remembered.delete(remembered.keys().next().value);
}

function settled(snapshot) {
  return snapshot.job.finished && snapshot.replicas.every((r) => r.phase !== "Running" && r.phase !== "Pending");
}

function Absent({ absent }) {
  if (absent.waiting) {
    return (
      <Message testId="waiting">
        Waiting for the training job… The task is {absent.state || "not scheduled yet"}; its job shows here as soon as
        the task submits it.
      </Message>
    );
  }
  return <Message testId="no-job">No training job here: {absent.detail}.</Message>;
}

export function TrainingJobView(props) {
  const { base, query } = taskPath(props);
  const key = `${base}?${query}`;
  const memory = remembered.get(key);
  const [snapshot, setSnapshot] = useState(memory ? memory.snapshot : null);
  const [absent, setAbsent] = useState(null); // why there is no job (yet): {detail, waiting, state}
  const [error, setError] = useState(null);
  const [selected, setSelected] = useState(null);
  const [points, setPoints] = useState(memory ? memory.points : []);
  const [metricsReplica, setMetricsReplica] = useState(memory ? memory.metricsReplica : null);
  const [live, setLive] = useState(false);
  const modes = useRef(new Map()); // pod -> "follow" | "static": how its log pane was opened

  useEffect(() => {
    if (snapshot) remember(key, { snapshot, points, metricsReplica });
  }, [key, snapshot, points, metricsReplica]);

  const loadMetrics = useCallback(() => {
    getJSON(withQuery(apiUrl(`${base}/job/metrics`), query))
      .then((body) => {
        setPoints((old) => mergePoints(body.points, old));
        setMetricsReplica(body.replica);
      })
      .catch(() => undefined);
  }, [base, query]);

  useEffect(() => {
    let source = null;
    let closed = false;
    let metricsAsked = false;
    setError(null);
    const onSnapshot = (next) => {
      setAbsent(null);
      setSnapshot(next);
      if (!metricsAsked && next.replicas.length) {
        metricsAsked = true;
        loadMetrics();
      }
    };
    const stop = () => {
      if (source) source.close();
      setLive(false);
    };
    const openStream = () => {
      source = new EventSource(withQuery(apiUrl(`${base}/job/stream`), query), { withCredentials: true });
      setLive(true);
      source.addEventListener("waiting", (message) => setAbsent(JSON.parse(message.data)));
      source.addEventListener("snapshot", (message) => onSnapshot(JSON.parse(message.data)));
      source.addEventListener("absent", (message) => {
        setAbsent(JSON.parse(message.data));
        stop();
      });
      source.addEventListener("end", () => {
        stop();
        loadMetrics();
        getJSON(withQuery(apiUrl(`${base}/job`), query))
          .then((last) => !closed && setSnapshot(last))
          .catch(() => undefined);
      });
      source.addEventListener("failure", (message) => {
        const failure = JSON.parse(message.data);
        // A job deleted after it finished (on_finish_action) is not an error of this page.
        if (failure.status === 404) setAbsent({ detail: failure.detail, waiting: false });
        else setError(failure.detail);
        stop();
      });
    };
    getJSON(withQuery(apiUrl(`${base}/job`), query))
      .then((first) => {
        if (closed) return;
        onSnapshot(first);
        if (!settled(first)) openStream();
      })
      .catch((e) => {
        if (closed) return;
        if (e.status === 404 && e.body && typeof e.body.waiting === "boolean") {
          setAbsent(e.body);
          if (e.body.waiting) openStream(); // the stream waits for the job, then follows it
        } else if (e.status === 404) {
          setAbsent({ detail: e.message, waiting: false });
        } else {
          setError(e.message);
        }
      });
    return () => {
      closed = true;
      if (source) source.close();
    };
  }, [base, query, loadMetrics]);

  const onLine = useCallback(
    (line) => {
      const point = parseMetric(line);
      if (point) setPoints((old) => mergePoints(old, [point]));
    },
    [setPoints],
  );

  if (error && !snapshot) return <Message error>{error}</Message>;
  if (!snapshot && absent) return <Absent absent={absent} />;
  if (!snapshot) return <Message>Loading the training job…</Message>;
  const { job, replicas, events } = snapshot;
  const current = selected || metricsReplica || (replicas[0] && replicas[0].pod);
  const replica = replicas.find((r) => r.pod === current);
  const running = Boolean(live && replica && (replica.phase === "Running" || replica.phase === "Pending"));
  // A pane opened on a finished replica stays as it is; one opened before the live stream was
  // known to run starts following once it is; a followed pane turns into the finished log by itself.
  if (current && (!modes.current.has(current) || (modes.current.get(current) === "static" && running))) {
    modes.current.set(current, running ? "follow" : "static");
  }
  const mode = modes.current.get(current);
  const metricsPod = metricsReplica || (replicas[0] && replicas[0].pod);
  return (
    <div style={styles.page} data-testid="training-job">
      <Header job={job} />
      {error && <div style={styles.error}>{error}</div>}
      <Conditions conditions={job.conditions} />
      <Replicas replicas={replicas} selected={current} onSelect={setSelected} />
      <Failures replicas={replicas} base={base} query={query} />
      <div style={styles.section}>
        <h3 style={styles.h}>Learning curves</h3>
        {points.length ? (
          <Curves names={metricNames(points)} series={[{ name: job.name, points }]} />
        ) : (
          <div style={{ ...styles.muted, fontSize: 12 }}>
            No metrics yet: training code reports them by printing lines like{" "}
            <code style={styles.mono}>{'METRIC {"step": 1, "loss": 0.4}'}</code>.
          </div>
        )}
      </div>
      <div style={styles.section}>
        <h3 style={styles.h}>Logs</h3>
        <div>
          {replicas.map((r) => (
            <button
              key={r.pod}
              type="button"
              data-testid={`show-log-${r.pod}`}
              style={{ ...styles.button, ...(r.pod === current ? { fontWeight: 700 } : {}), ...(r.failed ? styles.error : {}) }}
              onClick={() => setSelected(r.pod)}
            >
              {r.type}-{r.index}
            </button>
          ))}
        </div>
        {current && (
          <LogPane
            key={`${current}-${mode}`}
            pod={current}
            follow={mode === "follow"}
            phase={replica ? replica.phase : ""}
            url={withQuery(apiUrl(`${base}/job/logs/${encodeURIComponent(current)}`), query)}
            onLine={current === metricsPod ? onLine : undefined}
          />
        )}
      </div>
      <Events events={events} />
    </div>
  );
}
