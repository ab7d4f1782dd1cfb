// A replica's log: followed live while it runs (across container restarts), then the finished
// log as the cluster has it, paged ("load earlier lines") — never cut back to a tail.
import { useEffect, useLayoutEffect, useRef, useState } from "react";
import { getJSON, withQuery } from "./api.js";
import { styles } from "./ui.jsx";

export const PAGE = 1000; // lines per page of a log read (not followed)
const MAX_FOLLOWED = 20000; // lines a following pane keeps; earlier ones are paged in once the replica finished

// The pane holds blocks: a container's lines ({lines, container, start}) and restart markers.
// ``start`` is the number (from 0) of a block's first line in its container's log when known; a
// block with start > 0 can load the lines before it. "current" / "previous" are the containers the
// cluster still serves; "older" ones were seen live only.
function logBlock(container, start, lines) {
  return { kind: "log", container, start, lines: lines.map((text) => ({ text })) };
}

function marker(text) {
  return { kind: "marker", text };
}

function pageBlocks(body) {
  const blocks = [];
  if (body.previous_total) {
    blocks.push({ ...logBlock("previous", body.previous_start, body.previous), truncated: body.previous_truncated });
    blocks.push(marker("── container restarted ──"));
  }
  blocks.push({ ...logBlock("current", body.start, body.lines), truncated: body.truncated });
  return blocks;
}

// The finished log replaces what the follow showed of the containers the cluster still serves;
// containers older than those stay as they were seen.
function settle(blocks, body) {
  const logs = blocks.map((b, i) => (b.kind === "log" ? i : -1)).filter((i) => i >= 0);
  const replaced = body.previous_total ? logs[logs.length - 2] : logs[logs.length - 1];
  const kept = replaced === undefined ? [] : blocks.slice(0, replaced);
  return [...kept.map((b) => (b.kind === "log" ? { ...b, container: "older" } : b)), ...pageBlocks(body)];
}

function lineCount(blocks) {
  return blocks.reduce((n, b) => n + (b.kind === "log" ? b.lines.length : 0), 0);
}

function trim(blocks) {
  let excess = lineCount(blocks) - MAX_FOLLOWED;
  if (excess <= 0) return blocks;
  return blocks.map((b) => {
    if (excess <= 0 || b.kind !== "log") return b;
    const cut = Math.min(excess, b.lines.length);
    excess -= cut;
    return { ...b, lines: b.lines.slice(cut), dropped: (b.dropped || 0) + cut, start: b.start === null ? null : b.start + cut };
  });
}

// A finished replica's pane as it was last shown, kept across re-mounts of the tab (Airflow mounts
// it anew when the task's state changes, which is when a replica has just finished): the lines the
// follow showed, and the pages loaded since, stay.
const remembered = new Map();
const REMEMBERED = 20;

function remember(url, value) {
  remembered.delete(url);
  remembered.set(url, value);
  if (remembered.size > REMEMBERED) remembered.delete(remembered.keys().next().value);
}

function finishedPhase(phase) {
  return Boolean(phase) && phase !== "Running" && phase !== "Pending";
}

