export function summarize(visits: number, notes: string[]): string {
  return `Visit ${visits}; notes: ${notes.join(", ") || "none"}`;
}
