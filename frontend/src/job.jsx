// The "Training job" tab of a task instance: header, conditions, replicas (live), events, a log
// pane per replica with follow, and the learning curves of the run.
import { useCallback, useEffect, useRef, useState } from "react";
import { apiUrl, getJSON, metricNames, parseMetric, taskPath, withQuery } from "./api.js";
import { Curves } from "./chart.jsx";
import { Message, Phase, styles, when } from "./ui.jsx";

const MAX_LOG_LINES = 2000;

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
        <span style={{ display: "inline-flex", alignItems: "center", gap: 6, marginRight: 12 }}>
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

function LogPane({ url, pod, follow, onLine }) {
  const [lines, setLines] = useState([]);
  const [status, setStatus] = useState("");
  const box = useRef(null);
  const stick = useRef(true);
  const lineRef = useRef(onLine);
  lineRef.current = onLine;

  useEffect(() => {
    setLines([]);
    setStatus(follow ? "following" : "");
    let pending = [];
    let frame = 0;
    const flush = () => {
      frame = 0;
      const batch = pending;
      pending = [];
      setLines((old) => {
        const next = old.concat(batch);
        return next.length > MAX_LOG_LINES ? next.slice(next.length - MAX_LOG_LINES) : next;
      });
    };
    const push = (item) => {
      pending.push(item);
      if (!frame) frame = requestAnimationFrame(flush);
    };
    if (!follow) {
      getJSON(url)
        .then((body) => {
          (body.previous || []).forEach((text) => push({ text, previous: true }));
          body.lines.forEach((text) => push({ text }));
        })
        .catch((error) => setStatus(error.message));
      return () => frame && cancelAnimationFrame(frame);
    }
    const source = new EventSource(`${url.replace(/\?.*$/, "")}/follow${url.includes("?") ? url.slice(url.indexOf("?")) : ""}`, {
      withCredentials: true,
    });
    source.addEventListener("line", (message) => {
      const data = JSON.parse(message.data);
      push({ text: data.line });
      if (lineRef.current) lineRef.current(data.line);
    });
    source.addEventListener("restart", (message) => {
      push({ text: `── container restarted (restart ${JSON.parse(message.data).value}) ──`, marker: true });
    });
    source.addEventListener("end", (message) => {
      setStatus(`replica ${JSON.parse(message.data).value}`);
      source.close();
    });
    source.addEventListener("failure", (message) => {
      setStatus(JSON.parse(message.data).detail);
      source.close();
    });
    return () => {
      source.close();
      if (frame) cancelAnimationFrame(frame);
    };
  }, [url, follow]);

  useEffect(() => {
    if (box.current && stick.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines]);

  return (
    <div>
      <div style={{ fontSize: 12, ...styles.muted }}>
        {pod} {status && `· ${status}`}
      </div>
      <pre
        ref={box}
        data-testid={`log-${pod}`}
        style={styles.pre}
        onScroll={(e) => {
          const el = e.currentTarget;
          stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
        }}
      >
        {lines.map((l, i) => (
          <div key={i} style={l.marker ? { opacity: 0.6 } : l.previous ? { opacity: 0.7 } : undefined}>
            {l.text}
          </div>
        ))}
      </pre>
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

export function TrainingJobView(props) {
  const { base, query } = taskPath(props);
  const [snapshot, setSnapshot] = useState(null);
  const [error, setError] = useState(null);
  const [selected, setSelected] = useState(null);
  const [points, setPoints] = useState([]);
  const [metricsReplica, setMetricsReplica] = useState(null);
  const [live, setLive] = useState(false);

  const loadMetrics = useCallback(() => {
    getJSON(withQuery(apiUrl(`${base}/job/metrics`), query))
      .then((body) => {
        setPoints(body.points);
        setMetricsReplica(body.replica);
      })
      .catch(() => undefined);
  }, [base, query]);

  useEffect(() => {
    let source = null;
    let closed = false;
    setSnapshot(null);
    setError(null);
    getJSON(withQuery(apiUrl(`${base}/job`), query))
      .then((first) => {
        if (closed) return;
        setSnapshot(first);
        loadMetrics();
        if (first.job.finished && first.replicas.every((r) => r.phase !== "Running" && r.phase !== "Pending")) return;
        source = new EventSource(withQuery(apiUrl(`${base}/job/stream`), query), { withCredentials: true });
        setLive(true);
        source.addEventListener("snapshot", (message) => setSnapshot(JSON.parse(message.data)));
        source.addEventListener("end", () => {
          source.close();
          setLive(false);
          loadMetrics();
          getJSON(withQuery(apiUrl(`${base}/job`), query))
            .then((last) => !closed && setSnapshot(last))
            .catch(() => undefined);
        });
        source.addEventListener("failure", (message) => {
          setError(JSON.parse(message.data).detail);
          source.close();
          setLive(false);
        });
      })
      .catch((e) => setError(e.status === 404 ? `No training job: ${e.message}` : e.message));
    return () => {
      closed = true;
      if (source) source.close();
    };
  }, [base, query, loadMetrics]);

  const onLine = useCallback(
    (line) => {
      const point = parseMetric(line);
      if (point) setPoints((old) => (old.some((p) => p.step === point.step) ? old : [...old, point]));
    },
    [setPoints],
  );

  if (error && !snapshot) return <Message error>{error}</Message>;
  if (!snapshot) return <Message>Loading the training job…</Message>;
  const { job, replicas, events } = snapshot;
  const current = selected || metricsReplica || (replicas[0] && replicas[0].pod);
  const running = replicas.find((r) => r.pod === current);
  const follow = live && running && (running.phase === "Running" || running.phase === "Pending");
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
            key={`${current}-${follow ? "f" : "t"}`}
            pod={current}
            follow={Boolean(follow)}
            url={withQuery(apiUrl(`${base}/job/logs/${encodeURIComponent(current)}`), query)}
            onLine={current === metricsReplica ? onLine : undefined}
          />
        )}
      </div>
      <Events events={events} />
    </div>
  );
}