export function LogPane({ url, pod, follow, phase, onLine }) {
  const memory = remembered.get(url);
  const [blocks, setBlocks] = useState(() => (memory ? memory.blocks : []));
  const [status, setStatus] = useState(() => (memory ? memory.status : ""));
  const [final, setFinal] = useState(() => Boolean(memory && memory.final)); // the finished log is shown
  const [busy, setBusy] = useState(false);
  const box = useRef(null);
  const stick = useRef(true);
  const anchor = useRef(null);
  const blocksRef = useRef(blocks);
  blocksRef.current = blocks;
  const lineRef = useRef(onLine);
  lineRef.current = onLine;

  const phaseRef = useRef(phase);
  phaseRef.current = phase;

  useEffect(() => {
    if (blocks.length || status) remember(url, { blocks, status, final });
  }, [url, blocks, status, final]);

  useEffect(() => {
    let closed = false;
    let pending = [];
    let frame = 0;
    const before = remembered.get(url);
    const read = (tail, then, done) =>
      getJSON(withQuery(url, `tail=${tail}`))
        .then((body) => {
          if (closed) return;
          setBlocks((old) => then(old, body));
          if (done) setFinal(true);
        })
        .catch((error) => !closed && setStatus(error.message));
    if (!follow) {
      if (before && before.final) return undefined; // shown as it was: nothing more will come
      setStatus("");
      // At least as many lines as this pane showed before it was mounted anew.
      const seen = before ? lineCount(before.blocks) : 0;
      read(Math.max(PAGE, Math.min(seen, MAX_FOLLOWED)), (_, body) => pageBlocks(body), finishedPhase(phaseRef.current));
      return () => {
        closed = true;
      };
    }
    setBlocks([]);
    setFinal(false);
    setStatus("following");
    const flush = () => {
      frame = 0;
      const batch = pending;
      pending = [];
      setBlocks((old) => {
        let next = old;
        for (const item of batch) {
          if (item.restart) {
            next = [...next.map((b) => (b.kind === "log" ? { ...b, container: "older" } : b)), marker(item.restart), logBlock("current", null, [])];
            continue;
          }
          const lastLog = next.length && next[next.length - 1].kind === "log" ? next[next.length - 1] : null;
          if (!lastLog) next = [...next, logBlock("current", null, [item.text])];
          else next = [...next.slice(0, -1), { ...lastLog, lines: lastLog.lines.concat({ text: item.text }) }];
        }
        return trim(next);
      });
    };
    const push = (item) => {
      pending.push(item);
      if (!frame) frame = requestAnimationFrame(flush);
    };
    const source = new EventSource(`${url.replace(/\?.*$/, "")}/follow${url.includes("?") ? url.slice(url.indexOf("?")) : ""}`, {
      withCredentials: true,
    });
    let received = 0;
    source.addEventListener("line", (message) => {
      const data = JSON.parse(message.data);
      received += 1;
      push({ text: data.line });
      if (lineRef.current) lineRef.current(data.line);
    });
    source.addEventListener("restart", (message) => {
      push({ restart: `── container restarted (restart ${JSON.parse(message.data).value}) ──` });
    });
    source.addEventListener("end", (message) => {
      source.close();
      setStatus(`replica ${JSON.parse(message.data).value}`);
      if (frame) {
        cancelAnimationFrame(frame);
        flush();
      }
      // The replica is done, so its log is final: show it as the cluster has it, at least as many
      // lines as the follow did, the rest a click away.
      read(Math.max(PAGE, Math.min(received, MAX_FOLLOWED)), settle, true);
    });
    source.addEventListener("failure", (message) => {
      setStatus(JSON.parse(message.data).detail);
      source.close();
    });
    return () => {
      closed = true;
      source.close();
      if (frame) cancelAnimationFrame(frame);
    };
  }, [url, follow]);

  useLayoutEffect(() => {
    const el = box.current;
    if (!el) return;
    if (anchor.current) {
      el.scrollTop = anchor.current.top + (el.scrollHeight - anchor.current.height); // earlier lines went in above
      anchor.current = null;
    } else if (stick.current) {
      el.scrollTop = el.scrollHeight;
    }
  }, [blocks]);

  const earlier = (index) => {
    const block = blocksRef.current[index];
    setBusy(true);
    getJSON(withQuery(url, `before=${block.start}`, `tail=${PAGE}`, block.container === "previous" ? "previous=true" : ""))
      .then((body) => {
        if (box.current) anchor.current = { top: box.current.scrollTop, height: box.current.scrollHeight };
        setBlocks((old) =>
          old.map((b, i) =>
            i === index && b.start === block.start
              ? { ...b, start: body.start, lines: body.lines.map((text) => ({ text })).concat(b.lines) }
              : b,
          ),
        );
      })
      .catch((error) => setStatus(error.message))
      .finally(() => setBusy(false));
  };

  const shown = status || (!follow && finishedPhase(phase) ? `replica ${phase}` : "");
  return (
    <div>
      <div style={{ fontSize: 12, ...styles.muted }} data-testid={`log-status-${pod}`}>
        {pod} {shown && `· ${shown}`}
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
        {blocks.map((b, i) =>
          b.kind === "marker" ? (
            <div key={`m${i}`} style={{ opacity: 0.6 }}>
              {b.text}
            </div>
          ) : (
            <LogBlock key={`b${i}`} block={b} busy={busy} onEarlier={() => earlier(i)} />
          ),
        )}
      </pre>
    </div>
  );
}

function LogBlock({ block, busy, onEarlier }) {
  const style = block.container === "current" ? undefined : { opacity: 0.7 };
  const hidden = block.start ?? 0;
  return (
    <>
      {block.start > 0 && block.container !== "older" && (
        <button type="button" data-testid="load-earlier" disabled={busy} onClick={onEarlier} style={{ ...styles.button, margin: "2px 0 6px" }}>
          load earlier lines ({Math.min(PAGE, hidden)} of {hidden} before)
        </button>
      )}
      {block.truncated && block.start === 0 && (
        <div style={styles.muted}>… only the last lines of this container are kept here; kubectl logs has all of them</div>
      )}
      {block.dropped > 0 && block.start === null && (
        <div style={styles.muted}>… {block.dropped} earlier lines are not kept while following; all of them are here once the replica has finished</div>
      )}
      {block.lines.map((l, j) => (
        <div key={j} style={style}>
          {l.text}
        </div>
      ))}
    </>
  );
}
