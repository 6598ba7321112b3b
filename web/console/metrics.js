// Prometheus text (troupe's /metrics) read into series, and the sums, rates and histogram
// quantiles the overview draws.

/// Parses the text exposition format: [{name, labels: {k: v}, value}].
export function parseMetrics(text) {
  const out = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let l;
      while ((l = re.exec(m[3]))) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    const value = m[4] === "+Inf" ? Infinity : m[4] === "-Inf" ? -Infinity : Number(m[4]);
    out.push({ name: m[1], labels, value });
  }
  return out;
}

/// The sum of every series named `name` whose labels include `match`.
export function total(series, name, match = {}) {
  let sum = 0;
  let seen = false;
  for (const s of series) {
    if (s.name !== name) continue;
    if (Object.entries(match).some(([k, v]) => s.labels[k] !== v)) continue;
    sum += s.value;
    seen = true;
  }
  return seen ? sum : null;
}

/// A histogram's cumulative buckets summed over its series: [{le, count}] sorted by le.
export function buckets(series, name, match = {}) {
  const byLe = new Map();
  for (const s of series) {
    if (s.name !== `${name}_bucket`) continue;
    if (Object.entries(match).some(([k, v]) => s.labels[k] !== v)) continue;
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + s.value);
  }
  return [...byLe.entries()].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
}

/// The buckets of `now` minus those of `before` (the observations in between).
export function bucketDelta(now, before) {
  const prev = new Map((before ?? []).map((b) => [b.le, b.count]));
  return now.map((b) => ({ le: b.le, count: b.count - (prev.get(b.le) ?? 0) }));
}

/// The q-quantile (0..1) of cumulative buckets, interpolated linearly inside the bucket
/// (as Prometheus's histogram_quantile); null without observations.
export function quantile(q, cumulative) {
  if (!cumulative.length) return null;
  const count = cumulative[cumulative.length - 1].count;
  if (count <= 0) return null;
  const rank = q * count;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of cumulative) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe; // beyond the last finite bound
      const inBucket = b.count - prevCount;
      return inBucket <= 0 ? b.le : prevLe + ((b.le - prevLe) * (rank - prevCount)) / inBucket;
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}
