// Axes of the learning curves: d3-scale's nice domains and ticks, d3-format's labels. Pure: the
// chart draws what these return, and tests/ui/test_chart_scales.py runs them in Chromium.
import { format } from "d3-format";
import { scaleLinear, scaleLog } from "d3-scale";

const SUPERSCRIPT = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
const TICKS = 5;

// One notation for a whole axis: exponents when a tick is tiny or huge, else plain decimals with
// the precision the tick step needs (d3's tickFormat) — never "3.0e-5" next to "0.428".
function tiny(values) {
  return values.some((v) => v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5));
}

function power(value) {
  const exponent = Math.round(Math.log10(value));
  return `10${String(exponent).replace(/./g, (c) => SUPERSCRIPT[c])}`;
}

// x: training steps (or another x the caller gives). Integer steps get integer ticks only.
export function stepAxis(lo, hi, { integer = true, count = 6 } = {}) {
  const domain = lo === hi ? [lo - 1, hi + 1] : [lo, hi];
  const scale = scaleLinear().domain(domain);
  let ticks = scale.ticks(count);
  if (integer) {
    ticks = ticks.filter(Number.isInteger);
    if (!ticks.length) ticks = [Math.round(lo)];
  }
  const label = integer ? format(",d") : scale.tickFormat(count, tiny(ticks) ? "~e" : undefined);
  return { scale, domain: scale.domain(), ticks, labels: ticks.map(label) };
}

// x as a share of each run ("% of run"): 0..100 with ticks every 25.
export function progressAxis() {
  const scale = scaleLinear().domain([0, 100]);
  const ticks = [0, 25, 50, 75, 100];
  return { scale, domain: [0, 100], ticks, labels: ticks.map((t) => `${t}%`) };
}

// Whether a metric can be drawn on a log axis: every value positive.
export function logPossible(values) {
  return values.length > 0 && values.every((v) => v > 0);
}

// y: a metric's values. Linear: a nice domain around them. Log (all values > 0): the data's range,
// labelled at the powers of ten it spans (10⁻⁵ … 10⁰), or at d3's ticks when it spans less than that.
export function valueAxis(lo, hi, { log = false, count = TICKS } = {}) {
  if (log && lo > 0 && hi > 0) {
    const domain = lo === hi ? [lo / 2, hi * 2] : [lo, hi];
    const scale = scaleLog().domain(domain);
    const all = scale.ticks();
    const powers = all.filter((t) => Math.abs(Math.log10(t) - Math.round(Math.log10(t))) < 1e-9);
    if (powers.length >= 2) {
      const notation = tiny(powers) ? power : format("~g");
      return { scale, domain, ticks: powers, labels: powers.map(notation), log: true };
    }
    const ticks = all.length > count + 1 ? all.filter((_, i) => i % Math.ceil(all.length / count) === 0) : all;
    const label = format(tiny(ticks) ? ".2~e" : ".2~g");
    return { scale, domain, ticks, labels: ticks.map(label), log: true };
  }
  const spread = lo === hi ? Math.abs(lo || 1) * 0.1 : 0;
  const scale = scaleLinear()
    .domain([lo - spread, hi + spread])
    .nice(count);
  const ticks = scale.ticks(count);
  const label = scale.tickFormat(count, tiny(ticks) ? "~e" : undefined);
  return { scale, domain: scale.domain(), ticks, labels: ticks.map(label), log: false };
}

// One value in a table or a tooltip: 4 significant digits, exponents for tiny and huge ones
// ("3e-5", "0.4281", "12,345.6", "1.235e+5"); integers as integers; never a fraction rounded to a
// whole number (an accuracy of 0.99998 is not "1").
export function formatValue(value) {
  if (typeof value !== "number" || !Number.isFinite(value)) return "";
  if (tiny([value])) return format(".4~e")(value);
  if (Number.isInteger(value)) return format(",d")(value);
  if (Math.abs(value) >= 1000) return format(",.1~f")(value);
  const short = format(".4~g")(value);
  return Number.isInteger(Number(short)) ? format(".6~g")(value) : short;
}
