// Line diffs for the page: an edit's old and new text as added, removed
// and kept lines (Myers' algorithm), and a unified diff's lines by kind.

export type LineKind = "add" | "del" | "same" | "hunk" | "meta";

export interface DiffLine {
  kind: LineKind;
  text: string;
}

const splitLines = (s: string) => (s === "" ? [] : s.replace(/\n$/, "").split("\n"));

// Past this many lines on a side, or this many changed lines, the diff is
// not searched: everything old is removed and everything new added (still
// right, only less telling; the search's memory grows with the square of
// the changes).
const maxLines = 5000;
const maxEdits = 1000;

/** lineDiff returns the lines of a and b as a diff: removed, added and
 * kept lines, in order. */
export function lineDiff(a: string, b: string): DiffLine[] {
  const x = splitLines(a);
  const y = splitLines(b);
  const all = (): DiffLine[] => [...x.map((text) => ({ kind: "del" as const, text })), ...y.map((text) => ({ kind: "add" as const, text }))];
  if (x.length > maxLines || y.length > maxLines) return all();
  // Myers: v[k] is the furthest x on diagonal k = x - y with d edits; the
  // diagonals -d-1..d+1 of each round's start are kept to walk back.
  const n = x.length;
  const m = y.length;
  const max = Math.min(n + m, maxEdits);
  const off = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = false;
  for (let d = 0; d <= max && !found; d++) {
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let i = k === -d || (k !== d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1] : v[off + k - 1] + 1;
      let j = i - k;
      while (i < n && j < m && x[i] === y[j]) {
        i++;
        j++;
      }
      v[off + k] = i;
      if (i >= n && j >= m) {
        found = true;
        break;
      }
    }
  }
  if (!found) return all();
  // Walk back from (n, m).
  const out: DiffLine[] = [];
  let i = n;
  let j = m;
  for (let d = trace.length - 1; d >= 0; d--) {
    const t = trace[d];
    const at = (k: number) => t[k + d + 1];
    const k = i - j;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const pi = d === 0 ? 0 : at(prevK);
    const pj = pi - prevK;
    while (i > pi && j > pj) {
      out.push({ kind: "same", text: x[--i] });
      j--;
    }
    if (d === 0) break;
    if (i === pi) out.push({ kind: "add", text: y[--j] });
    else out.push({ kind: "del", text: x[--i] });
  }
  return out.reverse();
}

/** diffStat counts a diff's added and removed lines. */
export function diffStat(lines: DiffLine[]): { add: number; del: number } {
  let add = 0;
  let del = 0;
  for (const l of lines) {
    if (l.kind === "add") add++;
    else if (l.kind === "del") del++;
  }
  return { add, del };
}

/** context keeps up to n kept lines around each change; longer runs of
 * kept lines become one hunk marker saying how many were left out. */
export function withContext(lines: DiffLine[], n = 3): DiffLine[] {
  const keep = new Array(lines.length).fill(false);
  lines.forEach((l, i) => {
    if (l.kind !== "same") for (let j = Math.max(0, i - n); j <= Math.min(lines.length - 1, i + n); j++) keep[j] = true;
  });
  const out: DiffLine[] = [];
  let skipped = 0;
  lines.forEach((l, i) => {
    if (keep[i]) {
      if (skipped) out.push({ kind: "hunk", text: `⋯ ${skipped} unchanged line${skipped === 1 ? "" : "s"}` });
      skipped = 0;
      out.push(l);
    } else skipped++;
  });
  if (skipped && out.length) out.push({ kind: "hunk", text: `⋯ ${skipped} unchanged line${skipped === 1 ? "" : "s"}` });
  return out;
}

/** parseUnified sorts the lines of a unified diff (git diff, diff -u) by
 * kind. */
export function parseUnified(text: string): DiffLine[] {
  return splitLines(text).map((line) => {
    if (line.startsWith("@@")) return { kind: "hunk", text: line };
    if (/^(\+\+\+ |--- |diff |index |new file|deleted file|similarity |rename |old mode|new mode)/.test(line)) return { kind: "meta", text: line };
    if (line.startsWith("+")) return { kind: "add", text: line.slice(1) };
    if (line.startsWith("-")) return { kind: "del", text: line.slice(1) };
    return { kind: "same", text: line.startsWith(" ") ? line.slice(1) : line };
  });
}
